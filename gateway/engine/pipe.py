"""One peer connection: a Pipe is the asyncio protocol that runs one wire codec on one stream.

A pipe owns its codec, its flow control and its write coalescing; it tells its owner (the
socket) what happened through four calls (:class:`PipeOwner`), as a mangos pipe does through
``AddPipe``/``RemovePipe``, and never reaches into the owner's state.

Flow control, both ways:

* reading: the owner counts messages of this pipe waiting in its inbox with
  :meth:`Pipe.enqueued` / :meth:`Pipe.dequeued`; at ``hwm`` the pipe pauses reading (TCP
  back-pressure reaches the peer), at ``hwm // 2`` it resumes;
* writing: the transport's write buffer pauses at ``hwm * 1 KiB`` (``writable`` turns False
  until it drains to half); writes coalesced in a batch count towards the same mark, so
  nothing a pipe buffers grows past ``hwm * 1 KiB`` plus one message.

Deadlines: the handshake must finish within ``handshake_timeout``; after it, a message whose
bytes started arriving must be complete within ``message_timeout`` (a peer that sends half a
big message and stalls would otherwise pin its buffer for ever). The codec says whether an
incomplete message is buffered (``codec.partial``, asked once per received chunk, not per
message); one timer runs while it is, and is cancelled when the message completes. While
reading is paused (our back-pressure, not the peer's fault) no deadline runs.

Heartbeats (ZMTP only, libzmq's HEARTBEAT_IVL/TTL/TIMEOUT, RFC 37 PING/PONG), one timer per
pipe and no cost per message: every ``heartbeat_ivl`` the pipe sends a PING when nothing arrived
since the previous tick (a busy pipe needs none; with ``heartbeat_ttl`` set it always sends one,
so that the peer's TTL sees our traffic). After a PING, a pipe that receives nothing at all for
``heartbeat_timeout`` (default: the interval) is closed (``heartbeat-timeout``); a peer's PING
that carries a TTL closes the pipe when nothing follows it within the TTL, as libzmq does, even
when our own heartbeats are off. Any traffic is proof of life: ``data_received`` only counts
chunks, and a deadline compares the count when it fires (timers are never re-armed per message).
A deadline whose window saw our reading paused (back-pressure: the peer's PONG may wait in the
kernel) closes nothing; the next PING starts a new one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from gateway.errors import (
    HANDSHAKE_REASONS,
    LocalProtocolError,
    MechanismError,
    PairingError,
    ProtocolError,
    VersionError,
)
from gateway.logging import get_logger
from gateway.message import Message
from gateway.metrics import METRICS
from gateway.patterns import pairing
from gateway.patterns.reqrep import SP, ZMTP
from gateway.wire.events import HandshakeComplete, PeerError, Ping, Subscription
from gateway.wire.sniff import ANY, Undecided, wire_of
from gateway.wire.sp import SpRole
from gateway.wire.zmtp import ZmtpRole

log = get_logger("gateway.engine")

#: bytes of write buffer per message of high-water mark (libzmq counts messages, asyncio bytes)
BYTES_PER_HWM = 1024
_DROP_LOG_INTERVAL = 1.0  # seconds: at most one drop line per pipe per interval
#: Messages one pipe may hand its owner in a row; then the loop serves the other pipes before
#: this one reads on, so a flooding peer delays the others by one such batch at most.
FAIR_SHARE = 256


class PipeOwner(Protocol):
    """What a pipe tells its socket. Implementations must not call back into the pipe's
    codec or transport from these calls except through the pipe's public methods."""

    def pipe_ready(self, pipe: Pipe, event: HandshakeComplete) -> bytes | None:
        """The handshake finished: the routing id the owner gives the pipe, or ``None`` when
        it refused it (and aborted it)."""

    def pipe_messages(self, pipe: Pipe, batch: list[tuple[bytes, ...]]) -> None:
        """Decoded messages, in order, one or more (each: its frames on ZMTP, one payload on
        SP). A batch never takes the pipe past its mark: at most ``hwm - queued`` messages."""

    def pipe_lost(self, pipe: Pipe) -> None:
        """The connection is gone (the pipe is never used again)."""

    def pipe_writable(self, pipe: Pipe) -> None:
        """``pipe.writable`` changed."""

    def pipe_subscription(self, pipe: Pipe, event: Subscription) -> None:
        """A ZMTP SUBSCRIBE/CANCEL command (RFC 37) arrived."""


def zmtp_role(kind: str, raw: bool) -> ZmtpRole:
    """What a native socket announces and accepts on ZMTP, from the pairing tables."""
    if pairing.zmtp_socket_type(kind, raw) not in pairing.ZMTP_PEERS:
        raise ValueError(f"unknown socket kind {kind!r}")
    socket_type = pairing.zmtp_socket_type(kind, raw)
    return ZmtpRole(socket_type, pairing.ZMTP_PEERS[socket_type],
                    sends_identity=socket_type in pairing.ZMTP_SENDS_IDENTITY)


def sp_role(kind: str) -> SpRole:
    """What a native socket announces and accepts on SP, from the pairing tables."""
    if kind not in pairing.SP_PROTOCOLS:
        raise ValueError(f"unknown socket kind {kind!r}")
    protocol = pairing.sp_protocol(kind)
    return SpRole(protocol, pairing.SP_PEERS[protocol], names=pairing.SP_NAMES)


def make_codec(factory: Any, family: str, kind: str, raw: bool, *, identity: bytes,
               max_message_size: int, transport: Any, mechanism: Any = None) -> Any:
    """A codec from a wire registration, given its identity as data (see ``hookspecs``).

    SP framing comes from the transport plugin: ``sp_message_prefix`` (nng's ipc: ``b"\\x01"``).
    ``mechanism``: a ZMTP security mechanism (``gateway.wire.zmtp_mechanism``; None: NULL).
    """
    if family == ZMTP:
        if mechanism is not None:
            return factory(zmtp_role(kind, raw), identity=identity,
                           max_message_size=max_message_size, security=mechanism)
        return factory(zmtp_role(kind, raw), identity=identity, max_message_size=max_message_size)
    if family == SP:
        return factory(sp_role(kind), max_message_size=max_message_size,
                       message_prefix=getattr(transport, "sp_message_prefix", b""))
    raise LocalProtocolError(f"unknown wire family {family!r}")


class _Batch:
    """Write coalescing, per thread (each thread runs its own loop): while received messages
    are dispatched, writes are buffered per pipe; the buffers are flushed with one
    ``transport.write`` each once the loop has run every read of this iteration (``call_soon``),
    so requests of many clients that go to one back-end pipe share a write. One message in
    flight still costs one write; a burst of N costs one per pipe, not N. A pipe keeps its
    thread's batch (:func:`_thread_batch`): a ``threading.local`` attribute costs a dict lookup
    on every access, and the hot path touches the batch a few times a message."""

    __slots__ = ("depth", "dirty", "scheduled")

    def __init__(self) -> None:
        self.depth = 0
        self.dirty: list[Pipe] = []
        #: the loop a flush is scheduled on (None: none): a loop closed before its flush ran
        #: does not stop the next loop's
        self.scheduled: asyncio.AbstractEventLoop | None = None


_local = threading.local()


def _thread_batch() -> _Batch:
    """The calling thread's batch."""
    try:
        return cast(_Batch, _local.batch)
    except AttributeError:
        _local.batch = batch = _Batch()
        return batch


def _flush(batch: _Batch) -> None:
    batch.scheduled = None
    dirty, batch.dirty = batch.dirty, []
    for pipe in dirty:
        pipe._flush()


def check_body(pipe: Pipe, msg: Message) -> None:
    """Refuse a message the pipe's wire cannot carry (SP: exactly one body frame)."""
    if pipe.family == SP and len(msg.body) != 1:
        raise LocalProtocolError(f"SP carries exactly one body frame, not {len(msg.body)}")


def _peer_address(transport: asyncio.BaseTransport) -> str:
    name = transport.get_extra_info("peername")
    if isinstance(name, tuple) and len(name) >= 2:
        host = str(name[0])
        return f"[{host}]:{name[1]}" if ":" in host else f"{host}:{name[1]}"
    return str(name or transport.get_extra_info("sockname") or "")


class Pipe(asyncio.Protocol):
    """One connection to one peer, over one wire. Created by a listener or a dialer."""

    def __init__(self, owner: PipeOwner, codec: Any, family: str, endpoint: str, *,
                 hwm: int = 1000, handshake_timeout: float = 10.0,
                 message_timeout: float | None = 10.0, name: str = "",
                 lost: asyncio.Future[bool] | None = None, heartbeat_ivl: float = 0.0,
                 heartbeat_ttl: float = 0.0, heartbeat_timeout: float | None = None) -> None:
        self.owner = owner
        self.codec = codec
        self._next_messages = getattr(codec, "next_messages", None)  # (see process)
        self._batch = _thread_batch()  # (again at connection_made: the loop's thread)
        self.family = family
        self.endpoint = endpoint
        self.name = name  # the owner's name, for logs
        self.hwm = hwm
        self.handshake_timeout = handshake_timeout
        self.message_timeout = message_timeout or 0.0  # None or 0: no per-message deadline
        # True once the handshake is done, when there is a deadline and the codec can tell
        # (a third-party wire without ``partial`` gets none)
        self._watch = False
        self._msg_timer: asyncio.TimerHandle | None = None
        self._msg_start = 0.0  # loop time the incomplete message started (about)
        self.transport: asyncio.Transport | None = None
        #: the loop of the connection (asyncio.get_running_loop() costs a getpid() on 3.11)
        self._loop: asyncio.AbstractEventLoop | None = None
        #: set by the owner on accepted connections: False refuses the peer before any byte
        self.admit: Callable[[Pipe], bool] | None = None
        self.accepted = False  # admitted by a listener (counted against max_connections)
        self.routing_id = b""
        self.peer_type = ""
        self.ready = False
        self.writable = True
        self.queued = 0  # messages of this pipe in the owner's inbox
        self.reading = True
        self._turn = False  # paused to let other pipes go first (see FAIR_SHARE)
        self.peer = ""  # the other end's address, for the logs (host:port, or the path)
        self.close_reason = ""
        self.wbuf: list[bytes] = []  # coalesced writes while a batch is open
        self._wbuf_size = 0
        self._high = hwm * BYTES_PER_HWM
        self._closed = False
        self._lost = lost
        self._timer: asyncio.TimerHandle | None = None
        self._drop_logged = -_DROP_LOG_INTERVAL
        self._drops_suppressed = 0
        # heartbeats (see the module doc): seconds; the chunk count is the only per-read cost
        self.heartbeat_ivl = heartbeat_ivl
        self.heartbeat_ttl = min(round(heartbeat_ttl * 10), 0xFFFF)  # deciseconds, on the wire
        self.heartbeat_timeout = heartbeat_ivl if heartbeat_timeout is None else heartbeat_timeout
        self.rx_chunks = 0  # chunks received (any traffic is proof of life)
        self.pauses = 0  # times reading was paused (our back-pressure hides the peer's traffic)
        self._hb_seen = 0  # rx_chunks at the previous heartbeat tick
        self._hb_tick: asyncio.TimerHandle | None = None
        self._hb_wait: asyncio.TimerHandle | None = None  # after our PING: heartbeat_timeout
        self._hb_wait_mark = 0
        self._ttl_wait: asyncio.TimerHandle | None = None  # after the peer's PING: its TTL
        #: why the handshake failed (a ``HANDSHAKE_REASONS`` key; empty: it did not, or the
        #: peer closed), with the detail and the fields of the owner's log line
        self.fail_reason = ""
        self.fail_detail = ""
        self.fail_fields: dict[str, str] = {}
        self.received_before_handshake = 0  # bytes, for the "peer-closed" line
        self.lost_error = ""

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_arrived(self, transport: asyncio.BaseTransport) -> bool:
        """The connection exists (before any layer's handshake, TLS or WebSocket): a
        listener's limits decide now, so a refused peer costs no TLS handshake. False: refused
        (counted and logged by the owner); the caller aborts the connection. A layer calls it
        from its own ``connection_made``; a plain connection goes through it in
        :meth:`connection_made`."""
        if self.admit is None or self.accepted:
            return True
        self.peer = _peer_address(transport)
        if self.admit(self):
            return True
        self._closed = True  # the owner refused it: its end is no failure of the peer's
        return False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport of any loop (asyncio's, uvloop's, inproc's): no isinstance check
        self.transport = transport = cast(asyncio.Transport, transport)
        self._batch = _thread_batch()
        if self._closed:  # the owner closed before the connection was made
            transport.abort()
            return
        transport.set_write_buffer_limits(high=self._high, low=self._high // 2)
        self.peer = _peer_address(transport)
        if not self.connection_arrived(transport):
            transport.abort()  # a listener's limit refused it (counted and logged by the owner)
            return
        self._greet(transport)
        self._loop = loop = asyncio.get_running_loop()
        self._timer = loop.call_later(
            self.handshake_timeout, self._handshake_timeout)

    def _greet(self, transport: asyncio.Transport) -> None:
        transport.write(self.codec.initiate())

    def data_received(self, data: bytes) -> None:
        self.rx_chunks += 1
        if not self.ready:
            self.received_before_handshake += len(data)
        self.codec.receive_data(data)
        self.process()

    def process(self) -> None:
        """Dispatch decoded events; stop while reading is paused (the rest stays in the codec)."""
        codec = self.codec
        # whole messages in one call (a third-party codec may only have next_event)
        next_messages = self._next_messages
        batch = self._batch
        batch.depth += 1  # writes caused by these messages are coalesced (see _flush)
        done = 0  # messages completed by this call (the message deadline restarts)
        drained = False
        try:
            while self.reading and not self.close_reason:
                if next_messages is not None:
                    # at most the fair share, and never past the owner's mark (see enqueued)
                    room = self.hwm - self.queued
                    if room > FAIR_SHARE - done:
                        room = FAIR_SHARE - done
                    msgs = next_messages(room) if room > 0 else None
                    if msgs:
                        done += len(msgs)
                        self.owner.pipe_messages(self, msgs)
                        if done >= FAIR_SHARE:  # let the other pipes have their turn first
                            self._yield_turn()
                            break
                        if len(msgs) < room and not codec.partial:
                            drained = True  # every byte read is parsed: next_event has none
                            break
                        continue
                event = codec.next_event()
                if event is None:
                    break
                if type(event) is tuple:
                    self.owner.pipe_messages(self, [event])
                    done += 1
                    if done >= FAIR_SHARE:  # let the other pipes have their turn first
                        self._yield_turn()
                        break
                else:
                    if type(event) is Ping and (not self.writable or
                                                self.buffered >= self._high):
                        # the peer does not read what we send: its PINGs get no PONG until
                        # it does (a PING flood queues nothing; libzmq keeps one PONG)
                        codec.discard_pong()
                    # the codec's own bytes so far (our READY, a PONG) go before whatever
                    # the event makes us write (a subscription once the handshake is done)
                    out = codec.data_to_send()
                    if out:
                        self.write_bytes(out)
                    self._on_event(event)
        except ProtocolError as exc:
            if not self.ready:
                self._handshake_error(exc)
            # a refused peer is told why first (ZMTP ERROR), then the connection closes
            farewell = codec.data_to_send() if getattr(exc, "farewell", False) else b""
            self.abort(exc.reason or type(exc).__name__, str(exc), farewell)
        else:
            out = codec.data_to_send()
            if out:  # behind the messages this pipe holds: a CURVE nonce only goes up
                self.write_bytes(out)
            if self._watch and (self._msg_timer is not None or not drained and codec.partial):
                self._watch_partial(done)
        finally:
            batch.depth -= 1
            if not batch.depth and batch.dirty:
                loop = self._loop or asyncio.get_running_loop()
                if batch.scheduled is not loop:  # after the other reads of this iteration
                    batch.scheduled = loop
                    loop.call_soon(_flush, batch)

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self.lost_error = str(exc) or type(exc).__name__
        if self._timer is not None:
            self._timer.cancel()
        if self._msg_timer is not None:
            self._msg_timer.cancel()
            self._msg_timer = None
        self._stop_heartbeats()
        self.owner.pipe_lost(self)
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(self.ready)  # True: it worked for a while (the dialer resets backoff)

    def pause_writing(self) -> None:
        self.writable = False
        self.owner.pipe_writable(self)

    def resume_writing(self) -> None:
        self.writable = True
        self.owner.pipe_writable(self)

    # -- fairness: one pipe's burst waits for the others' turn ----------------------------------
    def _yield_turn(self) -> None:
        if self.transport is None or self._turn:
            return
        self._turn = True
        self.pause()
        asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._turn = False
        if self.queued < self.hwm:  # not held back by the owner's inbox meanwhile
            self.resume()

    # -- reading flow control (called by the owner) --------------------------------------------
    def enqueued(self) -> None:
        """One more message of this pipe waits in the owner's inbox; pause reading at hwm."""
        self.queued += 1
        if self.queued >= self.hwm:
            self.pause()

    def dequeued(self) -> None:
        """The owner took one message of this pipe; resume reading at half the hwm."""
        self.queued -= 1
        if not self.reading and not self._turn and self.queued <= self.hwm // 2:
            self.resume()

    def pause(self) -> None:
        """Stop reading: nothing more reaches the owner until :meth:`resume`."""
        if self.reading and self.transport is not None:
            self.reading = False
            self.pauses += 1
            self.transport.pause_reading()

    def resume(self) -> None:
        """Read again: first the messages already decoded, then the stream."""
        if self.reading or self.transport is None:
            return
        self.reading = True
        self.process()  # messages read while paused
        if self.reading:
            self.transport.resume_reading()

    # -- writing -----------------------------------------------------------------------------
    def write(self, msg: Message) -> None:
        hops, body = msg
        if self.family == SP and len(body) != 1:
            raise LocalProtocolError(f"SP carries exactly one body frame, not {len(body)}")
        self.write_bytes(self.codec.send_message(hops + body if hops else body))

    def write_frames(self, frames: tuple[bytes, ...]) -> None:
        """Write one message given as its wire frames (hops + body; the caller checked that
        an SP pipe gets one body frame)."""
        data = self.codec.send_message(frames)
        batch = self._batch
        if batch.depth and self._wbuf_size + len(data) < self._high:  # write_bytes, inline
            if not self.wbuf:
                batch.dirty.append(self)
            self.wbuf.append(data)
            self._wbuf_size += len(data)
        else:
            self.write_bytes(data)

    def write_subscription(self, sub: Subscription) -> None:
        """Send a subscription or cancel to a ZMTP publisher, in the form its version takes."""
        self.write_bytes(self.codec.subscription_frame(sub.subscribe, sub.topic))

    def write_bytes(self, data: bytes) -> None:
        """Write encoded bytes: coalesced while a batch is open, else at once (after what this
        pipe still holds from a batch: the order on the wire is the order of the writes)."""
        batch = self._batch
        if batch.depth:
            if not self.wbuf:
                batch.dirty.append(self)
            self.wbuf.append(data)
            self._wbuf_size += len(data)
            if self._wbuf_size >= self._high:
                self._flush()  # the batch is bounded too: the transport's mark takes over
        elif self.transport is not None:
            if self.wbuf:
                self._flush()
            self.transport.write(data)

    def _flush(self) -> None:
        chunks, self.wbuf = self.wbuf, []
        self._wbuf_size = 0
        transport = self.transport
        if chunks and transport is not None and not transport.is_closing():
            transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    @property
    def buffered(self) -> int:
        """Bytes written to this pipe and not yet sent (transport buffer + open batch)."""
        transport = self.transport
        return self._wbuf_size + (transport.get_write_buffer_size() if transport is not None else 0)

    def dropped(self, reason: str) -> None:
        """A message for this pipe was dropped: count it; log at most one line a second."""
        METRICS.inc("gateway_socket_dropped_messages_total", reason=reason)
        now = time.monotonic()
        if now - self._drop_logged < _DROP_LOG_INTERVAL:
            self._drops_suppressed += 1
            return
        log.warning("drop", reason=reason, endpoint=self.endpoint, socket=self.name,
                    suppressed=self._drops_suppressed)
        self._drop_logged = now
        self._drops_suppressed = 0

    # -- closing -----------------------------------------------------------------------------
    def abort(self, reason: str, detail: str = "", farewell: bytes = b"") -> None:
        """Close this pipe because of bad input; the socket and its other pipes go on.
        ``farewell``: bytes to send before closing (an ERROR command).

        Before the handshake completed, the owner logs the failure (``pipe_lost``: one line per
        endpoint and reason, rate-limited, and ``gateway_handshake_failures_total``)."""
        if self.close_reason:
            return
        self.close_reason = reason
        METRICS.inc("gateway_pipes_closed_total", reason=reason)
        if self.ready:
            log.warning("pipe.closed", endpoint=self.endpoint, peer=self.peer, reason=reason,
                        detail=detail, socket=self.name)
        else:
            if not self.fail_reason:
                self.fail_reason = reason if reason in HANDSHAKE_REASONS else "garbage"
            self.fail_detail = self.fail_detail or detail
        if self.transport is not None:
            if farewell and not self.transport.is_closing():
                self.transport.write(farewell)
                self.transport.close()  # flushes the farewell, then closes
                loop = asyncio.get_running_loop()
                loop.call_later(max(self.handshake_timeout, 1.0), self.transport.abort)
            else:
                self.transport.abort()

    def _handshake_error(self, exc: ProtocolError) -> None:
        """Classify a protocol error before the handshake completed, with what the peer said."""
        self.fail_reason = getattr(exc, "handshake_reason", "garbage")
        self.fail_detail = str(exc)
        fields: dict[str, str] = {"wire": self.family}
        if isinstance(exc, VersionError):
            fields["peer_version"] = exc.peer_version
        elif isinstance(exc, MechanismError):
            fields["peer_mechanism"] = exc.peer_mechanism
            fields["mechanism"] = exc.mechanism
        elif isinstance(exc, PairingError):
            fields["socket_type"] = exc.ours
            fields["peer_type"] = exc.theirs
        self.fail_fields = fields

    @property
    def authenticated_as(self) -> str:
        """Who the peer proved to be (the CURVE client key, the PLAIN user); ``""`` with
        NULL security or on the client side."""
        return str(getattr(getattr(self.codec, "security", None), "user_id", "") or "")

    @property
    def closing(self) -> bool:
        """True once the owner closed this pipe (its end is no failure of the peer's)."""
        return self._closed

    def close(self, linger: float) -> None:
        """The owner is closing: pending writes get ``linger`` seconds (0: drop them)."""
        self._closed = True
        self._flush()
        transport = self.transport
        if transport is None:
            return  # connection_made will abort
        if linger > 0 and transport.get_write_buffer_size():
            transport.close()  # flushes, then closes
            asyncio.get_running_loop().call_later(linger, transport.abort)
        elif linger <= 0:
            transport.abort()
        else:
            transport.close()

    # -- internals -----------------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        if isinstance(event, HandshakeComplete):
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self.peer_type = event.peer_type
            routing_id = self.owner.pipe_ready(self, event)
            if routing_id is not None:
                self.routing_id = routing_id
                self.ready = True
                self._watch = bool(self.message_timeout) and hasattr(type(self.codec), "partial")
                # PING/PONG are ZMTP 3.x commands: an older peer (2.0, 1.0) gets none, as libzmq
                if (self.heartbeat_ivl > 0 and self.family == ZMTP and event.version >= (3, 0)
                        and hasattr(self.codec, "ping")):
                    self._hb_seen = self.rx_chunks
                    self._hb_tick = asyncio.get_running_loop().call_later(
                        self.heartbeat_ivl, self._heartbeat)
        elif isinstance(event, Ping):
            if event.ttl and self.ready:  # the peer wants to hear from us... and we from it
                if self._ttl_wait is not None:  # this PING is traffic: libzmq restarts the timer
                    self._ttl_wait.cancel()
                self._ttl_wait = asyncio.get_running_loop().call_later(
                    event.ttl / 10, self._ttl_expired, self.rx_chunks + self.pauses,
                    event.ttl / 10)
        elif isinstance(event, Subscription):
            if self.ready:
                self.owner.pipe_subscription(self, event)
        elif isinstance(event, PeerError):
            self.abort("peer-error", event.reason)

    def _watch_partial(self, done: int) -> None:
        """After a received chunk was processed: run the message deadline while an incomplete
        message is buffered (one timer per message, not per chunk), stop it otherwise."""
        if self.reading and self.codec.partial:
            if self._msg_timer is None:
                loop = asyncio.get_running_loop()
                self._msg_start = loop.time()
                self._msg_timer = loop.call_later(self.message_timeout, self._message_timeout)
            elif done:  # the message it was armed for completed; the one now partial is newer
                self._msg_start = asyncio.get_running_loop().time()
        elif self._msg_timer is not None:  # complete, or reading paused (not the peer's fault)
            self._msg_timer.cancel()
            self._msg_timer = None

    def _message_timeout(self) -> None:
        self._msg_timer = None
        if self.close_reason or self._closed:
            return
        loop = asyncio.get_running_loop()
        left = self._msg_start + self.message_timeout - loop.time()
        if left > 0:  # messages completed meanwhile: the current one's deadline is later
            self._msg_timer = loop.call_later(left, self._message_timeout)
            return
        self.abort("message-timeout", f"a message still incomplete after {self.message_timeout}s")

    # -- heartbeats (ZMTP) ----------------------------------------------------------------------
    def _heartbeat(self) -> None:
        """Every ``heartbeat_ivl``: a PING when the peer was silent since the last tick (or when
        we promise a TTL); after it, ``heartbeat_timeout`` to hear anything back."""
        self._hb_tick = None
        transport = self.transport
        if self.close_reason or self._closed or transport is None or transport.is_closing():
            return
        loop = asyncio.get_running_loop()
        heard = self.rx_chunks != self._hb_seen
        self._hb_seen = self.rx_chunks
        if not heard or self.heartbeat_ttl:
            self.write_bytes(self.codec.ping(self.heartbeat_ttl))  # after what the pipe holds
            wait = self._hb_wait
            if wait is not None and self.rx_chunks + self.pauses != self._hb_wait_mark:
                wait.cancel()  # traffic since that PING: libzmq would have cancelled it then
                wait = self._hb_wait = None
            if wait is None and self.heartbeat_timeout > 0:
                self._hb_wait_mark = self.rx_chunks + self.pauses
                self._hb_wait = loop.call_later(self.heartbeat_timeout, self._heartbeat_expired)
        self._hb_tick = loop.call_later(self.heartbeat_ivl, self._heartbeat)

    def _heartbeat_expired(self) -> None:
        self._hb_wait = None
        # unchanged marks: nothing arrived, and reading was never paused (our back-pressure)
        if self.rx_chunks + self.pauses == self._hb_wait_mark and self.reading:
            self.abort("heartbeat-timeout",
                       f"nothing received within {self.heartbeat_timeout}s of a PING")

    def _ttl_expired(self, mark: int, ttl: float) -> None:
        self._ttl_wait = None
        if self.rx_chunks + self.pauses == mark and self.reading:
            self.abort("heartbeat-timeout",
                       f"nothing received within the peer's heartbeat TTL ({ttl}s)")

    def _stop_heartbeats(self) -> None:
        for timer in (self._hb_tick, self._hb_wait, self._ttl_wait):
            if timer is not None:
                timer.cancel()
        self._hb_tick = self._hb_wait = self._ttl_wait = None

    def _handshake_timeout(self) -> None:
        if not self.ready:
            self.abort("handshake-timeout", f"no handshake within {self.handshake_timeout}s")


class SniffingPipe(Pipe):
    """A pipe of an ``any+`` listener (one port, both wires): silent until the peer's first
    byte says which wire it speaks (:func:`gateway.wire.sniff.wire_of`), then a pipe of that
    wire, with the codec ``codec_for(family)`` makes. The handshake deadline runs from the
    connection, so a peer that never speaks is a ``handshake-timeout`` as anywhere else."""

    def __init__(self, owner: PipeOwner, codec_for: Callable[[str], Any], endpoint: str,
                 **options: Any) -> None:
        super().__init__(owner, Undecided(), ANY, endpoint, **options)
        self._codec_for = codec_for

    def _greet(self, transport: asyncio.Transport) -> None:
        pass  # both wires' clients speak first: our greeting waits for their first byte

    def data_received(self, data: bytes) -> None:
        if self.family == ANY and data:
            self.family = wire_of(data[0])
            self.codec = self._codec_for(self.family)
            self._next_messages = getattr(self.codec, "next_messages", None)
            if self.transport is not None:
                self.transport.write(self.codec.initiate())
        super().data_received(data)


__all__ = ["BYTES_PER_HWM", "Pipe", "PipeOwner", "SniffingPipe", "check_body", "make_codec",
           "sp_role", "zmtp_role"]
