"""A pipe's own read buffer: what a plain TCP/IPC connection reads into (``BufferedProtocol``).

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

**Room.** With nothing held, the whole buffer (the same object, read after read; one made
for a message past :data:`AHEAD` is let go once it was taken: an idle pipe keeps 2 MiB at most,
and a pipe of messages up to 1 MiB, the default limit, reads the next one in place). A read that fills all of
it doubles the size of the buffers made next (from :data:`MIN_SIZE` to :data:`CHUNK`). With a message held, room for its rest as declared, but never more than
:data:`AHEAD` bytes ahead of what arrived, or than what arrived, whichever is larger: a peer's
frame header alone makes the pipe hold at most 2 MiB plus a :data:`MIN_SIZE` read, and only
within the size limit the kernel checked. When the room does not fit behind the held bytes, they
move to a new buffer (one copy of what arrived so far: a message's first read, usually). A
message larger than that room fills each buffer (down to the last :data:`MIN_SIZE`) before it
moves to one about twice as large: its bytes are copied about once in all, not at every read.

**Views.** The kernel writes bodies of 8 KiB or more as views of the read (no copy): those views
keep the bytes they show until the write took them, so the next read must not land on them. They
are always of messages taken, before ``start``; once everything was taken the buffer is used
again from its start only when no view of it is left (``lent`` is set when the kernel took a
view; a ``bytearray`` with a view cannot be resized, which is the check), else the reads go on
behind the last message, or to a new buffer when too little is left there.

Bounded: the buffer is at most the largest of :data:`CHUNK`, ``AHEAD`` plus a read and one
message within the size limit plus a read, as the codec's receive buffer (an unparsed tail and
the newest read) was before.
"""

from __future__ import annotations

from typing import cast

from gateway import kernel

#: a new pipe's buffer (and the least room a held message is given)
MIN_SIZE = 16 * 1024
#: the largest buffer reads alone grow to (uvloop's own read buffer is 256 KiB)
CHUNK = 256 * 1024
#: the most a declared message makes a buffer hold ahead of the bytes that arrived
AHEAD = 2 * 1024 * 1024


class ReadBuffer:
    """The reference twin of the compiled kernel's ``ReadBuffer`` (:func:`new_read_buffer`)."""

    __slots__ = ("data", "end", "lent", "size", "start", "wanted")

    def __init__(self) -> None:
        self.data = bytearray()  # made at the first read (a connection that never sends: none)
        self.start = 0  # first byte not taken
        self.end = 0  # end of the bytes read
        self.wanted = 0  # the held message's length as its headers say (0: none held)
        self.lent = False  # the kernel took views of ``data`` (written later, without a copy)
        self.size = MIN_SIZE  # the size of the next buffer made

    def room(self) -> bytearray | memoryview:
        """Where the next read goes (``get_buffer``): writable, never empty."""
        data = self.data
        end = self.end
        if self.start == end:  # nothing held
            if self.lent and self._viewed():
                if len(data) - end >= MIN_SIZE:  # behind the last message the views show
                    self.start = end
                    return memoryview(data)[end:]
                self.lent = False
                data = self.data = bytearray(self.size)
            else:
                self.lent = False
                if len(data) < self.size or len(data) > AHEAD:  # (a large message's: let go)
                    data = self.data = bytearray(self.size)
            self.start = self.end = 0
            return data
        held = end - self.start
        rest = self.wanted - held
        ahead = max(1, min(rest, max(AHEAD, held)))  # what the rest needs (bounded)
        # the whole rest behind it, else (larger than that bound) at least MIN_SIZE: a large
        # message fills each buffer before it moves to one twice as large (copied ~once)
        need = ahead if ahead >= rest else min(ahead, MIN_SIZE)
        if end + need > len(data):  # it does not fit behind: a new buffer
            new = bytearray(max(held + max(ahead, MIN_SIZE), self.size))
            new[:held] = memoryview(data)[self.start:end]
            self.data, self.start, self.end, self.lent = new, 0, held, False
            return memoryview(new)[held:]
        return memoryview(data)[end:]

    def _viewed(self) -> bool:
        """True while a view of ``data`` is alive (a bytearray with one cannot change size)."""
        data = self.data
        try:
            data.pop()  # (the bytes are all taken: the last one's value is free)
        except BufferError:
            return True
        data.append(0)
        return False

    def filled(self, nbytes: int) -> None:
        """``nbytes`` were read into the room (``buffer_updated``)."""
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

    def __len__(self) -> int:
        """Bytes held (read and not taken)."""
        return self.end - self.start


def new_read_buffer() -> ReadBuffer:
    """A pipe's read buffer, of the twin that runs (:data:`gateway.kernel.TWINS`)."""
    return cast(ReadBuffer, kernel.twin("ReadBuffer")())


__all__ = ["AHEAD", "CHUNK", "MIN_SIZE", "ReadBuffer", "new_read_buffer"]
