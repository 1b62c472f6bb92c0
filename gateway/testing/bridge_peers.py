"""What the kernel's differential tests (``tests/test_kernel.py``) and its fuzzing harnesses
(``fuzz/_bridge.py``, ``fuzz/_twins.py``) give a bridge's peers: a transport that records what
an engine pipe writes, the handshake of a peer's codec with that pipe, a request-reply
server's answer to a request, honest or mangled, and a read (given to ``data_received``, or
read into the pipe's read buffer as a loop's transport does).
"""

from __future__ import annotations

import asyncio
from typing import Any


class RecordingTransport:
    """A transport that records what the pipe writes (asyncio's, reduced), with asyncio's flow
    control: the peer's socket takes ``capacity`` bytes between two reads (None: as many as
    the pipe's mark, ``_high``); past it the transport holds every byte written since the
    peer's last read (:meth:`drain`), and pauses the protocol while it holds more than its
    ``high`` limit (the engine's pipes set 0: any byte), resumes it when it holds none. Closing
    only marks it closed (a subclass may tell the protocol, as asyncio does on the next turn).

    A ``memoryview`` written (the kernel's large bodies, views of the pipe's read buffer) is
    also held, as a loop's transport holds a write it has not sent yet, until :meth:`drain`;
    :meth:`overwritten` counts those whose bytes changed since (a read that landed on them)."""

    def __init__(self, peer: str = "") -> None:
        self.data = bytearray()
        self.peer = peer
        self.closed = False
        self.paused = False
        self.protocol: Any = None
        self.capacity: int | None = None
        self.high, self.low = 64 * 1024, 16 * 1024  # (asyncio's defaults)
        self.buffered = 0  # written since the peer's last read
        self.full = False  # past the capacity: everything since the last read is held
        self.writing_paused = False  # the protocol was told pause_writing
        self.held: list[tuple[memoryview, bytes]] = []  # views written, as written

    def write(self, data: bytes) -> None:
        if type(data) is memoryview:
            self.held.append((data, bytes(data)))
        self.data += data
        self.buffered += len(data)
        capacity = (self.capacity if self.capacity is not None
                    else getattr(self.protocol, "_high", 1 << 30))
        if self.buffered > capacity:
            self.full = True
        self._maybe_pause()

    def _maybe_pause(self) -> None:
        if not self.writing_paused and self.get_write_buffer_size() > self.high:
            self.writing_paused = True
            self.protocol.pause_writing()

    def hold(self, size: int) -> None:
        """The peer stopped reading with ``size`` bytes the transport holds (as after writes
        the OS did not take), until :meth:`drain`."""
        self.buffered += size
        self.full = True
        self._maybe_pause()

    def drain(self) -> None:
        """The peer read everything: the transport holds nothing, the protocol may write."""
        self.check_held()
        self.held.clear()
        self.buffered = 0
        self.full = False
        if self.writing_paused and not self.closed:
            self.writing_paused = False
            self.protocol.resume_writing()

    def overwritten(self) -> int:
        """Views written and held whose bytes are no longer those written."""
        return sum(view != written for view, written in self.held)

    def check_held(self) -> None:
        """Fail (``AssertionError``) when a held view was overwritten before it was sent."""
        assert not self.overwritten(), "a view written was overwritten before it was sent"

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.close()

    def get_write_buffer_size(self) -> int:
        """What the transport still holds: nothing until it is past its capacity (a loop's
        transport hands a write to the OS at once while the peer reads), all since then."""
        return self.buffered if self.full else 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        """asyncio's: ``low`` defaults to a quarter; the protocol pauses at once when the
        transport holds more than ``high``."""
        self.high = 64 * 1024 if high is None else high
        self.low = self.high // 4 if low is None else low
        self._maybe_pause()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5000) if name == "peername" else default

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


async def handshake(pipe: Any, codec: Any, wire: RecordingTransport, turns: int = 12) -> bool:
    """Connect ``pipe`` (an engine pipe) to ``wire`` and play the peer's side with ``codec``
    until both ends are done (CURVE takes four commands each way), at most ``turns`` turns of
    the loop; ``wire`` is left empty. True when both are done."""
    pipe.connection_made(wire)
    pipe.data_received(codec.initiate())
    for _ in range(turns):
        await asyncio.sleep(0)  # the pipe's writes go out at the end of the loop's turn
        codec.receive_data(bytes(wire.data))
        wire.data.clear()
        while codec.next_event() is not None:
            pass
        out = codec.data_to_send()
        if out:
            pipe.data_received(out)
        if pipe.ready and codec.handshake_done:
            break
    wire.data.clear()
    return bool(pipe.ready and codec.handshake_done)


def server_answer(family: str, request: tuple[bytes, ...],
                  roll: float = 0.0) -> tuple[bool, tuple[bytes, ...]]:
    """A request-reply server's answer to ``request`` (as its codec read it): whether a PING
    goes first (ZeroMQ), and the reply's frames (SP: one payload). ``roll`` (0 to 1) below 0.8:
    the envelope echoed with ``re:`` and the body; above, now and then a mangled one: two body
    frames, another client's envelope, a late reply behind a PING, no envelope (ZeroMQ); a
    token nobody minted, a word before the request id, a long body (SP)."""
    if family == "zmtp":
        frames = list(request)
        i = frames.index(b"") + 1 if b"" in frames else 0
        env, body = frames[:i], frames[i:]
        if roll < 0.8:
            return False, (*env, b"re:" + b"".join(body))
        if roll < 0.85:
            return False, (*env, b"a", b"b")  # two body frames
        if roll < 0.9:
            return False, (b"\x00\x00\x00\x05", *env[1:], b"x")  # another client
        if roll < 0.95:
            return True, (*env, b"late")
        return False, (b"no-envelope",)
    payload = request[0]
    words = 0
    while words + 4 <= len(payload) and not payload[words] & 0x80:
        words += 4
    head, rest = payload[: words + 4], payload[words + 4:]
    if roll < 0.8:
        return False, (head + b"re:" + rest,)
    if roll < 0.85:
        return False, (b"\x80\x00\x00\x01" + rest,)  # a token nobody minted
    if roll < 0.9:
        return False, (b"\x00\x00\x00\x03" + head + rest,)  # a word before the request id
    return False, (head + bytes(300),)  # a long one


def deliver(pipe: Any, data: bytes, buffered: bool) -> None:
    """One read of ``data`` by ``pipe``: given to its ``data_received`` (as a layer does), or
    (``buffered``) read into its read buffer as a loop's transport does, in as many reads as
    its room takes: ``get_buffer``, the bytes copied in, ``buffer_updated`` (the room kept
    until then, as uvloop keeps it), while the pipe is not closing."""
    if not buffered:
        pipe.data_received(data)
        return
    pos = 0
    while pos < len(data) and not pipe.close_reason:  # (each read takes at least one byte)
        room = pipe.get_buffer(-1)
        with memoryview(room) as view:
            n = min(len(view), len(data) - pos)
            view[:n] = data[pos:pos + n]
        pipe.buffer_updated(n)
        del room
        pos += n


__all__ = ["RecordingTransport", "deliver", "handshake", "server_answer"]
