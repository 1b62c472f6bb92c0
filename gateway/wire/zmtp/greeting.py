"""The ZMTP greeting and version negotiation (RFC 23 "Greeting", RFC 37 "Backwards
Interoperability", libzmq ``zmtp_engine.cpp``), as pure functions over the receive buffer.

The peer's side in three steps, each checked as soon as its bytes are in (an old peer never
sends 64): its signature and major version (:func:`peer_major`: a ZMTP 1.0 peer, an SP header
or garbage are refused here); then, for 3.x, the rest of its 64-byte greeting
(:func:`peer_minor`: mechanism and as-server checked); for 2.0 (RFC 15), its socket-type byte
and identity frame (:func:`v2_handshake`). Our side: :func:`signature` first (11 bytes), then
:func:`greeting_rest` (3.x) or :func:`v2_answer` (2.0) once the peer's version is known.
"""

from __future__ import annotations

from gateway.errors import (
    MechanismError,
    PairingError,
    RemoteProtocolError,
    VersionError,
    WrongWireError,
)
from gateway.wire.events import HandshakeComplete
from gateway.wire.zmtp.framing import LONG, U64, frame_at, frame_header
from gateway.wire.zmtp_mechanism import Mechanism, MechanismMismatch

__all__ = [
    "GREETING_SIZE",
    "SIGNATURE_SIZE",
    "ZMTP2_SOCKET_TYPES",
    "downgrade_refused",
    "greeting_rest",
    "peer_major",
    "peer_minor",
    "signature",
    "v2_answer",
    "v2_handshake",
]

GREETING_SIZE = 64
SIGNATURE_SIZE = 10
_SP_MAGIC = b"\x00SP\x00"

#: RFC 15: the socket-type byte of a ZMTP 2.0 greeting (XPUB 9 and XSUB 10: libzmq's
#: ZMQ_XPUB/ZMQ_XSUB, which its v2 handshake sends as the byte).
ZMTP2_SOCKET_TYPES: dict[int, str] = {
    0: "PAIR", 1: "PUB", 2: "SUB", 3: "REQ", 4: "REP", 5: "DEALER", 6: "ROUTER", 7: "PULL",
    8: "PUSH", 9: "XPUB", 10: "XSUB",
}
_ZMTP2_TYPE_BYTES = {name: code for code, name in ZMTP2_SOCKET_TYPES.items()}


def signature(identity_size: int) -> bytes:
    """The 10-byte signature with libzmq's padding (identity length + 1, big-endian), then our
    major version 3: the first 11 bytes of the greeting (RFC 37 "Version Negotiation"; a ZMTP
    1.0 peer would read it as an identity frame header)."""
    return b"\xff" + U64.pack(identity_size + 1) + b"\x7f" + b"\x03"


def greeting_rest(mechanism: bytes, as_server: bool) -> bytes:
    """Bytes 11-63 of the 3.x greeting: minor 1, mechanism, as-server, filler."""
    return b"\x01" + mechanism + (b"\x01" if as_server else b"\x00") + b"\x00" * 31


def v2_answer(socket_type: str, identity: bytes) -> bytes:
    """What a ZMTP 2.0 peer gets after our signature: our socket-type byte and identity frame."""
    return bytes((_ZMTP2_TYPE_BYTES[socket_type],)) + frame_header(0, len(identity)) + identity


def peer_major(buf: bytes | bytearray, p: int) -> int | None:
    """The peer's major version (1 or more) once its signature and version byte are in; None
    before. Raises for a ZMTP 1.0 peer (:class:`VersionError`), an SP header
    (:class:`WrongWireError`) or anything else (:class:`RemoteProtocolError`)."""
    have = len(buf) - p
    if have < 1:
        return None
    if buf[p] != 0xFF:
        _not_a_signature(bytes(buf[p : p + 4]))
        return None
    if have < SIGNATURE_SIZE:
        return None
    if not buf[p + 9] & 0x01:
        raise VersionError("a ZMTP 1.0 peer (unversioned, long identity frame); this end "
                           "speaks ZMTP 2.0 and 3.x", peer_version="1.0")
    if have < SIGNATURE_SIZE + 1:
        return None
    major = buf[p + 10]
    if major == 0:
        raise VersionError("a ZMTP 1.0 peer (revision 0); this end speaks ZMTP 2.0 and 3.x",
                           peer_version="1.0")
    return major


def downgrade_refused(major: int, mechanism: str) -> VersionError:
    """RFC 37: a ZMTP 2.0 peer on an endpoint with security is refused."""
    return VersionError(f"a ZMTP 2.0 peer (revision {major}) on an endpoint with "
                        f"{mechanism} security: downgrade refused (RFC 37)", peer_version="2.0")


def peer_minor(buf: bytes | bytearray, p: int, mech_name: bytes, mechanism: str,
               security: Mechanism | None) -> int | None:
    """A 3.x peer's minor version once its whole greeting is in (None before), after checking
    its mechanism (ours, ``mech_name`` padded to 20 bytes) and, for PLAIN/CURVE, that the two
    sides are not both servers."""
    if len(buf) - p < GREETING_SIZE:
        return None
    if bytes(buf[p + 12 : p + 32]) != mech_name:
        mech = bytes(buf[p + 12 : p + 32]).rstrip(b"\x00").decode("ascii", "replace")
        raise MechanismError(
            f"the peer wants {mech or '(none)'} security; this endpoint has "
            + ("no security configured (NULL)" if mechanism == "NULL" else f"{mechanism}"),
            peer_mechanism=mech, mechanism=mechanism)
    # RFC 23: exactly one side is the server. libzmq (4.3.5 measured) greets with
    # as-server 0 even as a PLAIN/CURVE server, so only two servers can be told apart.
    if security is not None and security.as_server and buf[p + 32] & 0x01:
        raise MechanismMismatch(f"both sides are {security.name.decode()} servers "
                                "(as-server flag)", peer_mechanism=mechanism,
                                mechanism=mechanism)
    return buf[p + 11]


def v2_handshake(buf: bytes | bytearray, p: int, socket_type: str,
                 accepted: frozenset[str]) -> tuple[HandshakeComplete, int] | None:
    """RFC 15: a 2.0 peer's socket-type byte (byte 11, checked against ``accepted``), then its
    identity frame; the handshake and the position after it, or None until they are in."""
    end = len(buf)
    if end - p < SIGNATURE_SIZE + 2:
        return None
    code = buf[p + 11]
    peer_type = ZMTP2_SOCKET_TYPES.get(code, f"type {code:#04x}")
    if peer_type not in accepted:
        raise PairingError(f"ZMTP {socket_type} cannot talk to {peer_type} (ZMTP 2.0)",
                           ours=socket_type, theirs=peer_type)
    pos = p + SIGNATURE_SIZE + 2
    if end - pos < 2:
        return None
    flags = buf[pos]
    if flags & ~LONG & 0xFF:
        raise RemoteProtocolError(f"ZMTP 2.0 identity frame with flags {flags:#04x}")
    header = frame_at(buf, pos)
    if header is None:
        return None
    _, start, size = header
    if size > 255:  # libzmq: a routing id is at most 255 bytes
        raise RemoteProtocolError(f"ZMTP 2.0 identity of {size} bytes (at most 255)")
    if start + size > end:
        return None
    identity = bytes(buf[start : start + size])
    props = {"socket-type": peer_type.encode("ascii")}
    if identity:
        props["identity"] = identity
    return (HandshakeComplete(peer_type=peer_type, identity=identity, version=(2, 0),
                              properties=props), start + size)


def _not_a_signature(head: bytes) -> None:
    """The first byte is not 0xFF: an SP peer, a ZMTP 1.0 peer, or garbage (raises once
    enough bytes tell which)."""
    if head[0] == 0x00:  # a ZMTP 1.0 length is never 0 (RFC 13): an SP header?
        if head != _SP_MAGIC[: len(head)]:
            raise RemoteProtocolError(f"not a ZMTP greeting (starts {head.hex()})")
        if len(head) == len(_SP_MAGIC):
            raise WrongWireError("an SP (nanomsg/nng) header on a ZeroMQ endpoint")
        return
    if len(head) < 2:
        return
    if head[1] == 0x00:  # a short identity frame: length, flags 0 (RFC 13)
        raise VersionError("a ZMTP 1.0 peer (unversioned); this end speaks ZMTP 2.0 and 3.x",
                           peer_version="1.0")
    raise RemoteProtocolError(f"not a ZMTP greeting (starts {head[:2].hex()}, byte 0 is "
                              "not 0xFF)")
