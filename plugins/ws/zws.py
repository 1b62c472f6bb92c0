"""ZeroMQ over WebSocket, ZWS 2.0 (rfc.zeromq.org spec 45; libzmq's draft ``ws_engine.cpp``,
``ws_encoder.cpp``, ``ws_decoder.cpp``), as a sans-IO wire codec of the ``zmtp`` family on the
WebSocket layer (:class:`gateway_plugins.ws.link.WsLink`).

* **Framing.** Each ZeroMQ frame is one binary WebSocket message: a flags byte (``0x01`` MORE,
  ``0x02`` COMMAND) and the frame's body; a command's body is ZMTP's, ``name-len name data``.
  An empty WebSocket message is a protocol error (libzmq's decoder refuses it).
* **Subprotocols** (``Sec-WebSocket-Protocol``). ``ZWS2.0/NULL`` and ``ZWS2.0/PLAIN`` run the
  ZMTP mechanisms after the upgrade: READY with ``Socket-Type`` (checked against the pairing
  table, RFC 45 "Socket Compatibility"), or PLAIN's HELLO/WELCOME/INITIATE/READY (the codec
  reuses :mod:`gateway.wire.zmtp.commands` and the ``Mechanism`` of
  :mod:`gateway.wire.zmtp_plain`). ``ZWS2.0`` has no mechanism: each side's first message is
  its routing id (an empty one: none), then messages; there is no socket type to check.
  A listener takes, of what the client offers, ``ZWS2.0/NULL`` first, else ``ZWS2.0``
  (``ZWS2.0/PLAIN`` only, with PLAIN). A dialer offers ``ZWS2.0`` then ``ZWS2.0/NULL``: servers
  that take the first offer (jszmq's listener, on the ``ws`` package, speaks nothing else;
  libzmq takes the first it supports) then talk at all. With PLAIN it offers ``ZWS2.0/PLAIN``.
  CURVE is not in RFC 45 (libzmq's ``ZWS2.0/CURVE`` is a draft of a draft): refused by config;
  use ``wss``.
* **Pub/sub.** A subscription is a message ``0x01`` + prefix (a cancel ``0x00`` + prefix),
  as libzmq's ws encoder writes it and as ZMTP 3.0 did; ``SUBSCRIBE``/``CANCEL`` commands
  from a peer are taken too.
* **Heartbeats** are WebSocket pings (libzmq's ws engine), answered by the layer; a ZMTP
  ``PING`` command is answered with ``PONG``.
"""

from __future__ import annotations

from gateway.errors import LocalProtocolError, MessageTooLarge, RemoteProtocolError
from gateway.wire.events import Event, HandshakeComplete, Ping
from gateway.wire.zmtp import ZmtpRole
from gateway.wire.zmtp.commands import (
    OPEN_COMMANDS,
    encode_properties,
    peer_error,
    ready_event,
    split_command,
)
from gateway.wire.zmtp.readers import counted
from gateway.wire.zmtp_mechanism import AuthenticationFailed, Mechanism

from .link import WsLink

MORE = 0x01
COMMAND = 0x02
#: the subprotocols (RFC 45 "Handshake")
BARE, NULL, PLAIN = "ZWS2.0", "ZWS2.0/NULL", "ZWS2.0/PLAIN"
#: what our side of each handshake stage waits for
_STAGES = {"upgrade": "greeting", "ready": "ready", "identity": "identity", "done": "done"}


def command(name: bytes, data: bytes = b"") -> bytes:
    """A ZWS command's WebSocket payload: flags ``0x02``, ``name-len name data``."""
    return bytes((COMMAND, len(name))) + name + data


def frames(parts: tuple[bytes, ...]) -> list[bytes]:
    """A message's WebSocket payloads: each frame behind its flags byte, MORE on all but the
    last."""
    last = len(parts) - 1
    return [(b"\x01" if i < last else b"\x00") + bytes(p) for i, p in enumerate(parts)]


class ZwsCodec(WsLink):
    """One ZeroMQ connection over WebSocket (see the module doc)."""

    family = "zmtp"
    refusal = "ws-upgrade"
    label = "ZWS"

    def __init__(self, role: ZmtpRole, *, identity: bytes = b"", max_message_size: int = 1 << 20,
                 security: Mechanism | None = None, address: str = "", client: bool = False,
                 origins: tuple[str, ...] | None = None) -> None:
        if security is not None and security.name != b"PLAIN":
            raise LocalProtocolError(f"ZWS 2.0 has NULL and PLAIN, not "
                                     f"{security.name.decode('ascii', 'replace')}")
        # one ZeroMQ frame a WebSocket message: its flags byte besides
        super().__init__(max_message_size=max_message_size, address=address, client=client,
                         limit=max(max_message_size, 1 << 16) + 1, origins=origins)
        self.role = role
        self.socket_type = role.socket_type
        self.identity = bytes(identity)
        self.security = security
        self.mechanism = "PLAIN" if security is not None else "NULL"
        self.peer_type: str | None = None
        self.peer_identity = b""
        self.peer_version: tuple[int, int] | None = None
        self._stage = "upgrade"
        self._frames: list[bytes] = []
        self._msg_size = 0

    # -- subprotocols -------------------------------------------------------------------------
    def _offers(self) -> list[str]:
        return [PLAIN] if self.security is not None else [BARE, NULL]

    def _choose(self, offered: list[str]) -> str | None:
        for wanted in ([PLAIN] if self.security is not None else [NULL, BARE]):
            if wanted in offered:
                return wanted
        return None

    def _takes(self) -> str:
        return PLAIN if self.security is not None else f"{NULL} or {BARE}"

    def _opened(self, subprotocol: str) -> Event | None:
        self.peer_version = (3, 1)
        if subprotocol == BARE:  # RFC 45 "No Mechanism": the routing id first, as ZMTP 2.0
            self._stage = "identity"
            self._out += self._binary(b"\x00" + self.identity)
            return None
        self._stage = "ready"
        if self.security is None:
            self._send_command(b"READY", self.metadata())
        else:
            for name, data in self.security.start(self.metadata()):
                self._send_command(name, data)
        return None

    # -- outgoing ----------------------------------------------------------------------------
    def metadata(self) -> bytes:
        """Our properties (READY, or PLAIN's INITIATE/READY): Socket-Type, Identity when the
        role sends one."""
        props = [(b"Socket-Type", self.socket_type.encode("ascii"))]
        if self.role.sends_identity:
            props.append((b"Identity", self.identity))
        return encode_properties(props)

    def _send_command(self, name: bytes, data: bytes = b"") -> None:
        self._out += self._binary(command(name, data))

    @property
    def handshake_stage(self) -> str:
        """``greeting`` (no upgrade yet), ``ready`` (upgraded, the peer's READY or mechanism
        not complete), ``identity`` (``ZWS2.0``: its routing id not come), ``done``."""
        return "done" if self.handshake_done else _STAGES[self._stage]

    @property
    def commands(self) -> bool:
        return True

    def send_message(self, parts: tuple[bytes, ...]) -> bytes:
        """Encode one message: one WebSocket message a frame."""
        if not self.handshake_done:
            raise LocalProtocolError("ZWS handshake not complete")
        return b"".join(map(self._binary, frames(parts)))

    #: subscriptions go as messages (``0x01`` + prefix), as libzmq's ws encoder writes them
    subscription_commands = False

    def subscription_frame(self, subscribe: bool, topic: bytes) -> bytes:
        """A subscription (or cancel) of ``topic``: the message ``01|00 + topic``."""
        return self.send_message(((b"\x01" if subscribe else b"\x00") + bytes(topic),))

    def ping(self, ttl: int = 0, context: bytes = b"") -> bytes:
        """Our heartbeat: a WebSocket ping (libzmq's ws engine sends those)."""
        if not self.handshake_done:
            raise LocalProtocolError("ZWS handshake not complete")
        return self._ping(bytes(context))

    # -- incoming ----------------------------------------------------------------------------
    @property
    def partial(self) -> bool:
        """True while a message's frames (or a frame's fragments) wait for the rest."""
        return bool(self._frames) or super().partial

    def _whole(self, data: bytes) -> Event | None:
        if not data:
            raise RemoteProtocolError("an empty ZWS message (no flags byte)")
        flags = data[0]
        if flags & ~(MORE | COMMAND):
            raise RemoteProtocolError(f"ZWS flags {flags:#04x}: reserved bits set")
        body = data[1:]
        if flags & COMMAND:
            if self._frames:
                raise RemoteProtocolError("a ZWS command inside a multipart message")
            return self._command(body)
        if self._stage == "identity":
            return self._routing_id(body, flags)
        if not self.handshake_done:
            raise RemoteProtocolError("a ZWS message before the handshake completed")
        self._msg_size += counted(len(body))
        if self._msg_size > self.max_message_size:
            raise MessageTooLarge(f"a ZWS message over {self.max_message_size} bytes")
        self._frames.append(body)
        if flags & MORE:
            return None
        parts, self._frames, self._msg_size = tuple(self._frames), [], 0
        return parts

    def _routing_id(self, body: bytes, flags: int) -> Event:
        if flags & MORE or len(body) > 255:
            raise RemoteProtocolError("a ZWS2.0 routing id must be one frame of at most 255 "
                                      "bytes")
        if body[:1] == b"\x00":  # reserved (libzmq generates those itself)
            body = b""
        return self._done(HandshakeComplete(peer_type="", identity=body, version=(3, 1),
                                            properties={"zws": BARE.encode()}))

    def _command(self, body: bytes) -> Event | None:
        name, data = split_command(body)
        if name == b"ERROR":
            return peer_error(data)
        if self._stage == "ready" and not self.handshake_done:
            if self.security is not None:
                try:
                    replies, peer_metadata = self.security.receive(name, data)
                except AuthenticationFailed as exc:  # RFC 27: the client learns it was refused
                    self._send_command(b"ERROR", bytes((len(exc.status),)) + exc.status)
                    raise
                for reply_name, reply_data in replies:
                    self._send_command(reply_name, reply_data)
                return None if peer_metadata is None else self._ready(peer_metadata)
            if name == b"READY":
                return self._ready(data)
            raise RemoteProtocolError(f"unexpected ZWS command {name!r} before READY")
        if not self.handshake_done:
            raise RemoteProtocolError(f"a ZWS command {name!r} before the handshake")
        on = OPEN_COMMANDS.get(name)
        if on is None:
            return None  # unknown: skipped, as libzmq does
        event = on(data)
        if type(event) is Ping:
            self._pong = self._binary(command(b"PONG", event.context))
        return event

    def _ready(self, data: bytes) -> HandshakeComplete:
        return self._done(ready_event(data, self.socket_type, self.role.accepts, (3, 1)))

    def _done(self, event: HandshakeComplete) -> HandshakeComplete:
        self.peer_type = event.peer_type
        self.peer_identity = event.identity
        self.handshake_done = True
        self._stage = "done"
        return event


__all__ = ["BARE", "COMMAND", "MORE", "NULL", "PLAIN", "ZwsCodec", "command", "frames"]
