"""The ZMTP codec of one connection: its state machine, what it sends, and the reader each state
takes (:data:`READERS`; the readers are :mod:`gateway.wire.zmtp.readers`', the greeting's checks
:mod:`gateway.wire.zmtp.greeting`'s, the commands' meaning :mod:`gateway.wire.zmtp.commands`')."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.errors import LocalProtocolError, RemoteProtocolError
from gateway.wire._buffer import Receiving, new_buffer
from gateway.wire.events import Event, HandshakeComplete, Ping
from gateway.wire.zmtp import readers
from gateway.wire.zmtp.commands import (
    OPEN_COMMANDS,
    encode_command,
    encode_properties,
    peer_error,
    ping_data,
    ready_event,
    split_command,
)
from gateway.wire.zmtp.framing import (
    LONG,
    MORE,
    RESERVED,
    RESERVED_V2,
    SHORT_LAST,
    SHORT_MORE,
    encode_message,
    frame_header,
    pack_long_header,
    seal_message,
)
from gateway.wire.zmtp.greeting import (
    GREETING_SIZE,
    downgrade_refused,
    greeting_rest,
    peer_major,
    peer_minor,
    signature,
    v2_answer,
    v2_handshake,
)
from gateway.wire.zmtp.readers import (
    AWAIT_READY,
    CLOSED,
    GREETING,
    GREETING_REST,
    OPEN,
    SEALED,
    V2_IDENTITY,
)
from gateway.wire.zmtp_mechanism import AuthenticationFailed, Mechanism

__all__ = ["READERS", "ZmtpCodec", "ZmtpRole"]

_STAGES = {GREETING: "greeting", GREETING_REST: "greeting", AWAIT_READY: "ready",
           V2_IDENTITY: "identity"}


@functools.lru_cache(maxsize=64)
def _metadata(socket_type: str, identity: bytes | None) -> bytes:
    """A socket's properties, encoded once: its type and identity are its configuration (so
    the cache holds one entry per configured socket, never one per peer)."""
    props = [(b"Socket-Type", socket_type.encode("ascii"))]
    if identity is not None:
        props.append((b"Identity", identity))
    return encode_properties(props)


@functools.lru_cache(maxsize=64)
def _ready(socket_type: str, identity: bytes | None) -> bytes:
    return encode_command(b"READY", _metadata(socket_type, identity))


@dataclass(frozen=True, slots=True)
class ZmtpRole:
    """Who this end is on ZMTP, as data (the engine takes it from the pairing tables)."""

    socket_type: str  # announced in READY
    accepts: frozenset[str]  # peer Socket-Types accepted at READY
    sends_identity: bool = False  # put an Identity property in READY (libzmq: REQ, DEALER, ROUTER)


class ZmtpCodec(Receiving):
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
        self._state = GREETING
        self._rx = new_buffer()
        self._out = bytearray()
        self._parts: list[bytes] = []
        self._msg_size = 0
        self._error: RemoteProtocolError | None = None
        #: the kernel seam (:class:`gateway.wire.KernelSeam`): True between messages in the
        #: open state. A reader may then take whole data messages straight from :attr:`rx`
        #: (moving ``rx.pos`` past them; when :attr:`sealed`, opening their boxes and telling
        #: the mechanism how far it got) and stop before anything else, exactly as
        #: :meth:`next_messages` (or the sealed reader) does; whatever it leaves is this
        #: codec's, unchanged. A plain attribute (the kernel reads it on every read), kept
        #: where it changes: the open state reached or left (:meth:`_opened`, ERROR, a
        #: refusal), a multipart message begun or ended (the readers, ``Stream.streaming``)
        self.streaming = False
        self._reserved = RESERVED
        #: the PONG owed to the peer's last PING (one at most, as libzmq's engine keeps one)
        self._pong = b""

    # -- outgoing -------------------------------------------------------------------------

    def initiate(self) -> bytes:
        """The first 11 bytes of our greeting (signature + major version), to write as soon as
        the connection exists; the rest follows through ``data_to_send()`` once the peer's
        version is known."""
        return signature(len(self.identity))

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
        return _STAGES.get(self._state, "done")

    @property
    def commands(self) -> bool:
        """True when the peer's wire has commands (ZMTP 3.x: PING/PONG); False on ZMTP 2.0."""
        return self._reserved == RESERVED

    def metadata(self) -> bytes:
        """Our properties (READY, or a mechanism's INITIATE/READY): Socket-Type, then Identity
        when the role sends one."""
        return _metadata(self.socket_type, self.identity if self.role.sends_identity else None)

    def ready_command(self) -> bytes:
        """Our READY command (NULL mechanism)."""
        return _ready(self.socket_type, self.identity if self.role.sends_identity else None)

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
            assert self.security is not None
            return seal_message(self.security.seal, parts)
        # the common shapes without a loop (their twin, the general one: framing.encode_message)
        n = len(parts)
        if n == 1:
            p = parts[0]
            size = len(p)
            return SHORT_LAST[size] + p if size <= 255 else pack_long_header(LONG, size) + p
        if n == 2:  # delimiter/identity + body: the common envelope
            p0, p1 = parts
            s0, s1 = len(p0), len(p1)
            return b"".join((SHORT_MORE[s0] if s0 <= 255 else pack_long_header(LONG | MORE, s0), p0,
                             SHORT_LAST[s1] if s1 <= 255 else pack_long_header(LONG, s1), p1))
        if n == 3:  # routing id + delimiter + body: what a device forwards
            p0, p1, p2 = parts
            s0, s1, s2 = len(p0), len(p1), len(p2)
            if s0 <= 255 and s1 <= 255 and s2 <= 255:
                return b"".join((SHORT_MORE[s0], p0, SHORT_MORE[s1], p1, SHORT_LAST[s2], p2))
        elif n == 4:  # an SP request toward a ZeroMQ server: pipe id, request id, "", body
            p0, p1, p2, p3 = parts
            s0, s1, s2, s3 = len(p0), len(p1), len(p2), len(p3)
            if s0 <= 255 and s1 <= 255 and s2 <= 255 and s3 <= 255:
                return b"".join((SHORT_MORE[s0], p0, SHORT_MORE[s1], p1, SHORT_MORE[s2], p2,
                                 SHORT_LAST[s3], p3))
        return encode_message(parts)

    @property
    def subscription_commands(self) -> bool:
        """True when subscriptions go to this peer as RFC 37 ``SUBSCRIBE``/``CANCEL`` commands:
        it announced ZMTP 3.1 or later. A 3.0 peer (libzmq <= 4.3.2, JeroMQ 0.6) and a 2.0 peer
        (no commands at all) get the RFC 23 message form; libzmq chooses the same way
        (``v3_1_encoder`` for minor >= 1 only)."""
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
        return self._out_command(b"PING", ping_data(ttl, context))

    def _out_command(self, name: bytes, data: bytes) -> bytes:
        """A command after the handshake: sealed in a MESSAGE when the mechanism encrypts."""
        if self._sealed and self.handshake_done:
            assert self.security is not None
            body = self.security.seal(0x02, bytes((len(name),)) + name + data)
            return frame_header(0, len(body)) + body
        return encode_command(name, data)

    # -- incoming -------------------------------------------------------------------------

    @property
    def sealed(self) -> bool:
        """True when every frame is a CURVE MESSAGE box (the kernel seam: a reader opens and
        seals them through the mechanism's ``session()``/``advance()``)."""
        return self._sealed

    @property
    def kernel_framing(self) -> str:
        """The kernel seam (:class:`gateway.wire.KernelSeam`): ``zmtp``, ``zmtp-curve`` when
        messages travel in CURVE boxes of an open session, else ``""`` (the kernel leaves the
        pipe to this codec)."""
        if not self._sealed:
            return "zmtp"
        session = getattr(self.security, "session", None)  # CURVE's (gateway.wire.zmtp_curve)
        return "zmtp-curve" if session is not None and session() is not None else ""

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
            state = self._state
            event = READERS[state](self)
            # a greeting step that moved on lets the next state's reader see what followed
            # (states only move forward: this ends)
            while event is None and self._state != state:
                state = self._state
                event = READERS[state](self)
            return event
        except RemoteProtocolError as exc:
            self._state = CLOSED
            self._error = exc
            self.streaming = False
            if isinstance(exc, AuthenticationFailed):  # RFC 27: the client learns it was refused
                self._out += encode_command(b"ERROR", bytes((len(exc.status),)) + exc.status)
            raise

    #: the batch reader (:func:`gateway.wire.zmtp.readers.next_messages`)
    next_messages = readers.next_messages

    # -- the state machine: commands, READY ---------------------------------------------

    def _command(self, body: bytes) -> Event | None:
        """One command (a readers' callback): the mechanism's or READY during the handshake,
        then :data:`~gateway.wire.zmtp.commands.OPEN_COMMANDS`; ERROR ends either phase."""
        name, data = split_command(body)
        if name == b"ERROR":
            self._state = CLOSED  # the peer is done; further bytes are ignored
            self.streaming = False
            return peer_error(data)
        if self._state == AWAIT_READY:
            if self.security is not None:
                replies, peer_metadata = self.security.receive(name, data)
                for reply_name, reply_data in replies:
                    self._out += encode_command(reply_name, reply_data)
                return None if peer_metadata is None else self._ready(peer_metadata)
            if name == b"READY":
                return self._ready(data)
            raise RemoteProtocolError(f"unexpected ZMTP command {name!r} before READY")
        on = OPEN_COMMANDS.get(name)
        if on is None:
            return None  # unknown: skipped
        event = on(data)
        if type(event) is Ping:
            self._pong = self._out_command(b"PONG", event.context)  # replaces one not yet sent
        return event

    def _ready(self, data: bytes) -> HandshakeComplete:
        return self._opened(ready_event(data, self.socket_type, self._accepted,
                                        self.peer_version or (3, 1)))

    def _opened(self, event: HandshakeComplete) -> HandshakeComplete:
        self.peer_type = event.peer_type
        self.peer_identity = event.identity
        self.handshake_done = True
        self._state = SEALED if self._sealed else OPEN
        self.streaming = not self._parts
        return event


# -- the greeting's readers (the rest are gateway.wire.zmtp.readers')


def _read_signature(codec: ZmtpCodec) -> None:
    """GREETING: the peer's signature and major version choose 3.x or 2.0."""
    major = peer_major(codec._rx.data, codec._rx.pos)
    if major is None:
        return None
    if major >= 3:
        codec._out += greeting_rest(codec._mech_name, codec.as_server)
        codec._state = GREETING_REST
        return None
    # RFC 37: "If the peer version number is 1 or 2 ... ZMTP 2.0"
    if not codec.downgrade_allowed():
        raise downgrade_refused(major, codec.mechanism)
    codec.peer_version = (2, 0)
    codec._reserved = RESERVED_V2
    codec._out += v2_answer(codec.socket_type, codec.identity)
    codec._state = V2_IDENTITY
    return None


def _read_greeting_rest(codec: ZmtpCodec) -> None:
    """GREETING_REST: the rest of a 3.x greeting; then READY (or the mechanism's first
    commands) go out."""
    rx = codec._rx
    p = rx.pos
    minor = peer_minor(rx.data, p, codec._mech_name, codec.mechanism, codec.security)
    if minor is None:
        return None
    codec.peer_version = (rx.data[p + 10], minor)
    rx.pos = p + GREETING_SIZE
    codec._state = AWAIT_READY
    if codec.security is None:
        codec._out += codec.ready_command()
    else:
        for name, data in codec.security.start(codec.metadata()):
            codec._out += encode_command(name, data)
    return None


def _read_v2_identity(codec: ZmtpCodec) -> HandshakeComplete | None:
    """V2_IDENTITY: a ZMTP 2.0 peer's socket type and identity complete the handshake."""
    got = v2_handshake(codec._rx.data, codec._rx.pos, codec.socket_type, codec._accepted)
    if got is None:
        return None
    event, codec._rx.pos = got
    return codec._opened(event)


def _closed(codec: ZmtpCodec) -> None:
    """CLOSED: the peer sent ERROR (or broke the protocol); its further bytes are ignored."""
    return None


#: state -> its reader (h11's ``READERS``)
READERS: dict[int, Callable[[ZmtpCodec], Event | None]] = {
    GREETING: _read_signature,
    GREETING_REST: _read_greeting_rest,
    V2_IDENTITY: _read_v2_identity,
    AWAIT_READY: readers.read_handshake,
    OPEN: readers.read_open,
    SEALED: readers.read_sealed,
    CLOSED: _closed,
}


if TYPE_CHECKING:  # the codec meets the contract of gateway.wire (mypy checks these lines)
    from gateway.wire import (
        BatchReading,
        Heartbeats,
        KernelSeam,
        WireCodec,
        ZmtpCodecFactory,
        ZmtpFace,
    )

    _factory: ZmtpCodecFactory = ZmtpCodec

    def _faces(c: ZmtpCodec) -> tuple[WireCodec, BatchReading, Heartbeats, ZmtpFace, KernelSeam]:
        return c, c, c, c, c
