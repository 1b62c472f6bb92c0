"""A pipe's reading side: its reads, flow control toward its owner and fairness among pipes.

A loop's transport (plain TCP and IPC) reads into the pipe's read buffer (its thread's
scratch while it holds nothing, else a buffer of its own): the pipe is an
``asyncio.BufferedProtocol`` (:meth:`Reading.get_buffer`, :meth:`Reading.buffer_updated`, on
its :class:`~gateway.engine.read_buffer.ReadBuffer`); a layer (TLS, WebSocket) or a transport
of its own (inproc) calls ``data_received``. Both end in the same steps.

Reading pauses when the owner's inbox holds ``hwm`` messages of the pipe (TCP back-pressure
reaches the peer) and resumes at half; a pipe that took its fair share of one read
(``gateway.engine.pipe.FAIR_SHARE``) pauses until the loop served the other pipes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.engine.read_buffer import ReadBuffer


class Reading:
    """The reading half of :class:`~gateway.engine.pipe.PipeBody` (a mixin, as
    :class:`~gateway.engine.writes.Writes` is the writing half). The pipe sets the attributes
    declared here."""

    transport: asyncio.Transport | None
    reading: bool
    queued: int  # messages of this pipe in the owner's inbox
    hwm: int
    pauses: int  # times reading was paused
    _turn: bool  # paused to let other pipes go first
    rbuf: ReadBuffer  # what a loop's transport reads into
    codec: Any

    def process(self, done: int = 0) -> Any:
        raise NotImplementedError

    def data_received(self, data: bytes) -> None:
        raise NotImplementedError

    # -- reads into the pipe's read buffer (asyncio.BufferedProtocol) -----------------------------
    def get_buffer(self, sizehint: int) -> bytearray | memoryview:
        """Room for the next read (``sizehint``: the loop's wish, unused: the buffer's own
        size rules, :mod:`gateway.engine.read_buffer`)."""
        return self.rbuf.room()

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were read into the room: on to ``data_received`` as one ``bytes`` (the
        compiled twin's kernel first takes whole messages where they landed); the thread's
        scratch is left to the next read (``ReadBuffer.settle``)."""
        rbuf = self.rbuf
        rbuf.filled(nbytes)
        data = rbuf.take()
        rbuf.settle()
        self.data_received(data)

    @property
    def partial(self) -> bool:
        """A message has begun and not ended (in the codec, or held in the read buffer)."""
        return bool(self.codec.partial) or len(self.rbuf) > 0

    # -- fairness: one pipe's burst waits for the others' turn ----------------------------------
    def yield_turn(self) -> None:
        """Pause reading until the loop served the other pipes (one FAIR_SHARE taken)."""
        if self.transport is None or self._turn:
            return
        self._turn = True
        self.pause()
        asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._turn = False
        if self.queued < self.hwm:  # not held back by the owner's inbox meanwhile
            self.resume()

    # -- flow control (called by the owner) --------------------------------------------
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


__all__ = ["Reading"]
