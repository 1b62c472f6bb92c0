"""The one receive buffer of the wire codecs (h11's ``ReceiveBuffer``, reduced to what they use).

A codec parses ``data`` from ``pos`` on and moves ``pos`` past what it consumed. A chunk that
arrives when everything before it was consumed (the usual case: whole messages per read) is
kept as it came, a ``bytes``, with no copy, and frames are slices of it. Only a tail left
unparsed (a message cut by the read) turns ``data`` into a ``bytearray`` the next chunks are
appended to; ``feed`` then drops the consumed prefix first, so the buffer holds at most one
unparsed tail plus the newest chunk. A ``bytearray`` the compiled kernel took large bodies of
as views (written later, without a copy) cannot be resized while they wait: ``feed`` then moves
the tail to a new buffer instead. Codecs read ``data``/``pos`` directly in their hot loops
(no call per frame) and only index, slice and ``unpack_from`` it, which both types allow.
"""

from __future__ import annotations

from typing import cast

from gateway import kernel  # (the wire layer's one look at it: which buffer a codec gets)

#: Frames at least this big are copied out through a memoryview (:meth:`ReceiveBuffer.copy`);
#: below it, ``bytes(data[start:stop])`` (two small copies) is faster.
COPY_VIA_VIEW = 4096


class ReceiveBuffer:
    """The reference twin of the compiled kernel's ``ReceiveBuffer`` (:func:`new_buffer`)."""

    __slots__ = ("data", "pos")

    def __init__(self) -> None:
        self.data: bytes | bytearray = b""
        self.pos = 0  # first byte not consumed yet

    def feed(self, chunk: bytes) -> None:
        """Append received bytes, first dropping what was consumed. Never raises."""
        data = self.data
        pos = self.pos
        if pos >= len(data):  # nothing left over: the chunk itself, no copy
            self.data = chunk if type(chunk) is bytes else bytes(chunk)
            self.pos = 0
            return
        if isinstance(data, bytearray):
            try:
                if pos:
                    del data[:pos]
                data += chunk
                self.pos = 0
                return
            except BufferError:  # a view of it is still to be written (the kernel's, of a body)
                pass  # (nothing changed): the tail to a new buffer, as below
        # a tail left over: from now on, a buffer to append to
        with memoryview(data) as view:
            data = bytearray(view[pos:])
        self.data = data
        self.pos = 0
        data += chunk

    def copy(self, start: int, stop: int) -> bytes:
        """``bytes(data[start:stop])`` through a memoryview (one copy: for big frames)."""
        with memoryview(self.data) as view:
            return bytes(view[start:stop])

    def __len__(self) -> int:
        """Bytes not consumed yet."""
        return len(self.data) - self.pos


def new_buffer() -> ReceiveBuffer:
    """A codec's receive buffer, of the twin that runs (:data:`gateway.kernel.TWINS`)."""
    return cast(ReceiveBuffer, kernel.twin("ReceiveBuffer")())


class Receiving:
    """What both wire codecs share on the receiving side: bytes go into their ``_rx``."""

    _rx: ReceiveBuffer

    def receive_data(self, data: bytes) -> None:
        """Append received bytes (any split). Never raises."""
        self._rx.feed(data)

    @property
    def rx(self) -> ReceiveBuffer:
        """The receive buffer (the kernel seam: see :attr:`streaming`)."""
        return self._rx
