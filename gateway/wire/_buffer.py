"""The one receive buffer of the wire codecs (h11's ``ReceiveBuffer``, reduced to what they use).

A codec parses ``data`` from ``pos`` on and moves ``pos`` past what it consumed; ``feed`` drops
the consumed prefix before appending, so the buffer holds at most one unparsed tail plus the
newest chunk. Codecs read ``data``/``pos`` directly in their hot loops (no call per frame).
"""

from __future__ import annotations

#: Frames at least this big are copied out through a memoryview (:meth:`ReceiveBuffer.copy`);
#: below it, ``bytes(data[start:stop])`` (two small copies) is faster.
COPY_VIA_VIEW = 4096
#: A codec's ``next_messages`` copies what is unread once and slices its frames out of the copy,
#: up to this many bytes (uvloop reads at most 256 KiB at a time); beyond it, a big message is
#: on its way and frames are copied one by one (``next_event``).
BATCH_BYTES = 1 << 18


class ReceiveBuffer:
    __slots__ = ("data", "pos")

    def __init__(self) -> None:
        self.data = bytearray()
        self.pos = 0  # first byte not consumed yet

    def feed(self, chunk: bytes) -> None:
        """Append received bytes, first dropping what was consumed. Never raises."""
        if self.pos:
            del self.data[: self.pos]
            self.pos = 0
        self.data += chunk

    def copy(self, start: int, stop: int) -> bytes:
        """``bytes(data[start:stop])`` through a memoryview (one copy: for big frames)."""
        with memoryview(self.data) as view:
            return bytes(view[start:stop])

    def __len__(self) -> int:
        """Bytes not consumed yet."""
        return len(self.data) - self.pos
