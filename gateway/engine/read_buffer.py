"""A pipe's read buffer: what a plain TCP/IPC connection reads into (``BufferedProtocol``).

The loop asks the pipe for room (``get_buffer``), reads the socket into it and says how many
bytes came (``buffer_updated``): no new object per read, where a ``data_received`` loop makes a
``bytes`` of each read (uvloop: a copy out of its 256 KiB loop buffer). The reference twin of
the compiled kernel's ``ReadBuffer`` (:data:`gateway.kernel.TWINS`).

``data`` is a ``bytearray`` whose whole length is capacity; ``start`` to ``end`` are the bytes
read and not taken yet. Between reads it holds nothing, or the beginning of one message the
compiled kernel waits for (its whole length, as far as its headers say so far, is ``wanted``):
that message's later reads land behind it, in place, and the kernel takes it whole from there
(:meth:`gateway._kernel._Reader`); everything else goes to the codec as it did from
``data_received`` (:meth:`take`).

**Scratch.** A pipe that holds nothing (no part of a message) has no buffer of its own: its
reads land in its thread's scratch (``shared[0]``: one :data:`CHUNK` buffer for all the pipes
of a thread, its loop's, as uvloop's loop buffer was; the two twins have a slot each), and
once the read was processed (:meth:`settle`, at the end of ``buffer_updated``) nothing of it
is kept there: a message still arriving moves to a buffer of the pipe's own (one copy of what
arrived so far, sized as the room below); a read the kernel lent views of leaves the slot
(the views keep it until the writes took them; the thread's next read gets a new scratch), and
is the pipe's only while it holds a message in it. Idle, a pipe keeps no buffer, whatever it
read last (a buffer of its own that it is done with and that no view shows goes back to an
empty slot when it is a scratch's size, else is let go). Reads are ``get_buffer`` then
``buffer_updated``, back to back, by the thread's loop (uvloop's stream, asyncio's selector
transport), so no other read lands in the scratch between the two; ``data`` is the scratch
only from ``filled`` (``buffer_updated``) on, so a read that did not come (``get_buffer`` then
EAGAIN, no ``buffer_updated``) leaves no reference to a scratch that may leave the slot.

**Room.** With nothing held, the scratch. A read that fills all of it doubles the size of the
pipe's own buffers made next (from :data:`MIN_SIZE` to :data:`CHUNK`). With a message held,
room for its rest as declared, but never more than
:data:`AHEAD` bytes ahead of what arrived, or than what arrived, whichever is larger: a peer's
frame header alone makes the pipe hold at most 2 MiB plus a :data:`MIN_SIZE` read, and only
within the size limit the kernel checked. When the room does not fit behind the held bytes, they
move to a new buffer (one copy of what arrived so far: a message's first read, usually). A
message larger than that room fills each buffer (down to the last :data:`MIN_SIZE`) before it
moves to one about twice as large: its bytes are copied about once in all, not at every read.

**Views.** The kernel writes bodies of 8 KiB or more as views of the read (no copy): those views
keep the bytes they show until the write took them, so no later read may land on them. They
are always of messages taken, before ``start``: the buffer they show is never the thread's
scratch again (the kernel empties the slot when it lends, :meth:`settle` otherwise), and the
pipe keeps it only while a message it holds is in it (its later reads land behind, or the
held bytes move to a new buffer); ``lent`` says so (set when the kernel took a view), and such
a buffer is never given to the slot: once the pipe holds nothing it is let go, the views'
alone until they are written.

Bounded: a pipe's buffer is at most the largest of :data:`CHUNK`, ``AHEAD`` plus a read and
one message within the size limit plus a read, as the codec's receive buffer (an unparsed tail
and the newest read) was before, and only while it holds a message; a thread's scratch is at
most ``AHEAD`` (a pipe's buffer taken back only up to that size).
"""

from __future__ import annotations

import threading
from typing import Any, cast

from gateway import kernel

#: the least room a held message is given (and the first size of a pipe's own buffer)
MIN_SIZE = 16 * 1024
#: a thread's scratch, and the largest a pipe's own buffer grows to by reads alone (uvloop's
#: own read buffer is 256 KiB)
CHUNK = 256 * 1024
#: the most a declared message makes a buffer hold ahead of the bytes that arrived
AHEAD = 2 * 1024 * 1024

#: what an idle pipe's ``data`` is (no buffer of its own)
EMPTY = bytearray()

#: a thread's scratch slot: a one-item list, its scratch buffer (None: a new one made when
#: needed, after a read that the kernel lent views of took the last one)
Slot = list[Any]

_local = threading.local()


def new_slot() -> Slot:
    """An empty scratch slot (a thread's: :func:`thread_scratch`)."""
    return [None]


def thread_scratch(cls: type | None = None) -> Slot:
    """The calling thread's scratch slot for read buffers of class ``cls`` (None: the twin
    that runs): its loop's; threads never share one, nor do the two twins."""
    if cls is None:
        cls = kernel.twin("ReadBuffer")
    slots: dict[Any, Slot] = _local.__dict__
    slot = slots.get(cls)
    if slot is None:
        slot = slots[cls] = new_slot()
    return slot


class ReadBuffer:
    """The reference twin of the compiled kernel's ``ReadBuffer`` (:func:`new_read_buffer`);
    ``shared``: the scratch slot it reads into while it holds nothing (None: one of its own)."""

    __slots__ = ("data", "end", "lent", "shared", "size", "start", "wanted")

    def __init__(self, shared: Slot | None = None) -> None:
        self.data = EMPTY  # the pipe's own buffer, or the scratch during a read
        self.start = 0  # first byte not taken
        self.end = 0  # end of the bytes read
        self.wanted = 0  # the held message's length as its headers say (0: none held)
        self.lent = False  # the kernel took views of ``data`` (written later, without a copy)
        self.size = MIN_SIZE  # the size of the next buffer of the pipe's own
        self.shared: Slot = new_slot() if shared is None else shared

    def room(self) -> bytearray | memoryview:
        """Where the next read goes (``get_buffer``): writable, never empty."""
        data = self.data
        end = self.end
        if self.start == end:  # nothing held: the thread's scratch (a buffer kept is let go)
            shared = self.shared
            scratch = shared[0]
            if scratch is None:  # (the last one was lent to writes)
                scratch = shared[0] = bytearray(CHUNK)
            # (``data`` is the scratch only once the read came, ``filled``: a read that did
            # not come, EAGAIN, leaves no reference to a scratch that may leave the slot)
            self.data, self.lent = EMPTY, False
            return scratch
        held = end - self.start
        ahead = self._ahead(held)
        rest = self.wanted - held
        # the whole rest behind it, else (larger than that bound) at least MIN_SIZE: a large
        # message fills each buffer before it moves to one twice as large (copied ~once)
        need = ahead if ahead >= rest else min(ahead, MIN_SIZE)
        if end + need > len(data):  # it does not fit behind: a new buffer
            return self._move(held, ahead)
        return memoryview(data)[end:]

    def _ahead(self, held: int) -> int:
        """The room a held message's rest is given (bounded by AHEAD or what arrived)."""
        return max(1, min(self.wanted - held, max(AHEAD, held)))

    def _move(self, held: int, ahead: int) -> memoryview:
        """The held bytes to a new buffer of the pipe's, with ``ahead`` room behind them (at
        least MIN_SIZE); its room."""
        new = bytearray(max(held + max(ahead, MIN_SIZE), self.size))
        new[:held] = memoryview(self.data)[self.start:self.end]
        self.data, self.start, self.end, self.lent = new, 0, held, False
        return memoryview(new)[held:]

    def filled(self, nbytes: int) -> None:
        """``nbytes`` were read into the room (``buffer_updated``)."""
        if self.data is EMPTY:  # into the scratch (``room``: get_buffer, just before)
            if self.shared[0] is None:
                raise ValueError("filled without a room given")
            self.data, self.start, self.end = self.shared[0], 0, 0
        self.end = end = self.end + nbytes
        if end == len(self.data) and self.size < CHUNK:  # it filled all: the next one bigger
            self.size *= 2

    def take(self) -> bytes:
        """The bytes read and not taken, as one ``bytes`` (for the codec); none held after."""
        with memoryview(self.data) as view:
            out = bytes(view[self.start:self.end])
        self.start = self.end
        self.wanted = 0
        return out

    def settle(self) -> None:
        """The read was processed (the end of ``buffer_updated``): nothing it left stays in
        the scratch, and nothing is kept but a message still arriving. Views lent of the
        scratch: it leaves the slot (the pipe's while it holds a message there); a message
        still arriving in the scratch otherwise: its bytes to a buffer of the pipe's. Nothing
        held: no buffer kept (one of the pipe's that no view shows goes back to an empty slot,
        when it is a scratch's size)."""
        data = self.data
        shared = self.shared
        if data is shared[0]:
            if self.lent:  # the views' now (the kernel's ReadBuffer.lend does it at once)
                shared[0] = None
            elif self.start < self.end:
                self._move(self.end - self.start, self._ahead(self.end - self.start))
                return
        if self.start < self.end:  # a message held in a buffer of the pipe's: kept
            return
        if not self.lent and shared[0] is None and CHUNK <= len(data) <= AHEAD:
            shared[0] = data
        self.data, self.lent = EMPTY, False

    def __len__(self) -> int:
        """Bytes held (read and not taken)."""
        return self.end - self.start


def new_read_buffer() -> ReadBuffer:
    """A pipe's read buffer, of the twin that runs (:data:`gateway.kernel.TWINS`), reading
    into the calling thread's scratch (the pipe sets its loop's again when connected)."""
    cls = kernel.twin("ReadBuffer")
    return cast(ReadBuffer, cls(thread_scratch(cls)))


__all__ = ["AHEAD", "CHUNK", "EMPTY", "MIN_SIZE", "ReadBuffer", "Slot", "new_read_buffer",
           "new_slot", "thread_scratch"]
