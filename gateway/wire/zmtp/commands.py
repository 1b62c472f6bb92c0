"""ZMTP commands (RFC 23 "Commands", RFC 37 heartbeats and subscriptions): their encoding, the
READY property list, and what a received command means, as a table.

A command frame's body is ``name-len(1) name data``. Before the handshake is done the codec
hands commands to the security mechanism (or reads READY); after it, :data:`OPEN_COMMANDS` says
what each name becomes (an unknown name is skipped, as libzmq does). ``ERROR`` ends the
connection in either phase (:func:`peer_error`).
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.errors import LocalProtocolError, PairingError, RemoteProtocolError
from gateway.wire.events import Event, HandshakeComplete, PeerError, Ping, Pong, Subscription
from gateway.wire.zmtp.framing import COMMAND, U16, U32, frame_header

__all__ = [
    "MAX_PING_CONTEXT",
    "OPEN_COMMANDS",
    "encode_command",
    "encode_properties",
    "parse_properties",
    "peer_error",
    "ping_data",
    "ready_event",
    "split_command",
]

MAX_PING_CONTEXT = 16
#: how much of a peer's Socket-Type an error message keeps
_SHOWN = 64


def encode_command(name: bytes, data: bytes = b"") -> bytes:
    """One command frame: ``name-len(1) name data`` with the COMMAND flag."""
    body_len = 1 + len(name) + len(data)
    return frame_header(COMMAND, body_len) + bytes((len(name),)) + name + data


def encode_properties(props: list[tuple[bytes, bytes]]) -> bytes:
    """READY/metadata properties: ``name-len(1) name value-len(4 BE) value`` each."""
    return b"".join(
        bytes((len(name),)) + name + U32.pack(len(value)) + value for name, value in props
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
        (value_len,) = U32.unpack_from(data, pos)
        pos += 4
        if pos + value_len > end:
            raise RemoteProtocolError("malformed READY property value")
        props[name] = bytes(data[pos : pos + value_len])
        pos += value_len
    return props


def split_command(body: bytes) -> tuple[bytes, bytes]:
    """A command frame's body as ``(name, data)``."""
    if not body:
        raise RemoteProtocolError("empty ZMTP command")
    name_len = body[0]
    if 1 + name_len > len(body):
        raise RemoteProtocolError("malformed ZMTP command name")
    return body[1 : 1 + name_len], body[1 + name_len :]


def ping_data(ttl: int, context: bytes) -> bytes:
    """A PING's data: ``ttl`` in deciseconds (16 bits), context up to 16 bytes."""
    if len(context) > MAX_PING_CONTEXT:
        raise LocalProtocolError("PING context longer than 16 bytes")
    if not 0 <= ttl <= 0xFFFF:
        raise LocalProtocolError("PING ttl out of range")
    return U16.pack(ttl) + bytes(context)


def peer_error(data: bytes) -> PeerError:
    """The peer's ERROR command (``reason-len(1) reason``): it is done with the connection."""
    reason = data[1 : 1 + data[0]] if data else b""
    return PeerError(reason=reason.decode("utf-8", "replace"))


def ready_event(data: bytes, socket_type: str, accepted: frozenset[str],
                version: tuple[int, int]) -> HandshakeComplete:
    """The peer's READY (or a mechanism's metadata): its Socket-Type checked against
    ``accepted`` (:class:`PairingError` when this end cannot talk to it)."""
    props = parse_properties(data)
    raw_type = props.get("socket-type")
    if raw_type is None:
        raise RemoteProtocolError("ZMTP READY without Socket-Type")
    peer_type = raw_type.decode("ascii", "replace")
    if peer_type not in accepted:
        shown = peer_type if len(peer_type) <= _SHOWN else (
            f"{peer_type[:_SHOWN]}...({len(raw_type)} bytes)")
        raise PairingError(f"ZMTP {socket_type} cannot talk to {shown}",
                           ours=socket_type, theirs=shown)
    return HandshakeComplete(peer_type=peer_type, identity=props.get("identity", b""),
                             version=version, properties=props)


def _ping(data: bytes) -> Ping:
    if len(data) < 2:
        raise RemoteProtocolError("malformed ZMTP PING")
    (ttl,) = U16.unpack_from(data)
    # libzmq truncates a longer context, it does not refuse it; the codec queues the PONG
    return Ping(ttl=ttl, context=data[2 : 2 + MAX_PING_CONTEXT])


def _second_ready(data: bytes) -> Event:
    raise RemoteProtocolError("second ZMTP READY")


#: after the handshake: command name -> its event (a name not here is skipped)
OPEN_COMMANDS: dict[bytes, Callable[[bytes], Event]] = {
    b"PING": _ping,
    b"PONG": lambda data: Pong(context=data),
    b"SUBSCRIBE": lambda data: Subscription(subscribe=True, topic=data),
    b"CANCEL": lambda data: Subscription(subscribe=False, topic=data),
    b"READY": _second_ready,
}
