"""ZMTP 3.x with the NULL mechanism, sans-IO (rfc.zeromq.org specs 23 and 37).

One codec per TCP connection. The greeting goes out whole from ``initiate()``; our READY is
queued (``data_to_send()``) once the peer's greeting has been read. Received messages come out
of ``next_event()`` as plain tuples of ``bytes`` frames; commands become events.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from gateway.errors import (
    LocalProtocolError,
    MessageTooLarge,
    PairingError,
    RemoteProtocolError,
)
from gateway.wire._buffer import COPY_VIA_VIEW, ReceiveBuffer
from gateway.wire.events import Event, HandshakeComplete, PeerError, Ping, Pong, Subscription

__all__ = [
    "GREETING_SIZE",
    "ZmtpCodec",
    "ZmtpRole",
    "encode_command",
    "encode_properties",
    "parse_properties",
]

GREETING_SIZE = 64
_MECHANISM_NULL = b"NULL".ljust(20, b"\x00")

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

# Handshake states.
_GREETING = 0
_AWAIT_READY = 1
_OPEN = 2
_CLOSED = 3


def _greeting(as_server: bool) -> bytes:
    return (
        b"\xff"
        + b"\x00" * 8
        + b"\x7f"
        + b"\x03\x01"
        + _MECHANISM_NULL
        + (b"\x01" if as_server else b"\x00")
        + b"\x00" * 31
    )


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
    """ZMTP 3.1 NULL-mechanism codec for one connection; ZMTP frames alike on every transport."""

    family = "zmtp"

    def __init__(
        self,
        role: ZmtpRole,
        *,
        identity: bytes = b"",
        max_message_size: int = 1 << 20,
        as_server: bool = False,
    ) -> None:
        self.role = role
        self.socket_type = role.socket_type
        self.identity = bytes(identity)
        self.max_message_size = max_message_size
        self.as_server = as_server
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

    # -- outgoing -------------------------------------------------------------------------

    def initiate(self) -> bytes:
        """Our 64-byte greeting, to write as soon as the connection exists."""
        return _greeting(self.as_server)

    def ready_command(self) -> bytes:
        """Our READY command: Socket-Type, then Identity when the role sends one."""
        props = [(b"Socket-Type", self.socket_type.encode("ascii"))]
        if self.role.sends_identity:
            props.append((b"Identity", self.identity))
        return encode_command(b"READY", encode_properties(props))

    def data_to_send(self) -> bytes:
        """Bytes the codec itself wants written (READY, PONG); ``b""`` when none."""
        if not self._out:
            return b""
        out = bytes(self._out)
        self._out.clear()
        return out

    def send_message(self, parts: tuple[bytes, ...]) -> bytes:
        """Encode one message: MORE on every frame but the last."""
        if not self.handshake_done:
            raise LocalProtocolError("ZMTP handshake not complete")
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
        if n == 0:
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
        it announced ZMTP 3.1 or later. A 3.0 peer (libzmq <= 4.3.2, JeroMQ 0.6) gets the RFC 23
        message form; libzmq chooses the same way (``v3_1_encoder`` for minor >= 1 only)."""
        return (self.peer_version or (3, 1)) >= (3, 1)

    def subscription_frame(self, subscribe: bool, topic: bytes) -> bytes:
        """One subscription (``subscribe``) or cancel of ``topic`` in the form the peer's
        announced version takes: RFC 37 command for 3.1, RFC 23 message ``01|00 + topic`` for 3.0."""
        if not self.handshake_done:
            raise LocalProtocolError("ZMTP handshake not complete")
        if self.subscription_commands:
            return encode_command(b"SUBSCRIBE" if subscribe else b"CANCEL", bytes(topic))
        return self.send_message(((b"\x01" if subscribe else b"\x00") + topic,))

    def ping(self, ttl: int = 0, context: bytes = b"") -> bytes:
        """A PING command (heartbeat); ``ttl`` in deciseconds, context up to 16 bytes."""
        if len(context) > _MAX_PING_CONTEXT:
            raise LocalProtocolError("PING context longer than 16 bytes")
        if not 0 <= ttl <= 0xFFFF:
            raise LocalProtocolError("PING ttl out of range")
        return encode_command(b"PING", _U16.pack(ttl) + bytes(context))

    # -- incoming -------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Append received bytes (any split). Never raises."""
        self._rx.feed(data)

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
            if self._state == _AWAIT_READY:
                return self._next_frames()
            return None
        except RemoteProtocolError as exc:
            self._state = _CLOSED
            self._error = exc
            raise

    def _read_greeting(self) -> bool:
        rx = self._rx
        buf = rx.data
        p = rx.pos
        have = len(buf) - p
        # Check each part as soon as it is there: an old (ZMTP 1.0/2.0) peer never sends 64.
        if have >= 1 and buf[p] != 0xFF:
            raise RemoteProtocolError("bad ZMTP signature (byte 0 is not 0xFF)")
        if have >= 10 and not buf[p + 9] & 0x01:
            raise RemoteProtocolError("bad ZMTP signature (byte 9 bit 0 is clear)")
        if have >= 11 and buf[p + 10] < 3:
            raise RemoteProtocolError(f"unsupported ZMTP version {buf[p + 10]}.x (need >= 3)")
        if have < GREETING_SIZE:
            return False
        major, minor = buf[p + 10], buf[p + 11]
        if bytes(buf[p + 12 : p + 32]) != _MECHANISM_NULL:
            mech = bytes(buf[p + 12 : p + 32]).rstrip(b"\x00")
            raise RemoteProtocolError(f"unsupported ZMTP mechanism {mech!r} (need NULL)")
        rx.pos = p + GREETING_SIZE
        self.peer_version = (major, minor)
        self._state = _AWAIT_READY
        self._out += self.ready_command()
        return True

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
                parts.append(bytes(buf[start:stop]) if size < COPY_VIA_VIEW else rx.copy(start, stop))
                pos = stop
                if flags & _MORE:
                    self._msg_size = msg_size
                    continue
                rx.pos = pos
                self._msg_size = 0
                msg = tuple(parts)
                parts.clear()
                return msg
            if flags & _RESERVED:
                raise RemoteProtocolError(f"reserved ZMTP frame flag bits set: {flags:#04x}")
            if not flags & _COMMAND:
                raise RemoteProtocolError("ZMTP data frame before READY")
            if flags & _MORE or parts:
                raise RemoteProtocolError("ZMTP command inside a multipart message")
            if size > limit:
                raise MessageTooLarge(f"ZMTP command of {size} bytes (limit {limit})")
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
            if name == b"READY":
                return self._ready(data)
            raise RemoteProtocolError(f"unexpected ZMTP command {name!r} before READY")
        if name == b"PING":
            if len(data) < 2:
                raise RemoteProtocolError("malformed ZMTP PING")
            (ttl,) = _U16.unpack_from(data)
            context = data[2 : 2 + _MAX_PING_CONTEXT]  # libzmq truncates, it does not refuse
            self._out += encode_command(b"PONG", context)
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

    def _ready(self, data: bytes) -> HandshakeComplete:
        props = parse_properties(data)
        raw_type = props.get("socket-type")
        if raw_type is None:
            raise RemoteProtocolError("ZMTP READY without Socket-Type")
        peer_type = raw_type.decode("ascii", "replace")
        if peer_type not in self._accepted:
            raise PairingError(f"ZMTP {self.socket_type} cannot talk to {peer_type}")
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
