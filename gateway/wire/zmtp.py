"""ZMTP 3.x, sans-IO (rfc.zeromq.org specs 23 and 37), and ZMTP 2.0 peers (spec 15): NULL here,
PLAIN and CURVE through a :class:`~gateway.wire.zmtp_mechanism.Mechanism` (``security=``;
``zmtp_plain``, ``zmtp_curve``).

One codec per TCP connection. Version negotiation as libzmq does it (RFC 37 "Backwards
Interoperability", libzmq ``zmtp_engine.cpp``): ``initiate()`` gives the 10-byte signature and
our major version (11 bytes; the padding carries the identity length + 1, as libzmq's, so a
ZMTP 1.0 peer would read it as an identity frame header). Once the peer's signature and
version byte are in, the codec queues (``data_to_send()``):

* a 3.x peer: the rest of our greeting (minor, mechanism, as-server, filler), then READY once
  the peer's whole greeting has been read;
* a ZMTP 2.0 peer (revision 1 or 2; JeroMQ 0.3, libzmq 3.x): our socket-type byte and our
  identity frame (RFC 15); the peer's socket-type byte is checked against the pairing table
  and its identity frame read, then messages use the 2.0 framing (flags ``0x01`` MORE, ``0x02``
  LONG, no commands, so no PING);
* a ZMTP 1.0 peer (unversioned, or revision 0): refused with :class:`VersionError`.

A security mechanism other than NULL forbids the downgrade (RFC 37): see
:meth:`ZmtpCodec.downgrade_allowed`. Received messages come out of ``next_event()`` as plain
tuples of ``bytes`` frames; commands become events.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from gateway.errors import (
    LocalProtocolError,
    MechanismError,
    MessageTooLarge,
    PairingError,
    RemoteProtocolError,
    VersionError,
    WrongWireError,
)
from gateway.wire._buffer import COPY_VIA_VIEW, ReceiveBuffer
from gateway.wire.events import Event, HandshakeComplete, PeerError, Ping, Pong, Subscription
from gateway.wire.zmtp_mechanism import AuthenticationFailed, Mechanism, MechanismMismatch

__all__ = [
    "GREETING_SIZE",
    "HANDSHAKE_FRAME_LIMIT",
    "SIGNATURE_SIZE",
    "ZMTP2_SOCKET_TYPES",
    "ZmtpCodec",
    "ZmtpRole",
    "encode_command",
    "encode_properties",
    "parse_properties",
]

GREETING_SIZE = 64
SIGNATURE_SIZE = 10
_MECHANISM_NULL = b"NULL".ljust(20, b"\x00")
_SP_MAGIC = b"\x00SP\x00"

#: RFC 15: the socket-type byte of a ZMTP 2.0 greeting (XPUB 9 and XSUB 10: libzmq's
#: ZMQ_XPUB/ZMQ_XSUB, which its v2 handshake sends as the byte).
ZMTP2_SOCKET_TYPES: dict[int, str] = {
    0: "PAIR", 1: "PUB", 2: "SUB", 3: "REQ", 4: "REP", 5: "DEALER", 6: "ROUTER", 7: "PULL",
    8: "PUSH", 9: "XPUB", 10: "XSUB",
}
_ZMTP2_TYPE_BYTES = {name: code for code, name in ZMTP2_SOCKET_TYPES.items()}

# Frame flags.
_MORE = 0x01
_LONG = 0x02
_COMMAND = 0x04
_RESERVED = 0xF8

_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_LONG_HDR = struct.Struct(">BQ")

# Precomputed short frame headers, indexed by size (0..255).
_SHORT_LAST = tuple(bytes((0, n)) for n in range(256))
_SHORT_MORE = tuple(bytes((_MORE, n)) for n in range(256))

_MAX_PING_CONTEXT = 16
#: the largest frame accepted before the handshake completes (a greeting is 64 bytes, a CURVE
#: HELLO 200, READY/INITIATE metadata a few hundred): what an unauthenticated peer can make a
#: connection hold is this, not ``max_message_size``
HANDSHAKE_FRAME_LIMIT = 64 * 1024
#: how much of a peer's Socket-Type an error message keeps
_SHOWN = 64

# Handshake states.
_GREETING = 0
_AWAIT_READY = 1
_OPEN = 2
_CLOSED = 3
_V2_GREETING = 4  # a ZMTP 2.0 peer: its socket-type byte and identity frame

_RESERVED_V2 = 0xFC  # RFC 15: bits 2-7 reserved (no COMMAND flag on ZMTP 2.0)


def _signature(identity_size: int) -> bytes:
    """The 10-byte signature with libzmq's padding (identity length + 1, big-endian), then our
    major version 3: the first 11 bytes of the greeting (RFC 37 "Version Negotiation")."""
    return b"\xff" + _U64.pack(identity_size + 1) + b"\x7f" + b"\x03"


def _greeting_rest(mechanism: bytes, as_server: bool) -> bytes:
    """Bytes 11-63 of the 3.x greeting: minor 1, mechanism, as-server, filler."""
    return b"\x01" + mechanism + (b"\x01" if as_server else b"\x00") + b"\x00" * 31


def _frame_header(flags: int, size: int) -> bytes:
    if size <= 255:
        return bytes((flags, size))
    return _LONG_HDR.pack(flags | _LONG, size)


def encode_command(name: bytes, data: bytes = b"") -> bytes:
    """One command frame: ``name-len(1) name data`` with the COMMAND flag."""
    body_len = 1 + len(name) + len(data)
    return _frame_header(_COMMAND, body_len) + bytes((len(name),)) + name + data


def encode_properties(props: list[tuple[bytes, bytes]]) -> bytes:
    """READY/metadata properties: ``name-len(1) name value-len(4 BE) value`` each."""
    return b"".join(
        bytes((len(name),)) + name + _U32.pack(len(value)) + value for name, value in props
    )


def parse_properties(data: bytes) -> dict[str, bytes]:
    """Decode a property list; names lower-cased. Malformed -> ``RemoteProtocolError``."""
    props: dict[str, bytes] = {}
    pos, end = 0, len(data)
    while pos < end:
        name_len = data[pos]
        pos += 1
        if name_len == 0 or pos + name_len + 4 > end:
            raise RemoteProtocolError("malformed READY property")
        name = data[pos : pos + name_len].decode("ascii", "replace").lower()
        pos += name_len
        (value_len,) = _U32.unpack_from(data, pos)
        pos += 4
        if pos + value_len > end:
            raise RemoteProtocolError("malformed READY property value")
        props[name] = bytes(data[pos : pos + value_len])
        pos += value_len
    return props


@dataclass(frozen=True, slots=True)
class ZmtpRole:
    """Who this end is on ZMTP, as data (the engine takes it from the pairing tables)."""

    socket_type: str  # announced in READY
    accepts: frozenset[str]  # peer Socket-Types accepted at READY
    sends_identity: bool = False  # put an Identity property in READY (libzmq: REQ, DEALER, ROUTER)


class ZmtpCodec:
    """ZMTP 3.1 (and 2.0) codec for one connection: NULL, or the ``security`` mechanism (PLAIN,
    CURVE); ZMTP frames alike on every transport."""

    family = "zmtp"

    def __init__(
        self,
        role: ZmtpRole,
        *,
        identity: bytes = b"",
        max_message_size: int = 1 << 20,
        as_server: bool = False,
        security: Mechanism | None = None,
    ) -> None:
        self.role = role
        self.socket_type = role.socket_type
        self.identity = bytes(identity)
        self.max_message_size = max_message_size
        #: the security mechanism object (None: NULL); it decides the greeting's as-server flag
        self.security = security
        #: its name: "NULL", "PLAIN" or "CURVE" (anything but NULL forbids a ZMTP 2.0 downgrade)
        self.mechanism = security.name.decode("ascii") if security is not None else "NULL"
        self.as_server = security.as_server if security is not None else as_server
        self._mech_name = self.mechanism.encode("ascii").ljust(20, b"\x00")
        self._sealed = security is not None and security.encrypts
        self.handshake_done = False
        self.peer_type: str | None = None
        self.peer_identity: bytes = b""
        self.peer_version: tuple[int, int] | None = None
        self._accepted = role.accepts
        self._state = _GREETING
        self._rx = ReceiveBuffer()
        self._out = bytearray()
        self._parts: list[bytes] = []
        self._msg_size = 0
        self._error: RemoteProtocolError | None = None
        self._reserved = _RESERVED
        self._rest_sent = False
        #: the PONG owed to the peer's last PING (one at most, as libzmq's engine keeps one)
        self._pong = b""

    # -- outgoing -------------------------------------------------------------------------

    def initiate(self) -> bytes:
        """The first 11 bytes of our greeting (signature + major version), to write as soon as
        the connection exists; the rest follows through ``data_to_send()`` once the peer's
        version is known."""
        return _signature(len(self.identity))

    def downgrade_allowed(self) -> bool:
        """RFC 37: "If the implementation's security mechanism is anything other than NULL, and
        it detects a ZMTP 1.0 or 2.0 peer, it MUST immediately close the connection" (libzmq
        refuses them whenever ZAP is enabled). The hook a security mechanism changes."""
        return self.mechanism == "NULL"

    @property
    def handshake_stage(self) -> str:
        """How far the peer's side of the handshake got: ``greeting`` (its signature and
        greeting are not complete), ``ready`` (3.x greeting read, waiting for its READY),
        ``identity`` (ZMTP 2.0: waiting for its socket type and identity), ``done``."""
        return {_GREETING: "greeting", _AWAIT_READY: "ready", _V2_GREETING: "identity"}.get(
            self._state, "done")

    @property
    def commands(self) -> bool:
        """True when the peer's wire has commands (ZMTP 3.x: PING/PONG); False on ZMTP 2.0."""
        return self._reserved == _RESERVED

    def metadata(self) -> bytes:
        """Our properties (READY, or a mechanism's INITIATE/READY): Socket-Type, then Identity
        when the role sends one."""
        props = [(b"Socket-Type", self.socket_type.encode("ascii"))]
        if self.role.sends_identity:
            props.append((b"Identity", self.identity))
        return encode_properties(props)

    def ready_command(self) -> bytes:
        """Our READY command (NULL mechanism)."""
        return encode_command(b"READY", self.metadata())

    def data_to_send(self) -> bytes:
        """Bytes the codec itself wants written (READY, PONG); ``b""`` when none."""
        if self._pong:
            self._out += self._pong
            self._pong = b""
        if not self._out:
            return b""
        out = bytes(self._out)
        self._out.clear()
        return out

    def discard_pong(self) -> None:
        """Forget the PONG owed to the last PING (its peer does not read what we send): a
        flood of PINGs costs one pending PONG, not one each (libzmq ``zmtp_engine.cpp``)."""
        self._pong = b""

    def send_message(self, parts: tuple[bytes, ...]) -> bytes:
        """Encode one message: MORE on every frame but the last."""
        if not self.handshake_done:
            raise LocalProtocolError("ZMTP handshake not complete")
        if self._sealed:
            return self._seal_message(parts)
        n = len(parts)
        if n == 1:
            p = parts[0]
            size = len(p)
            if size <= 255:
                return _SHORT_LAST[size] + p
            return _LONG_HDR.pack(_LONG, size) + p
        if n == 2:  # delimiter/identity + body: the common envelope
            p0, p1 = parts
            s0, s1 = len(p0), len(p1)
            return b"".join(
                (
                    _SHORT_MORE[s0] if s0 <= 255 else _LONG_HDR.pack(_LONG | _MORE, s0),
                    p0,
                    _SHORT_LAST[s1] if s1 <= 255 else _LONG_HDR.pack(_LONG, s1),
                    p1,
                )
            )
        if n == 3:  # routing id + delimiter + body: what a device forwards
            p0, p1, p2 = parts
            s0, s1, s2 = len(p0), len(p1), len(p2)
            if s0 <= 255 and s1 <= 255 and s2 <= 255:
                return b"".join((_SHORT_MORE[s0], p0, _SHORT_MORE[s1], p1, _SHORT_LAST[s2], p2))
        elif n == 4:  # an SP request toward a ZeroMQ server: pipe id, request id, "", body
            p0, p1, p2, p3 = parts
            s0, s1, s2, s3 = len(p0), len(p1), len(p2), len(p3)
            if s0 <= 255 and s1 <= 255 and s2 <= 255 and s3 <= 255:
                return b"".join((_SHORT_MORE[s0], p0, _SHORT_MORE[s1], p1, _SHORT_MORE[s2], p2,
                                 _SHORT_LAST[s3], p3))
        elif n == 0:
            raise LocalProtocolError("a ZMTP message needs at least one frame")
        out: list[bytes] = []
        append = out.append
        last = n - 1
        for i, p in enumerate(parts):
            size = len(p)
            if size <= 255:
                append(_SHORT_MORE[size] if i < last else _SHORT_LAST[size])
            else:
                append(_LONG_HDR.pack(_LONG | _MORE if i < last else _LONG, size))
            append(p)
        return b"".join(out)

    @property
    def subscription_commands(self) -> bool:
        """True when subscriptions go to this peer as RFC 37 ``SUBSCRIBE``/``CANCEL`` commands:
        it announced ZMTP 3.1 or later. A 3.0 peer (libzmq <= 4.3.2, JeroMQ 0.6) and a 2.0 peer
        (no commands at all) get the RFC 23 message form; libzmq chooses the same way (``v3_1_encoder`` for minor >= 1 only)."""
        return (self.peer_version or (3, 1)) >= (3, 1)

    def subscription_frame(self, subscribe: bool, topic: bytes) -> bytes:
        """One subscription (``subscribe``) or cancel of ``topic`` in the form the peer's
        announced version takes: RFC 37 command for 3.1, RFC 23 message ``01|00 + topic`` for 3.0."""
        if not self.handshake_done:
            raise LocalProtocolError("ZMTP handshake not complete")
        if self.subscription_commands:
            # sealed in a MESSAGE box under CURVE, as any command after the handshake
            return self._out_command(b"SUBSCRIBE" if subscribe else b"CANCEL", bytes(topic))
        return self.send_message(((b"\x01" if subscribe else b"\x00") + topic,))

    def ping(self, ttl: int = 0, context: bytes = b"") -> bytes:
        """A PING command (heartbeat); ``ttl`` in deciseconds, context up to 16 bytes.
        ZMTP 2.0 has no commands: :class:`LocalProtocolError` (see :attr:`commands`)."""
        if not self.commands:
            raise LocalProtocolError("a ZMTP 2.0 peer has no commands (no PING)")
        if len(context) > _MAX_PING_CONTEXT:
            raise LocalProtocolError("PING context longer than 16 bytes")
        if not 0 <= ttl <= 0xFFFF:
            raise LocalProtocolError("PING ttl out of range")
        return self._out_command(b"PING", _U16.pack(ttl) + bytes(context))

    def _out_command(self, name: bytes, data: bytes) -> bytes:
        """A command after the handshake: sealed in a MESSAGE when the mechanism encrypts."""
        if self._sealed and self.handshake_done:
            assert self.security is not None
            body = self.security.seal(0x02, bytes((len(name),)) + name + data)
            return _frame_header(0, len(body)) + body
        return encode_command(name, data)

    def _seal_message(self, parts: tuple[bytes, ...]) -> bytes:
        if not parts:
            raise LocalProtocolError("a ZMTP message needs at least one frame")
        assert self.security is not None
        seal = self.security.seal
        out: list[bytes] = []
        last = len(parts) - 1
        for i, p in enumerate(parts):
            # libzmq sends MESSAGE as a plain frame (flags 0), the MORE bit inside the box
            body = seal(0x01 if i < last else 0x00, p)
            out.append(_frame_header(0, len(body)))
            out.append(body)
        return b"".join(out)

    # -- incoming -------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Append received bytes (any split). Never raises."""
        self._rx.feed(data)

    @property
    def rx(self) -> ReceiveBuffer:
        """The receive buffer (the kernel seam: see :attr:`streaming`)."""
        return self._rx

    @property
    def sealed(self) -> bool:
        """True when messages travel in CURVE boxes (the kernel seam: it writes plain frames
        only)."""
        return self._sealed

    @property
    def streaming(self) -> bool:
        """The kernel seam: True between messages of a plain (unsealed) stream in the open
        state. A reader may then take whole data messages straight from :attr:`rx` (moving
        ``rx.pos`` past them) and stop before anything else, exactly as :meth:`next_messages`
        does; whatever it leaves is this codec's, unchanged."""
        return self._state == _OPEN and not self._sealed and not self._parts and self._error is None

    @property
    def partial(self) -> bool:
        """True when a message (or command) has started and is not complete: unparsed bytes
        are buffered, or frames of a multipart message wait for their last (MORE) frame. Exact
        once ``next_event()`` returned ``None``; while complete messages wait to be taken, it
        is True too. O(1), no parsing."""
        rx = self._rx
        return bool(self._parts) or len(rx.data) > rx.pos

    def next_event(self) -> Event | None:
        """The next event or message tuple; ``None`` when more bytes are needed."""
        if self._error is not None:
            raise self._error
        try:
            if self._state == _OPEN:
                return self._next_frames()
            if self._state == _GREETING:
                if not self._read_greeting():
                    return None
            if self._state == _V2_GREETING:
                return self._read_v2_greeting()
            if self._state == _AWAIT_READY:
                return self._next_frames()
            return None
        except RemoteProtocolError as exc:
            self._state = _CLOSED
            self._error = exc
            if isinstance(exc, AuthenticationFailed):  # RFC 27: the client learns it was refused
                self._out += encode_command(b"ERROR", bytes((len(exc.status),)) + exc.status)
            raise

    def next_messages(self, limit: int) -> list[tuple[bytes, ...]]:
        """Up to ``limit`` whole messages, parsed in one call: the batch form of
        :meth:`next_event` for plain data frames. It stops before anything else (a command, a
        frame it would refuse, a message over the size limit, bytes still missing, a state
        other than open and unsealed) and never raises: :meth:`next_event` then takes over
        from exactly there, with the same result as if it had parsed everything itself."""
        out: list[tuple[bytes, ...]] = []
        if self._state != _OPEN or self._sealed or limit <= 0:
            return out
        rx = self._rx
        buf = rx.data  # the read as it came (bytes), or a tail and what followed (bytearray)
        whole = type(buf) is bytes
        pos = rx.pos
        end = len(buf)
        parts = self._parts
        limit_size = self.max_message_size
        msg_size = self._msg_size
        if whole and msg_size + end - pos <= limit_size:
            # the usual read: no message in it can pass the size limit, and frames are slices
            append = parts.append
            while end - pos >= 2:
                flags = buf[pos]
                if flags < 2:  # a short frame, last or MORE
                    start = pos + 2
                    stop = start + buf[pos + 1]
                elif flags & 0xFC or end - pos < 9:  # a command, a reserved bit: next_event's
                    break
                else:
                    start = pos + 9
                    stop = start + _U64.unpack_from(buf, pos + 1)[0]
                if stop > end:
                    break
                append(buf[start:stop])  # type: ignore[arg-type]
                pos = stop
                if flags & _MORE:
                    continue
                out.append(tuple(parts))
                parts.clear()
                if len(out) >= limit:
                    break
            rx.pos = pos
            self._msg_size = sum(map(len, parts)) if parts else 0  # (what it counts)
            return out
        while end - pos >= 2:
            flags = buf[pos]
            if flags & 0xFC:  # a command or a reserved bit: next_event's business
                break
            if flags & _LONG:
                if end - pos < 9:
                    break
                (size,) = _U64.unpack_from(buf, pos + 1)
                start = pos + 9
            else:
                size = buf[pos + 1]
                start = pos + 2
            stop = start + size
            if stop > end or msg_size + size > limit_size:
                break
            msg_size += size
            if whole:  # a slice of the read (bytes) is the frame's one copy
                parts.append(buf[start:stop])  # type: ignore[arg-type]
            else:
                parts.append(bytes(buf[start:stop]) if size < COPY_VIA_VIEW
                             else rx.copy(start, stop))
            pos = stop
            if flags & _MORE:
                continue
            out.append(tuple(parts))
            parts.clear()
            msg_size = 0
            if len(out) >= limit:
                break
        rx.pos = pos
        self._msg_size = msg_size
        return out

    def _read_greeting(self) -> bool:
        """The peer's signature and version (RFC 37): True once a 3.x greeting is complete or a
        ZMTP 2.0 peer was recognised (the state says which)."""
        rx = self._rx
        buf = rx.data
        p = rx.pos
        have = len(buf) - p
        if have < 1:
            return False
        # Check each part as soon as it is there: an old (ZMTP 1.0/2.0) peer never sends 64.
        if buf[p] != 0xFF:
            self._not_a_signature(bytes(buf[p : p + 4]))
            return False
        if have < SIGNATURE_SIZE:
            return False
        if not buf[p + 9] & 0x01:
            raise VersionError("a ZMTP 1.0 peer (unversioned, long identity frame); this end "
                               "speaks ZMTP 2.0 and 3.x", peer_version="1.0")
        if have < SIGNATURE_SIZE + 1:
            return False
        major = buf[p + 10]
        if major == 0:
            raise VersionError("a ZMTP 1.0 peer (revision 0); this end speaks ZMTP 2.0 and 3.x",
                               peer_version="1.0")
        if major < 3:  # RFC 37: "If the peer version number is 1 or 2 ... ZMTP 2.0"
            if not self.downgrade_allowed():
                raise VersionError(f"a ZMTP 2.0 peer (revision {major}) on an endpoint with "
                                   f"{self.mechanism} security: downgrade refused (RFC 37)",
                                   peer_version="2.0")
            self.peer_version = (2, 0)
            self._reserved = _RESERVED_V2
            self._out += bytes((_ZMTP2_TYPE_BYTES[self.socket_type],))
            self._out += _frame_header(0, len(self.identity)) + self.identity
            self._state = _V2_GREETING
            return True
        if not self._rest_sent:
            self._rest_sent = True
            self._out += _greeting_rest(self._mech_name, self.as_server)
        if have < GREETING_SIZE:
            return False
        minor = buf[p + 11]
        if bytes(buf[p + 12 : p + 32]) != self._mech_name:
            mech = bytes(buf[p + 12 : p + 32]).rstrip(b"\x00").decode("ascii", "replace")
            raise MechanismError(
                f"the peer wants {mech or '(none)'} security; this endpoint has "
                + ("no security configured (NULL)" if self.mechanism == "NULL"
                   else f"{self.mechanism}"),
                peer_mechanism=mech, mechanism=self.mechanism)
        mechanism = self.security
        # RFC 23: exactly one side is the server. libzmq (4.3.5 measured) greets with
        # as-server 0 even as a PLAIN/CURVE server, so only two servers can be told apart.
        if mechanism is not None and mechanism.as_server and buf[p + 32] & 0x01:
            raise MechanismMismatch(f"both sides are {mechanism.name.decode()} servers "
                                    "(as-server flag)", peer_mechanism=self.mechanism,
                                    mechanism=self.mechanism)
        rx.pos = p + GREETING_SIZE
        self.peer_version = (major, minor)
        self._state = _AWAIT_READY
        if mechanism is None:
            self._out += self.ready_command()
        else:
            for name, data in mechanism.start(self.metadata()):
                self._out += encode_command(name, data)
        return True

    def _not_a_signature(self, head: bytes) -> None:
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

    def _read_v2_greeting(self) -> Event | None:
        """RFC 15: the peer's socket-type byte (byte 11), then its identity frame."""
        rx = self._rx
        buf = rx.data
        p = rx.pos
        end = len(buf)
        if end - p < SIGNATURE_SIZE + 2:
            return None
        code = buf[p + 11]
        peer_type = ZMTP2_SOCKET_TYPES.get(code, f"type {code:#04x}")
        if peer_type not in self._accepted:
            raise PairingError(f"ZMTP {self.socket_type} cannot talk to {peer_type} (ZMTP 2.0)",
                               ours=self.socket_type, theirs=peer_type)
        pos = p + SIGNATURE_SIZE + 2
        if end - pos < 2:
            return None
        flags = buf[pos]
        if flags & ~_LONG & 0xFF:
            raise RemoteProtocolError(f"ZMTP 2.0 identity frame with flags {flags:#04x}")
        if flags & _LONG:
            if end - pos < 9:
                return None
            (size,) = _U64.unpack_from(buf, pos + 1)
            start = pos + 9
        else:
            size = buf[pos + 1]
            start = pos + 2
        if size > 255:  # libzmq: a routing id is at most 255 bytes
            raise RemoteProtocolError(f"ZMTP 2.0 identity of {size} bytes (at most 255)")
        if start + size > end:
            return None
        identity = bytes(buf[start : start + size])
        rx.pos = start + size
        self.peer_type = peer_type
        self.peer_identity = identity
        self.handshake_done = True
        self._state = _OPEN
        props = {"socket-type": peer_type.encode("ascii")}
        if identity:
            props["identity"] = identity
        return HandshakeComplete(peer_type=peer_type, identity=identity, version=(2, 0),
                                 properties=props)

    def _next_frames(self) -> Event | None:
        """Parse frames until a whole message or a command event is available."""
        rx = self._rx
        buf = rx.data
        end = len(buf)
        pos = rx.pos
        parts = self._parts
        limit = self.max_message_size
        msg_size = self._msg_size
        is_open = self._state == _OPEN  # only a command (which returns) changes the state
        if is_open and self._sealed:
            return self._next_sealed()
        while end - pos >= 2:
            flags = buf[pos]
            if flags & _LONG:
                if end - pos < 9:
                    break
                (size,) = _U64.unpack_from(buf, pos + 1)
                start = pos + 9
            else:
                size = buf[pos + 1]
                start = pos + 2
            stop = start + size
            if flags & 0xFC == 0 and is_open:  # plain data frame, MORE or not (the hot path)
                msg_size += size
                if msg_size > limit:
                    raise MessageTooLarge(f"ZMTP message of {msg_size}+ bytes (limit {limit})")
                if stop > end:
                    break
                if not size:  # the envelope's delimiter: no slice, no copy
                    parts.append(b"")
                else:
                    parts.append(bytes(buf[start:stop]) if size < COPY_VIA_VIEW
                                 else rx.copy(start, stop))
                pos = stop
                if flags & _MORE:
                    self._msg_size = msg_size
                    continue
                rx.pos = pos
                self._msg_size = 0
                msg = tuple(parts)
                parts.clear()
                return msg
            if flags & self._reserved:
                raise RemoteProtocolError(f"reserved ZMTP frame flag bits set: {flags:#04x}")
            if not flags & _COMMAND:
                raise RemoteProtocolError("ZMTP data frame before READY")
            if flags & _MORE or parts:
                raise RemoteProtocolError("ZMTP command inside a multipart message")
            if size > limit:
                raise MessageTooLarge(f"ZMTP command of {size} bytes (limit {limit})")
            if not is_open and size > HANDSHAKE_FRAME_LIMIT:
                raise RemoteProtocolError(f"ZMTP handshake command of {size} bytes (at most "
                                          f"{HANDSHAKE_FRAME_LIMIT} before the handshake is done)")
            if stop > end:
                break
            pos = rx.pos = stop
            ev = self._command(bytes(buf[start:stop]))
            if ev is not None:
                return ev
        rx.pos = pos
        return None

    def _command(self, body: bytes) -> Event | None:
        if not body:
            raise RemoteProtocolError("empty ZMTP command")
        name_len = body[0]
        if 1 + name_len > len(body):
            raise RemoteProtocolError("malformed ZMTP command name")
        name = body[1 : 1 + name_len]
        data = body[1 + name_len :]
        if name == b"ERROR":
            reason = data[1 : 1 + data[0]] if data else b""
            self._state = _CLOSED  # the peer is done; further bytes are ignored
            return PeerError(reason=reason.decode("utf-8", "replace"))
        if self._state != _OPEN:
            if self.security is not None:
                replies, peer_metadata = self.security.receive(name, data)
                for reply_name, reply_data in replies:
                    self._out += encode_command(reply_name, reply_data)
                return None if peer_metadata is None else self._ready(peer_metadata)
            if name == b"READY":
                return self._ready(data)
            raise RemoteProtocolError(f"unexpected ZMTP command {name!r} before READY")
        if name == b"PING":
            if len(data) < 2:
                raise RemoteProtocolError("malformed ZMTP PING")
            (ttl,) = _U16.unpack_from(data)
            context = data[2 : 2 + _MAX_PING_CONTEXT]  # libzmq truncates, it does not refuse
            self._pong = self._out_command(b"PONG", context)  # replaces one not yet sent
            return Ping(ttl=ttl, context=context)
        if name == b"PONG":
            return Pong(context=data)
        if name == b"SUBSCRIBE":
            return Subscription(subscribe=True, topic=data)
        if name == b"CANCEL":
            return Subscription(subscribe=False, topic=data)
        if name == b"READY":
            raise RemoteProtocolError("second ZMTP READY")
        return None  # unknown: skipped

    def _next_sealed(self) -> Event | None:
        """After a CURVE handshake: every frame is a MESSAGE box (RFC 26) holding one frame."""
        assert self.security is not None
        open_box = self.security.open
        rx = self._rx
        buf = rx.data
        end = len(buf)
        pos = rx.pos
        parts = self._parts
        limit = self.max_message_size + 64 + 1 + 32  # a frame's box: nonce, MAC and flags
        while end - pos >= 2:
            flags = buf[pos]
            if flags & _LONG:
                if end - pos < 9:
                    break
                (size,) = _U64.unpack_from(buf, pos + 1)
                start = pos + 9
            else:
                size = buf[pos + 1]
                start = pos + 2
            # the MORE bit that counts is the one inside the box (RFC 26); some implementations
            # also set it on the outer frame, which libzmq ignores as well. COMMAND and the
            # reserved bits stay refused.
            if flags & (_RESERVED | _COMMAND):
                raise RemoteProtocolError(f"bad CURVE MESSAGE frame flags: {flags:#04x}")
            if size > limit:
                raise MessageTooLarge(f"CURVE MESSAGE of {size} bytes (limit {limit})")
            stop = start + size
            if stop > end:
                break
            pos = rx.pos = stop
            inner_flags, payload = open_box(bytes(buf[start:stop]))
            if inner_flags & 0x02:  # a command inside the box (PING, PONG, ERROR ...)
                if inner_flags & 0x01 or parts:
                    raise RemoteProtocolError("ZMTP command inside a multipart message")
                ev = self._command(payload)
                if ev is not None:
                    return ev
                continue
            self._msg_size += len(payload)
            if self._msg_size > self.max_message_size:
                raise MessageTooLarge(
                    f"ZMTP message of {self._msg_size}+ bytes (limit {self.max_message_size})")
            parts.append(payload)
            if inner_flags & 0x01:
                continue
            self._msg_size = 0
            msg = tuple(parts)
            parts.clear()
            return msg
        rx.pos = pos
        return None

    def _ready(self, data: bytes) -> HandshakeComplete:
        props = parse_properties(data)
        raw_type = props.get("socket-type")
        if raw_type is None:
            raise RemoteProtocolError("ZMTP READY without Socket-Type")
        peer_type = raw_type.decode("ascii", "replace")
        if peer_type not in self._accepted:
            shown = peer_type if len(peer_type) <= _SHOWN else (
                f"{peer_type[:_SHOWN]}...({len(raw_type)} bytes)")
            raise PairingError(f"ZMTP {self.socket_type} cannot talk to {shown}",
                               ours=self.socket_type, theirs=shown)
        identity = props.get("identity", b"")
        self.peer_type = peer_type
        self.peer_identity = identity
        self.handshake_done = True
        self._state = _OPEN
        return HandshakeComplete(
            peer_type=peer_type,
            identity=identity,
            version=self.peer_version or (3, 1),
            properties=props,
        )
