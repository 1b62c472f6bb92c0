"""A pipe's writing side: encoded messages, coalesced per loop iteration, and counted drops.

While received messages are dispatched (a :class:`Batch` is open), writes are buffered per
pipe; the buffers are flushed with one ``transport.write`` each once the loop has run every
read of this iteration (``call_soon``), so requests of many clients that go to one back-end
pipe share a write. One message in flight still costs one write; a burst of N costs one per
pipe, not N. The pipe's mark is ``hwm * 1 KiB``, or ``hwm`` times the largest message written
to the pipe once one is larger than 1 KiB (libzmq's hwm counts messages, so a message larger
than the byte mark is no reason to drop the next one, :meth:`Writes.fit_mark`); it bounds the
batch (past it, the pipe flushes) and the queue. A batch of several chunks goes out in one
``writelines`` (uvloop: one ``writev``), not a join (the kernel hands large bodies over as
views of the read, :mod:`gateway._kernel`).

The transport holds nothing of ours for long: its limits are 0/0 (:func:`set_transport_limits`),
so it calls ``pause_writing`` as soon as a write leaves it bytes the OS did not take and
``resume_writing`` exactly when it has handed the last one over. In between, whole messages wait
in the pipe's own queue (``wbuf``, counted in ``queued_msgs``: a connection lost then loses
those, counted ``peer-gone``); ``resume_writing`` writes the whole queue at once, in the loop
callback that emptied the transport. The queue and what the transport held at the pause are
bounded by the mark: past it the pipe is not writable. No timer: nothing waits for one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, cast

from gateway import kernel
from gateway.logging import get_logger
from gateway.message import Message, one_body
from gateway.metrics import METRICS
from gateway.wire.events import Subscription

log = get_logger("gateway.engine")

#: bytes of write buffer per message of high-water mark (libzmq counts messages, asyncio bytes)
BYTES_PER_HWM = 1024
_DROP_LOG_INTERVAL = 1.0  # seconds: at most one drop line per pipe per interval


def set_transport_limits(transport: Any) -> None:
    """A pipe's transport pauses the pipe as soon as it holds a byte and resumes it when it
    holds none (limits 0/0: asyncio's ``FlowControlMixin`` and uvloop's ``UVBaseTransport``
    pause above ``high`` and resume at or below ``low``, also at once when the limits are set
    while they hold bytes). The pipe's own mark bounds its queue (:class:`Writes`); a mark of
    ``hwm`` times a message of a few MiB, past uvloop's C int, never reaches the transport."""
    transport.set_write_buffer_limits(high=0, low=0)


class Batch:
    """Write coalescing, per thread (each thread runs its own loop). A pipe keeps its thread's
    batch (:func:`thread_batch`): a ``threading.local`` attribute costs a dict lookup on every
    access, and the hot path touches the batch a few times a message. The reference twin of
    the compiled kernel's ``Batch`` (:data:`gateway.kernel.TWINS`)."""

    __slots__ = ("depth", "dirty", "scheduled")

    def __init__(self) -> None:
        self.depth = 0
        self.dirty: list[Writes] = []
        #: the loop a flush is scheduled on (None: none): a loop closed before its flush ran
        #: does not stop the next loop's
        self.scheduled: asyncio.AbstractEventLoop | None = None

    def close(self, loop: asyncio.AbstractEventLoop) -> None:
        """Leave one dispatch level; the outermost schedules the flush of what it buffered."""
        self.depth -= 1
        self.schedule(loop)

    def schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        """The flush, once this iteration's reads ran: the batch holds writes, no dispatch is
        open and none is scheduled on ``loop`` yet."""
        if not self.depth and self.dirty and self.scheduled is not loop:
            self.scheduled = loop  # after the other reads of this iteration
            loop.call_soon(flush, self)


_local = threading.local()


def thread_batch() -> Batch:
    """The calling thread's batch, of the twin that runs (one of each per thread: a pipe made
    while the kernel ran and one made without it never share one)."""
    cls = kernel.twin("Batch")
    batches = _local.__dict__
    batch = batches.get(cls)
    if batch is None:
        batch = batches[cls] = cls()
    return cast(Batch, batch)


def flush(batch: Batch) -> None:
    """Write what every pipe of ``batch`` buffered, one write each (the compiled kernel's
    twin, for its whole reads: ``gateway._kernel.flush_batch``)."""
    batch.scheduled = None
    dirty, batch.dirty = batch.dirty, []
    for pipe in dirty:
        pipe.flush()


#: a batch of chunks at least this big in all goes out as they are (``writelines``: one
#: ``writev``); below it, one join (a copy of a few KiB costs less than a view per chunk)
JOIN_BELOW = 16384


def write_chunks(transport: asyncio.Transport, chunks: list[bytes], size: int) -> None:
    """One pipe's batch (``size`` bytes in all) to its transport: one chunk as it is; several
    joined when small, else handed over whole (a large body: a view of the read it came in,
    never copied here). The compiled twin is inline in ``gateway._kernel.flush_batch``."""
    if len(chunks) == 1:
        transport.write(chunks[0])
    elif size < JOIN_BELOW:
        transport.write(b"".join(chunks))
    else:
        transport.writelines(chunks)


def check_body(pipe: Any, msg: Message) -> None:
    """Refuse a message the pipe's wire cannot carry (:func:`gateway.message.one_body`)."""
    one_body(pipe.family, msg.body)


class Writes:
    """The writing half of :class:`~gateway.engine.pipe.Pipe` (a mixin: the hot path pays no
    extra attribute lookup). The pipe sets the attributes declared here."""

    codec: Any
    owner: Any  # the pipe's PipeOwner (its socket)
    family: str
    endpoint: str
    name: str
    transport: asyncio.Transport | None
    _batch: Batch
    _high: int
    hwm: int
    _closed: bool  # the owner closed the pipe
    writable: bool

    def _init_writes(self) -> None:
        #: coalesced writes while a batch is open, and the queue of whole messages while the
        #: transport holds bytes the OS did not take (see :meth:`flush`)
        self.wbuf: list[bytes] = []
        self._wbuf_size = 0
        #: messages in ``wbuf`` (what a lost connection loses of ours: ``peer-gone``)
        self.queued_msgs = 0
        #: the transport holds bytes (from its ``pause_writing`` to its ``resume_writing``)
        self._t_held = False
        self._held = 0  # bytes it held at the pause (with the queue: the mark's share)
        self._unit = BYTES_PER_HWM  # bytes per message of the mark (fit_mark)
        self._drop_logged = -_DROP_LOG_INTERVAL
        self._drops_suppressed = 0

    def fit_mark(self, size: int) -> None:
        """A message of ``size`` bytes (on the wire) is written: the mark holds ``hwm`` of them
        (libzmq's hwm counts messages; ``hwm * 1 KiB`` alone would make one message larger than
        it fill the buffer, and the next be dropped at the mark). Bounded: ``hwm`` times the
        largest message the other side accepts (its ``max_message_size``)."""
        if size <= self._unit:
            return
        self._unit = size
        self._high = self.hwm * size

    def write(self, msg: Message) -> None:
        hops, body = msg
        one_body(self.family, body)
        self.write_bytes(self.codec.send_message(hops + body if hops else body), 1)

    def write_frames(self, frames: tuple[bytes, ...]) -> None:
        """Write one message given as its wire frames (hops + body; the caller checked that
        an SP pipe gets one body frame)."""
        data = self.codec.send_message(frames)
        if len(data) > self._unit:
            self.fit_mark(len(data))
        batch = self._batch
        if batch.depth and self._wbuf_size + len(data) < self._high:  # write_bytes, inline
            if not self.wbuf:
                batch.dirty.append(self)
            self.wbuf.append(data)
            self._wbuf_size += len(data)
            self.queued_msgs += 1
        else:
            self.write_bytes(data, 1)

    def write_subscription(self, sub: Subscription) -> None:
        """Send a subscription or cancel to a ZMTP publisher, in the form its version takes."""
        self.write_bytes(self.codec.subscription_frame(sub.subscribe, sub.topic))

    def write_bytes(self, data: bytes, msgs: int = 0) -> None:
        """Write encoded bytes (``msgs``: the whole messages they are, 0 for a command):
        coalesced while a batch is open, queued while the transport holds bytes, else at once
        (after what this pipe still holds: the order on the wire is the order of the writes)."""
        if len(data) > self._unit:
            self.fit_mark(len(data))
        batch = self._batch
        if not batch.depth and self.wbuf and not self._t_held:
            self.flush()  # a batch's, before its flush ran (it may leave the transport held)
        if batch.depth or self._t_held:
            if not self.wbuf and batch.depth:
                batch.dirty.append(self)
            self.wbuf.append(data)
            self._wbuf_size += len(data)
            self.queued_msgs += msgs
            if self._wbuf_size >= self._high:
                self.flush()  # the batch is bounded too: past the mark the queue is full
            elif self._t_held and not batch.depth:
                self._check_full()
            return
        transport = self.transport
        if transport is not None:
            transport.write(data)

    def flush(self) -> None:
        """Write what this pipe buffered, in one write (several chunks: one ``writelines``,
        no join: :func:`write_chunks`) -- unless the transport holds bytes the OS did not take
        (``pause_writing``): then it waits here, whole messages counted (``queued_msgs``),
        until ``resume_writing`` writes it. Past the mark (with what the transport held at
        the pause) the pipe is not writable. The owner closed the pipe: all of it goes."""
        transport = self.transport
        if not self.wbuf or transport is None or transport.is_closing():
            return  # (a lost connection counts what is left: connection_lost)
        if self._t_held and not self._closed:
            self._check_full()
            return
        chunks, self.wbuf = self.wbuf, []
        size, self._wbuf_size = self._wbuf_size, 0
        self.queued_msgs = 0
        write_chunks(transport, chunks, size)

    def _check_full(self) -> None:
        """Writable unless the queue and what the transport held at the pause pass the mark
        (as a transport's own high mark: above it; the owner is told when that changes)."""
        writable = not (self._t_held and self._wbuf_size + self._held > self._high)
        if writable != self.writable:
            self.writable = writable
            self.owner.pipe_writable(self)

    def pause_writing(self) -> None:
        """The transport holds bytes (its limits are 0/0): what comes next waits in ``wbuf``."""
        self._t_held = True
        transport = self.transport
        self._held = transport.get_write_buffer_size() if transport is not None else 0
        self._check_full()

    def resume_writing(self) -> None:
        """The transport handed its last byte over: the whole queue goes now, in this loop
        callback (the socket does not idle)."""
        self._t_held = False
        self._held = 0
        if self.wbuf:
            self.flush()  # (may pause again: the queue's own bytes are held now)
        self._check_full()

    def lose_queue(self) -> None:
        """The connection is gone: what waited for it in the queue is counted (``peer-gone``;
        not when the owner closed the pipe: its linger)."""
        lost, self.queued_msgs = self.queued_msgs, 0
        self.wbuf, self._wbuf_size = [], 0
        if lost and not self._closed:
            self.dropped("peer-gone", lost)

    def hang_up(self, farewell: bytes, grace: float) -> None:
        """Close the connection now; ``farewell`` (an ERROR command) goes first, with
        ``grace`` seconds to leave before the connection is aborted anyway."""
        transport = self.transport
        if transport is None:
            return
        if farewell and not transport.is_closing():
            transport.write(farewell)
            transport.close()  # flushes the farewell, then closes
            asyncio.get_running_loop().call_later(grace, transport.abort)
        else:
            transport.abort()

    @property
    def closing(self) -> bool:
        """True once the owner closed this pipe (its end is no failure of the peer's)."""
        return self._closed

    def close(self, linger: float) -> None:
        """The owner is closing: pending writes get ``linger`` seconds (0: drop them)."""
        self._closed = True
        self.flush()  # (all of it: the owner closed, the linger says how long it may take)
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

    @property
    def buffered(self) -> int:
        """Bytes written to this pipe and not yet sent (transport buffer + open batch)."""
        transport = self.transport
        return self._wbuf_size + (transport.get_write_buffer_size() if transport is not None else 0)

    def dropped(self, reason: str, count: int = 1) -> None:
        """``count`` messages for this pipe were dropped: the owner's observer counts them (a
        bridge's ledger), else the socket's counter; log at most one line a second."""
        unsent = getattr(self.owner, "pipe_unsent", None)  # (an owner of a test may have none)
        if unsent is not None and unsent(self, reason, count):
            return
        METRICS.inc("gateway_socket_dropped_messages_total", count, reason=reason)
        now = time.monotonic()
        if now - self._drop_logged < _DROP_LOG_INTERVAL:
            self._drops_suppressed += count
            return
        log.warning("drop", reason=reason, endpoint=self.endpoint, socket=self.name,
                    suppressed=self._drops_suppressed, **({"count": count} if count > 1 else {}))
        self._drop_logged = now
        self._drops_suppressed = 0


__all__ = ["BYTES_PER_HWM", "JOIN_BELOW", "Batch", "Writes", "check_body", "flush",
           "set_transport_limits", "thread_batch", "write_chunks"]
