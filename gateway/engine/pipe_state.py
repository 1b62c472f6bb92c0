"""A pipe's hot state: the reference twin of the compiled kernel's ``PipeState``.

What the kernel reads or writes of a pipe on every read lives in a state class that is the
pipe's base: this slotted class for the reference pipe, the kernel's typed one
(``gateway._kernel.PipeState``, C struct members) for the compiled pipe;
:func:`gateway.engine.pipe.pipe_class` puts the pipe's methods on top of either, and
:mod:`gateway.kernel` says which runs. Adding a field: here, in the kernel's twin (typed), and
in :meth:`gateway.engine.pipe.PipeBody.__init__`; ``tests/test_kernel_seam.py`` fails until the
two twins agree. The compiled twin also carries ``data_received``, ``get_buffer`` and
``buffer_updated`` (the reference's are :class:`gateway.engine.pipe.PipeBody`'s).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gateway.engine.read_buffer import ReadBuffer
from gateway.engine.writes import Batch

#: the fields, in the kernel twin's words (gateway/_kernel_state.pxi)
FIELDS = ("_batch", "_high", "_loop", "_t_held", "_watch", "_wbuf_size", "close_reason",
          "codec", "fast_read", "kernel_state", "queued_msgs", "rbuf", "reading", "routing_id",
          "rx_chunks", "transport", "wbuf", "writable")


class PipeState:
    """The reference pipe's hot fields (set by the pipe's ``__init__``)."""

    __slots__ = FIELDS

    _batch: Batch  # the thread's write batch
    _high: int  # the write buffer's mark, bytes
    _loop: asyncio.AbstractEventLoop | None
    _t_held: bool  # the transport holds bytes (pause_writing): writes wait in wbuf
    _watch: bool  # the message deadline is watched (ready, a deadline, a partial codec)
    _wbuf_size: int  # bytes in wbuf
    close_reason: str
    codec: Any
    fast_read: Callable[[Any, bytes], bool] | None  # the kernel's whole-read entry
    kernel_state: Any  # the kernel's own record of this pipe
    queued_msgs: int  # whole messages in wbuf (a lost connection's peer-gone)
    rbuf: ReadBuffer  # what a loop's transport reads into (get_buffer)
    reading: bool
    routing_id: bytes
    rx_chunks: int  # reads (any traffic is proof of life)
    transport: asyncio.Transport | None
    wbuf: list[bytes]  # coalesced writes (a batch), the queue while the transport holds bytes
    writable: bool


__all__ = ["FIELDS", "PipeState"]
