"""One peer connection: a Pipe is the asyncio protocol that runs one wire codec on one stream.

A pipe owns its codec, its flow control and its write coalescing; it tells its owner (the
socket) what happened through five calls (:class:`PipeOwner`), as a mangos pipe does through
``AddPipe``/``RemovePipe``, and never reaches into the owner's state. A connection that ends
before its handshake completed hands its owner a :class:`PipeFailure` (why, what was seen),
built here from what the codec raised, what a layer below reported (a
:class:`~gateway.errors.LayerError`, e.g. TLS) or how far the peer got before it closed.

Flow control, both ways:

* reading: the owner counts messages of this pipe waiting in its inbox with
  :meth:`Pipe.enqueued` / :meth:`Pipe.dequeued`; at ``hwm`` the pipe pauses reading (TCP
  back-pressure reaches the peer), at ``hwm // 2`` it resumes;
* writing: the transport's write buffer pauses at ``hwm * 1 KiB``, or ``hwm`` times the
  largest message written to the pipe once one is larger (libzmq's hwm counts messages:
  :meth:`~gateway.engine.writes.Writes.fit_mark`), and ``writable`` turns False until it
  drains to half; writes coalesced in a batch count towards the same mark, so nothing a pipe
  buffers grows past that mark plus one message.

Deadlines and heartbeats are :class:`gateway.engine.liveness.Liveness`'s: the handshake must
finish within ``handshake_timeout`` (here), a started message within ``message_timeout``, and
ZMTP heartbeats run after the handshake.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from gateway import kernel
from gateway.engine.failures import PipeFailure, failure_at_loss, failure_of
from gateway.engine.liveness import Liveness
from gateway.engine.pipe_state import PipeState
from gateway.engine.read_buffer import new_read_buffer, thread_scratch
from gateway.engine.reading import Reading
from gateway.engine.writes import BYTES_PER_HWM, Writes, set_transport_limits, thread_batch
from gateway.errors import HANDSHAKE_REASONS, ProtocolError
from gateway.logging import get_logger
from gateway.metrics import METRICS
from gateway.patterns.reqrep import ZMTP
from gateway.transport import PipeProtocol
from gateway.wire.events import HandshakeComplete, PeerError, Ping, Subscription
from gateway.wire.sniff import ANY, Undecided, wire_of

log = get_logger("gateway.engine")

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

    def pipe_lost(self, pipe: Pipe, failure: PipeFailure | None) -> None:
        """The connection is gone (the pipe is never used again); ``failure``: why it ended
        before its handshake completed (None: it was up, or the owner closed it)."""

    def pipe_writable(self, pipe: Pipe) -> None:
        """``pipe.writable`` changed."""

    def pipe_subscription(self, pipe: Pipe, event: Subscription) -> None:
        """A ZMTP SUBSCRIBE/CANCEL command (RFC 37) arrived."""

    def pipe_unsent(self, pipe: Pipe, reason: str, count: int) -> bool:
        """``count`` messages for the pipe were lost (at its mark, or queued when it closed):
        True when the owner's observer counted them, False to let the pipe count them."""


def _peer_address(transport: asyncio.BaseTransport) -> str:
    name = transport.get_extra_info("peername")
    if isinstance(name, tuple) and len(name) >= 2:
        host = str(name[0])
        return f"[{host}]:{name[1]}" if ":" in host else f"{host}:{name[1]}"
    return str(name or transport.get_extra_info("sockname") or "")


if TYPE_CHECKING:  # for the type checker, a pipe's methods see its hot fields (either twin's)
    _Hot = PipeState
else:
    _Hot = object


class PipeBody(Reading, Writes, PipeProtocol, asyncio.BufferedProtocol, _Hot):
    """One connection to one peer, over one wire. Created by a listener or a dialer; its
    settings (``hwm``, the deadlines, heartbeats, the owner's ``name`` for logs) come from the
    owner's options. The methods of a pipe: its class puts them on a hot-state twin
    (:class:`Pipe`, the reference; :func:`pipe_class`, the compiled kernel's).

    Reading: a loop's transport (plain TCP and IPC) reads into the pipe's read buffer
    (``asyncio.BufferedProtocol``: :class:`~gateway.engine.reading.Reading`); a layer (TLS,
    WebSocket) or a transport of its own (inproc) calls :meth:`data_received`."""

    def __init__(self, owner: PipeOwner, codec: Any, family: str, endpoint: str, options: Any,
                 lost: asyncio.Future[bool] | None = None) -> None:
        self.owner = owner
        self.codec = codec
        self._next_messages = getattr(codec, "next_messages", None)  # optional (see process)
        #: the owner's per-read forwarders (SocketHooks.fast, fast_read: the compiled kernel)
        #: and that kernel's own record of this pipe (made at its first read or write)
        self.fast: Callable[[Pipe], int] | None = None
        self.fast_read: Callable[[Pipe, bytes], bool] | None = None
        self.kernel_state: Any = None
        self.rbuf = new_read_buffer()  # what the loop reads into (get_buffer)
        self._batch = thread_batch()  # (again at connection_made: the loop's thread)
        self.family = family
        self.endpoint = endpoint
        self.name = options.name  # the owner's name, for logs
        self.hwm = hwm = options.hwm
        self.handshake_timeout = options.handshake_timeout
        message_timeout = options.message_timeout or 0.0  # None or 0: no per-message deadline
        self.liveness = Liveness(self, heartbeat_ivl=options.heartbeat_ivl,
                                 heartbeat_ttl=options.heartbeat_ttl,
                                 heartbeat_timeout=options.heartbeat_timeout,
                                 message_timeout=message_timeout)
        self._watch = False  # once ready, with a deadline and a codec that has ``partial``
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
        self._high = hwm * BYTES_PER_HWM
        self._init_writes()
        self._closed = False
        self._lost = lost
        self._timer: asyncio.TimerHandle | None = None
        self.rx_chunks = 0  # chunks received (any traffic is proof of life)
        self.pauses = 0  # times reading was paused (our back-pressure hides the peer's traffic)
        self.received_before_handshake = 0  # bytes, for the "peer-closed" failure
        self._failure: PipeFailure | None = None  # why the handshake failed, once known

    @property
    def as_pipe(self) -> Pipe:
        """This pipe, as its owner sees it (every pipe is a :class:`Pipe` or its compiled
        twin, :func:`pipe_class`)."""
        return cast(Pipe, self)

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_arrived(self, transport: asyncio.BaseTransport) -> bool:
        """The connection exists (before any layer's handshake, TLS or WebSocket): a
        listener's limits decide now, so a refused peer costs no TLS handshake. False: refused
        (counted and logged by the owner); the caller aborts the connection. A layer calls it
        from its own ``connection_made``; a plain connection goes through it in
        :meth:`connection_made`."""
        self.peer = _peer_address(transport)
        if self.admit is None or self.accepted:
            return True
        if self.admit(self):  # type: ignore[arg-type]
            return True
        self._closed = True  # the owner refused it: its end is no failure of the peer's
        return False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport of any loop (asyncio's, uvloop's, inproc's): no isinstance check
        self.transport = transport = cast(asyncio.Transport, transport)
        self._batch, self.rbuf.shared = thread_batch(), thread_scratch(type(self.rbuf))
        if self._closed:  # the owner closed before the connection was made
            transport.abort()
            return
        set_transport_limits(transport)
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
        fast_read = self.fast_read
        if fast_read is not None and fast_read(self, data):  # type: ignore[arg-type]
            return  # the kernel took the read (and Pipe.process what it left)
        self.rx_chunks += 1
        if not self.ready:
            self.received_before_handshake += len(data)
        self.codec.receive_data(data)
        self.process()

    def process(self, done: int = 0) -> None:
        """Dispatch decoded events; stop while reading is paused (the rest stays in the codec).
        ``done``: messages of this read the kernel already took (one FAIR_SHARE a read)."""
        codec = self.codec
        # whole messages in one call (a third-party codec may only have next_event)
        next_messages = self._next_messages
        batch = self._batch
        batch.depth += 1  # writes caused by these messages are coalesced (see writes.Batch)
        drained = False
        try:
            fast = self.fast
            if fast is not None and self.reading:  # the usual messages, compiled, first
                # (done: also the messages the deadline restarts on)
                done += fast(self)  # type: ignore[arg-type]
                if done >= FAIR_SHARE:
                    self.yield_turn()
            while self.reading and not self.close_reason and done < FAIR_SHARE:
                if next_messages is not None:
                    # at most the fair share, and never past the owner's mark (see enqueued)
                    room = self.hwm - self.queued
                    if room > FAIR_SHARE - done:
                        room = FAIR_SHARE - done
                    msgs = next_messages(room) if room > 0 else None
                    if msgs:
                        done += len(msgs)
                        self.owner.pipe_messages(self, msgs)  # type: ignore[arg-type]
                        if done >= FAIR_SHARE:  # let the other pipes have their turn first
                            self.yield_turn()
                            break
                        if len(msgs) < room and not codec.partial:
                            drained = True  # every byte read is parsed: next_event has none
                            break
                        continue
                event = codec.next_event()
                if event is None:
                    break
                if type(event) is tuple:
                    self.owner.pipe_messages(self, [event])  # type: ignore[arg-type]
                    done += 1
                    if done >= FAIR_SHARE:  # let the other pipes have their turn first
                        self.yield_turn()
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
                self._failure = failure_of(exc, self.family)
            # a refused peer is told why first (ZMTP ERROR), then the connection closes
            farewell = codec.data_to_send() if getattr(exc, "farewell", False) else b""
            self.abort(exc.reason, str(exc), farewell)
        else:
            out = codec.data_to_send()
            if out:  # behind the messages this pipe holds: a CURVE nonce only goes up
                self.write_bytes(out)
            if self._watch and (self.liveness.watching or not drained and codec.partial):
                self.liveness.watch_partial(done)
        finally:
            batch.close(self._loop or asyncio.get_running_loop())

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.liveness.stop()
        failure = None
        if not self.ready and not self._closed:  # why its handshake never completed
            failure = failure_at_loss(exc, self._failure, self.codec, self.family,
                                      self.received_before_handshake)
        self.lose_queue()  # (counted while the owner's observer still listens)
        self.owner.pipe_lost(self.as_pipe, failure)
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(self.ready)  # True: it worked for a while (the dialer resets backoff)

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
        elif self._failure is None:
            self._failure = PipeFailure(reason if reason in HANDSHAKE_REASONS else "garbage",
                                        detail, {"wire": self.family})
        self.hang_up(farewell, max(self.handshake_timeout, 1.0))

    @property
    def authenticated_as(self) -> str:
        """Who the peer proved to be (the CURVE client key, the PLAIN user); ``""`` with
        NULL security or on the client side."""
        return str(getattr(getattr(self.codec, "security", None), "user_id", "") or "")

    # -- internals -----------------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        if isinstance(event, HandshakeComplete):
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self.peer_type = event.peer_type
            routing_id = self.owner.pipe_ready(self.as_pipe, event)
            if routing_id is not None:
                self.routing_id = routing_id
                self.ready = True
                self._watch = (bool(self.liveness.message_timeout)
                               and hasattr(type(self.codec), "partial"))
                # PING/PONG are ZMTP 3.x commands: an older peer (2.0, 1.0) gets none, as libzmq
                if self.family == ZMTP and event.version >= (3, 0) and hasattr(self.codec, "ping"):
                    self.liveness.start_heartbeats(self._loop or asyncio.get_running_loop())
        elif isinstance(event, Ping):
            if self.ready:  # the peer wants to hear from us... and we from it
                self.liveness.peer_ping(event.ttl)
        elif isinstance(event, Subscription):
            if self.ready:
                self.owner.pipe_subscription(self.as_pipe, event)
        elif isinstance(event, PeerError):
            self.abort("peer-error", event.reason)

    def _handshake_timeout(self) -> None:
        if not self.ready:
            self.abort("handshake-timeout", f"no handshake within {self.handshake_timeout}s")


class Pipe(PipeBody, PipeState):
    """The reference pipe: :class:`PipeBody`'s methods on the slotted hot state."""

    __slots__ = ()


class SniffingBody(PipeBody):
    """A pipe of an ``any+`` listener (one port, both wires): silent until the peer's first
    byte says which wire it speaks (:func:`gateway.wire.sniff.wire_of`), then a pipe of that
    wire, with the codec ``codec_for(family)`` makes. The handshake deadline runs from the
    connection, so a peer that never speaks is a ``handshake-timeout`` as anywhere else."""

    #: the pipe's own ``data_received`` once the wire is known (its class's twin's)
    _read: Callable[[Any, bytes], None]

    def __init__(self, owner: PipeOwner, codec_for: Callable[[str], Any], endpoint: str,
                 options: Any) -> None:
        super().__init__(owner, Undecided(), ANY, endpoint, options)
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
        type(self)._read(self, data)


class SniffingPipe(SniffingBody, PipeState):
    """The reference one-port pipe."""

    __slots__ = ()
    _read = PipeBody.data_received  # type: ignore[assignment]


@functools.cache
def _compiled(state: type, sniffing: bool) -> type[PipeBody]:
    """A pipe class on the kernel's hot state, whose ``data_received``, ``get_buffer`` and
    ``buffer_updated`` are the kernel's."""
    body: type[PipeBody] = SniffingBody if sniffing else PipeBody
    received = state.data_received  # type: ignore[attr-defined]
    read = {"_read": received} if sniffing else {"data_received": received}
    read["get_buffer"] = state.get_buffer  # type: ignore[attr-defined]
    read["buffer_updated"] = state.buffer_updated  # type: ignore[attr-defined]
    return type("SniffingPipe" if sniffing else "Pipe", (body, state),
                {"__slots__": (), "__module__": __name__, "__doc__": body.__doc__, **read})


def pipe_class(sniffing: bool = False) -> type[Any]:
    """The class of a new pipe (``sniffing``: of an ``any+`` listener): the reference's
    (:class:`Pipe`, :class:`SniffingPipe`), or where the compiled kernel runs (read at each
    call), the same methods on the kernel's hot state (:func:`gateway.kernel.twin`)."""
    state = kernel.twin("PipeState")
    if state is PipeState:
        return SniffingPipe if sniffing else Pipe
    return _compiled(state, sniffing)


__all__ = ["Pipe", "PipeBody", "PipeOwner", "SniffingPipe", "pipe_class"]
