"""Sans-IO wire codecs: bytes in, events out, bytes to send. No socket, no asyncio.

Both codecs share one shape (``WireCodec``)::

    codec = ZmtpCodec(ZmtpRole("REQ", frozenset({"REP", "ROUTER"}), sends_identity=True))
    out = codec.initiate()          # bytes to write as soon as the connection exists
    codec.receive_data(chunk)       # any split of the stream is fine
    ev = codec.next_event()         # None when more bytes are needed
    out = codec.data_to_send()      # bytes the codec wants written (READY, PONG); may be b""
    out = codec.send_message(parts) # encode one message (tuple of frames) -> bytes

Optional: ``codec.partial`` (a property) is True when bytes of an incomplete message are
buffered (ZMTP: or frames of a multipart message wait for its last frame); the engine asks it
after ``next_event()`` returned ``None`` to enforce its per-message receive deadline
(``Socket(message_timeout=...)``). A codec without it gets no deadline.

Optional, for speed: ``codec.next_messages(limit)`` returns up to ``limit`` whole messages in
one call (a list of frame tuples) and stops before anything else, never raising: what it leaves
is ``next_event``'s, with the same result as if ``next_event`` had parsed everything
(``gateway.testing.codec_checks.same_in_batches`` checks that). The engine calls it first on
every read; a codec that has it must have ``partial`` too.

The compiled kernel's seam (optional): ``codec.streaming`` (a property) is True between
messages of a plain stream in the open state; ``codec.rx`` is the receive buffer
(``gateway.wire._buffer.ReceiveBuffer``). While ``streaming``, a reader outside the codec may
consume whole data messages from ``rx`` (advancing ``rx.pos``) exactly as ``next_messages``
would, stopping before anything else; the codec's state is then as if it had read them.

A codec whose peer can send PINGs (ZMTP 3.x) queues the PONG itself, at most one (a later
PING's replaces it), and has ``discard_pong()``: the engine calls it when the peer does not
read what we send, so a PING flood queues nothing.

``receive_data`` never raises; ``next_event`` raises ``RemoteProtocolError`` (or a subclass:
``PairingError``, ``MessageTooLarge``) when the peer broke the protocol — the pipe must then be
closed. ``send_message`` before the handshake finished raises ``LocalProtocolError``.

A codec's identity is data it is given (``ZmtpRole``, ``SpRole``: what to announce, which peers
to accept); the engine builds it from ``gateway.patterns.pairing``. No codec imports a pattern.
"""

from __future__ import annotations

from typing import Protocol

from gateway.wire.events import Event


class WireCodec(Protocol):
    family: str  # "zmtp" or "sp"
    handshake_done: bool

    def initiate(self) -> bytes: ...
    def receive_data(self, data: bytes) -> None: ...
    def next_event(self) -> Event | None: ...
    def data_to_send(self) -> bytes: ...
    def send_message(self, parts: tuple[bytes, ...]) -> bytes: ...
