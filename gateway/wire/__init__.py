"""Sans-IO wire codecs: bytes in, events out, bytes to send. No socket, no asyncio.

Every codec has one shape (:class:`WireCodec`, what the engine calls on each)::

    codec = ZmtpCodec(ZmtpRole("REQ", frozenset({"REP", "ROUTER"}), sends_identity=True))
    out = codec.initiate()          # bytes to write as soon as the connection exists
    codec.receive_data(chunk)       # any split of the stream is fine
    ev = codec.next_event()         # None when more bytes are needed
    out = codec.data_to_send()      # bytes the codec wants written (READY, PONG); may be b""
    out = codec.send_message(parts) # encode one message (tuple of frames) -> bytes

``receive_data`` never raises; ``next_event`` raises ``RemoteProtocolError`` (or a subclass:
``PairingError``, ``MessageTooLarge``) when the peer broke the protocol — the pipe must then be
closed (after writing ``data_to_send()`` when the error has ``farewell``: a ZMTP ERROR).
``send_message`` before the handshake finished raises ``LocalProtocolError``.

The optional parts, each a Protocol of its own; the engine asks for them as this says and does
without them:

* :class:`BatchReading` (``partial``, ``next_messages``): ``partial`` is True when bytes of an
  incomplete message are buffered (ZMTP: or frames of a multipart message wait for its last
  frame); the engine asks it after ``next_event()`` returned ``None`` to enforce its
  per-message receive deadline (``Socket(message_timeout=...)``); a codec without it gets no
  deadline. ``next_messages(limit)`` returns up to ``limit`` whole messages in one call (a list
  of frame tuples) and stops before anything else, never raising: what it leaves is
  ``next_event``'s, with the same result as if ``next_event`` had parsed everything
  (``gateway.testing.codec_checks.same_in_batches`` checks that). The engine calls it first on
  every read; a codec that has it must have ``partial`` too.
* :class:`Heartbeats` (``ping``, ``discard_pong``): a codec whose peer can send PINGs (ZMTP
  3.x) queues the PONG itself, at most one (a later PING's replaces it), and has
  ``discard_pong()``: the engine calls it when the peer does not read what we send, so a PING
  flood queues nothing. ``ping(ttl)`` encodes our heartbeat: the engine sends them on a ZMTP
  pipe whose peer speaks 3.x when the codec has it (``hasattr``).
* :class:`ZmtpFace` (``socket_type``, ``subscription_frame``, ``handshake_stage``): what the
  engine asks of a ``zmtp``-family codec besides: the subscription form the peer's version
  takes (a pub/sub pipe always asks), and for a peer that closed during the handshake how far
  it got (``handshake_stage``, read with ``getattr``: a codec without it reports no stage) and
  our type (``socket_type``, asked when the stage is ``"ready"``).
* :class:`KernelSeam` (``kernel_framing``, ``rx``, ``streaming``, ``max_message_size``): the
  compiled kernel's seam, open to any codec whatever its class. ``kernel_framing`` says which
  of the kernel's framings (:data:`KERNEL_FRAMINGS`) the codec's stream uses, read once its
  pipe is ready (``""``: none, the pipe stays the reference's); ``codec.streaming`` is True
  between messages of a plain stream in the open state; ``codec.rx`` is the receive buffer
  (made by ``gateway.wire._buffer.new_buffer``: the kernel reads only its own twin's).
  While ``streaming``, a reader outside the codec may consume whole data messages from ``rx``
  (advancing ``rx.pos``) exactly as ``next_messages`` would, stopping before anything else;
  the codec's state is then as if it had read them.

A codec's identity is data it is given (``ZmtpRole``, ``SpRole``: what to announce, which peers
to accept); the engine builds it from ``gateway.patterns.pairing``. No codec imports a pattern.
The constructors the engine calls are :class:`ZmtpCodecFactory` and :class:`SpCodecFactory`
(``gateway.engine.codecs.make_codec``; the wire hookspec registers them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from gateway.wire.events import Event

if TYPE_CHECKING:
    from gateway.wire._buffer import ReceiveBuffer
    from gateway.wire.sp import SpRole
    from gateway.wire.zmtp import ZmtpRole
    from gateway.wire.zmtp_mechanism import Mechanism


class WireCodec(Protocol):
    """What the engine calls on every codec (one per connection)."""

    family: str  # "zmtp" or "sp"
    handshake_done: bool
    #: the largest message accepted (a plain attribute: the engine and the kernel read it)
    max_message_size: int

    def initiate(self) -> bytes: ...
    def receive_data(self, data: bytes) -> None: ...
    def next_event(self) -> Event | None: ...
    def data_to_send(self) -> bytes: ...
    def send_message(self, parts: tuple[bytes, ...]) -> bytes: ...


class BatchReading(Protocol):
    """Optional, for speed and the message deadline (the engine: ``getattr``/``hasattr``)."""

    @property
    def partial(self) -> bool: ...
    def next_messages(self, limit: int) -> list[tuple[bytes, ...]]: ...


class Heartbeats(Protocol):
    """Optional: a wire with PING/PONG (``discard_pong`` is required of a codec that emits
    :class:`~gateway.wire.events.Ping`; ``ping`` is asked with ``hasattr``)."""

    def ping(self, ttl: int = 0, context: bytes = b"") -> bytes: ...
    def discard_pong(self) -> None: ...


class ZmtpFace(Protocol):
    """What the engine asks of a ``zmtp``-family codec besides :class:`WireCodec`
    (``handshake_stage`` with ``getattr``: optional)."""

    socket_type: str

    @property
    def handshake_stage(self) -> str: ...
    def subscription_frame(self, subscribe: bool, topic: bytes) -> bytes: ...


#: what a codec's ``kernel_framing`` may say: ZMTP frames, ZMTP frames in CURVE MESSAGE boxes
#: (the mechanism then has ``session()`` and ``advance()``, gateway.wire.zmtp_curve), SP
#: messages over TCP, SP messages with nng's ipc prefix byte
KERNEL_FRAMINGS = ("zmtp", "zmtp-curve", "sp", "sp-ipc")


class KernelSeam(Protocol):
    """Optional: the compiled kernel's seam (see the module doc)."""

    max_message_size: int
    #: a plain attribute, not a property: the kernel reads it on every read
    streaming: bool

    @property
    def kernel_framing(self) -> str: ...
    @property
    def rx(self) -> ReceiveBuffer: ...


class ZmtpCodecFactory(Protocol):
    """How the engine makes a ``zmtp``-family codec: ``security`` only when the endpoint has a
    mechanism (PLAIN, CURVE); without it, NULL."""

    def __call__(self, role: ZmtpRole, *, identity: bytes, max_message_size: int,
                 security: Mechanism | None = None) -> WireCodec: ...


class SpCodecFactory(Protocol):
    """How the engine makes an ``sp``-family codec: ``message_prefix`` is the transport's
    ``sp_message_prefix`` (nng's ipc: ``b"\\x01"``). A transport with its own message framing
    (``framing`` other than ``"stream"``, e.g. ``ws``) brings a wire whose factory takes
    ``address`` and ``client`` instead of ``message_prefix``."""

    def __call__(self, role: SpRole, *, max_message_size: int,
                 message_prefix: bytes = b"") -> WireCodec: ...


__all__ = ["BatchReading", "Heartbeats", "KERNEL_FRAMINGS", "KernelSeam", "SpCodecFactory", "WireCodec",
           "ZmtpCodecFactory", "ZmtpFace"]
