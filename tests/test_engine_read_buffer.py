"""A pipe's read buffer (``get_buffer`` room, ``buffer_updated``), exact bytes, on each twin
(the engine-path fixture runs every test on the compiled kernel's and on the reference)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from gateway import kernel
from gateway.engine.read_buffer import (
    AHEAD,
    CHUNK,
    MIN_SIZE,
    new_read_buffer,
    new_slot,
    thread_scratch,
)


def _read(rb: object, data: bytes) -> None:
    """One read of ``data`` into the room (it fits), as a loop's transport does."""
    room = rb.room()  # type: ignore[attr-defined]
    assert len(room) >= len(data)
    room[:len(data)] = data
    del room
    rb.filled(len(data))  # type: ignore[attr-defined]


def _new(slot: list[Any]) -> Any:
    """A read buffer of the twin this test runs on, reading into the scratch slot ``slot``."""
    return kernel.twin("ReadBuffer")(slot)


def test_an_idle_pipe_reads_into_the_scratch_and_keeps_no_buffer() -> None:
    slot = new_slot()
    rb = _new(slot)
    assert len(rb.data) == 0 and len(rb) == 0  # made: no buffer
    room = rb.room()
    assert type(room) is bytearray and len(room) == CHUNK and room is slot[0]
    assert len(rb.data) == 0  # (the scratch is the read's once it came: filled)
    scratch = room
    del room
    for data in (b"\x00\x05hello", b"\x01\x01a\x00\x01b"):
        _read(rb, data)
        assert (rb.start, rb.end, len(rb)) == (0, len(data), len(data))
        assert rb.take() == data and len(rb) == 0
        rb.settle()
        assert len(rb.data) == 0 and slot[0] is scratch  # nothing kept: the scratch stays
        assert rb.room() is scratch  # the same scratch again, no new object
    assert rb.size == MIN_SIZE


def test_new_read_buffers_of_a_thread_share_its_scratch_slot() -> None:
    """new_read_buffer reads into the calling thread's slot; another thread has its own."""
    a, b = new_read_buffer(), new_read_buffer()
    assert a.shared is b.shared is thread_scratch(type(a)) is thread_scratch()
    other: list[Any] = []
    t = threading.Thread(target=lambda: other.append(new_read_buffer().shared))
    t.start()
    t.join(10)
    assert other and other[0] is not a.shared and other[0][0] is None


def test_a_read_that_fills_the_scratch_makes_the_pipe_s_buffers_bigger() -> None:
    rb = _new(new_slot())
    for n in range(6):  # (MIN_SIZE doubled up to CHUNK: four times, then no further)
        _read(rb, bytes(CHUNK))
        rb.take()
        rb.settle()
        assert rb.size == min(CHUNK, MIN_SIZE << (n + 1))
    _read(rb, b"\x01\x05hel")
    rb.wanted = 7
    rb.settle()  # a small message held: its buffer is the pipe's size
    assert len(rb.data) == CHUNK and (rb.start, rb.end) == (0, 5)


def test_a_message_still_arriving_moves_out_of_the_scratch() -> None:
    """The kernel took a whole message and left the start of one it waits for (start, and the
    length its headers declare in wanted): settle moves it to a buffer of the pipe's sized for
    its rest (one copy of what arrived), where its later reads land in place; the scratch
    stays the thread's."""
    slot = new_slot()
    rb = _new(slot)
    head = b"\x02" + (40_000).to_bytes(8, "big") + b"abc"
    _read(rb, b"\x00\x02ok" + head)
    scratch = rb.data
    rb.start, rb.wanted = 4, 9 + 40_000  # (the kernel's, after the first message)
    rb.settle()
    assert rb.data is not scratch and slot[0] is scratch and not rb.lent
    assert len(rb.data) == 12 + 40_000 - 3 and bytes(rb.data[:12]) == head
    assert (rb.start, rb.end, len(rb)) == (0, 12, 12)
    room = rb.room()
    assert len(room) == 40_000 - 3
    del room
    scratch[:] = bytes(CHUNK)  # (another pipe's read in the scratch: nothing of it moved)
    _read(rb, b"d" * 20_000)
    rb.settle()
    same = rb.data
    assert len(rb.room()) == 40_000 - 20_003 and rb.data is same  # the rest lands in place
    assert bytes(rb.data[:15]) == head + b"ddd"


def test_a_declared_length_is_held_ahead_at_most_by_ahead() -> None:
    rb = _new(new_slot())
    _read(rb, b"\x02" + (1 << 40).to_bytes(8, "big") + b"x" * 100)
    rb.wanted = 9 + (1 << 40)
    rb.settle()
    assert len(rb.data) == 109 + AHEAD
    room = rb.room()
    assert len(room) == AHEAD
    del room
    rb.filled(AHEAD)  # as much arrived: the next room is as large as what is held
    held = len(rb)
    room = rb.room()
    assert len(rb.data) == 2 * held and len(room) == held


def test_a_small_rest_gets_the_least_room() -> None:
    rb = _new(new_slot())
    _read(rb, b"\x01\x05hel")
    rb.wanted = 7
    rb.settle()
    assert len(rb.data) == 5 + MIN_SIZE
    room = rb.room()
    assert len(room) == MIN_SIZE  # behind the held bytes, in the same buffer
    del room


def test_a_scratch_lent_to_writes_leaves_the_slot_and_the_pipe() -> None:
    """The kernel wrote a body as a view of a read in the scratch (lent): settle takes the
    scratch out of the slot (the views keep it until written) and, the pipe holding nothing,
    the pipe keeps no buffer either: its next read goes to a new scratch, never on the view."""
    slot = new_slot()
    rb = _new(slot)
    _read(rb, b"A" * 1000)
    scratch = rb.data
    view = memoryview(rb.data)[0:1000]
    rb.start, rb.lent = 1000, True  # taken, and a view of it lent to a write
    rb.settle()
    assert slot[0] is None and len(rb.data) == 0 and not rb.lent  # the view's alone
    room = rb.room()
    assert room is slot[0] and room is not scratch and len(room) == CHUNK
    room[:5] = b"BBBBB"
    del room
    rb.filled(5)
    assert rb.data is slot[0]
    assert rb.take() == b"BBBBB" and bytes(view) == b"A" * 1000
    rb.settle()
    assert len(rb.data) == 0 and slot[0] is not scratch
    view.release()


def test_a_lent_scratch_that_holds_a_message_is_the_pipe_s_until_it_is_taken() -> None:
    """A read in the scratch whose first body was lent and that ends inside a message: the
    scratch leaves the slot with the held bytes (no copy); the message's rest lands behind
    them, never on the view; once it was taken the pipe keeps nothing, and the buffer never
    goes back to the slot (a view may still show it)."""
    slot = new_slot()
    rb = _new(slot)
    _read(rb, b"A" * 9000 + b"\x01\x05hel")
    scratch = rb.data
    view = memoryview(rb.data)[0:9000]
    rb.start, rb.lent, rb.wanted = 9000, True, 7
    rb.settle()
    assert slot[0] is None and rb.data is scratch and rb.lent and len(rb) == 5
    room = rb.room()
    assert len(room) == CHUNK - 9005  # behind the held bytes, in place
    room[:2] = b"lo"
    del room
    rb.filled(2)
    assert rb.take() == b"\x01\x05hello" and bytes(view) == b"A" * 9000
    rb.settle()
    assert len(rb.data) == 0 and not rb.lent and slot[0] is None  # (not back: the view)
    assert rb.room() is slot[0] is not scratch
    view.release()


def test_two_pipes_on_one_scratch_never_overwrite_a_lent_view() -> None:
    """Two pipes share a slot: one lends views of its read (the scratch leaves the slot),
    the other reads next into a new scratch; one holds a message still arriving (moved out),
    the other's read lands in the scratch. No view and no held byte changes."""
    slot = new_slot()
    a, b = _new(slot), _new(slot)
    _read(a, b"x" * 10)
    a.take()
    a.settle()
    assert a.room() is b.room() is slot[0]  # idle, both: the one scratch
    first = slot[0]
    _read(a, b"A" * 9000)
    view = memoryview(a.data)[0:9000]
    a.start, a.lent = 9000, True
    a.settle()
    assert len(a.data) == 0 and slot[0] is None
    _read(b, b"B" * 9000)
    assert b.data is slot[0] is not first and bytes(view) == b"A" * 9000
    b.start, b.lent = 8000, True  # b lends too, and holds 1000 bytes of a message
    b.wanted = 5000
    held_view = memoryview(b.data)[0:8000]
    b.settle()
    assert slot[0] is None and b.lent  # b keeps its scratch with what it holds
    room = a.room()  # a: a new scratch
    assert room is slot[0] and room is not first and room is not b.data
    room[:3] = b"aaa"
    del room
    a.filled(3)
    assert a.take() == b"aaa" and bytes(view) == b"A" * 9000
    a.settle()
    assert bytes(held_view) == b"B" * 8000 and bytes(b.data[b.start:b.end]) == b"B" * 1000
    _read(a, b"\x01\x05hel")
    a.wanted = 7
    a.settle()  # a message arriving: out of the scratch
    assert a.data is not slot[0] and bytes(a.data[:5]) == b"\x01\x05hel"
    _read(b, b"C" * 4000)
    assert len(b) == 5000 and b.data is not slot[0]
    assert bytes(a.data[:5]) == b"\x01\x05hel" and bytes(held_view) == b"B" * 8000
    view.release()
    held_view.release()


def test_idle_pipes_hold_no_buffer() -> None:
    """What an idle connection keeps (issue 36's price given back): a thousand pipes of one
    thread after a small read each hold no buffer; they share one scratch."""
    slot = new_slot()
    pipes = [_new(slot) for _ in range(1000)]
    for i, rb in enumerate(pipes):
        _read(rb, i.to_bytes(4, "big"))
        assert rb.take() == i.to_bytes(4, "big")
        rb.settle()
    assert all(len(rb.data) == 0 for rb in pipes)
    assert {id(rb.room()) for rb in pipes} == {id(slot[0])}


@pytest.mark.parametrize("alive", [False, True])
def test_idle_pipes_hold_no_buffer_after_lending(alive: bool) -> None:
    """Pipes whose last read the kernel lent views of (a large body each, as a burst of
    clients sends) hold no buffer once settled, whether the writes still hold the views or
    not: a lent scratch is the views' alone. (A slot that remembered 64 such pipes left the
    others a whole scratch each, 256 KiB an idle pipe, until their next read.)"""
    slot = new_slot()
    pipes = [_new(slot) for _ in range(100)]
    views = []
    for rb in pipes:
        _read(rb, bytes(9000))
        views.append(memoryview(rb.data)[:9000])
        rb.start, rb.lent = 9000, True
        rb.settle()
        if not alive:
            views.pop().release()
    assert [len(rb.data) for rb in pipes] == [0] * 100 and not any(rb.lent for rb in pipes)
    assert len({id(v.obj) for v in views}) == len(views)  # (each read had a scratch of its own)
    for v in views:
        v.release()


def test_a_read_that_did_not_come_leaves_no_buffer_behind() -> None:
    """The loop asked for room and the read failed (EAGAIN: libuv asks again after a read
    that filled its room; asyncio on a spurious wake-up), so no buffer_updated: the pipe keeps
    no reference to the scratch, which another pipe's read may take out of the slot (views
    lent) and let go; a pipe that did keep one held 256 KiB, idle."""
    slot = new_slot()
    idle, other = _new(slot), _new(slot)
    room = idle.room()  # (and no read)
    del room
    assert len(idle.data) == 0
    _read(other, bytes(9000))
    view = memoryview(other.data)[:9000]
    other.start, other.lent = 9000, True
    other.settle()
    assert slot[0] is None and len(idle.data) == 0 and len(other.data) == 0
    view.release()
    room = idle.room()  # its next read: a new scratch, read into as usual
    room[:3] = b"abc"
    del room
    idle.filled(3)
    assert idle.data is slot[0] and idle.take() == b"abc"
    with pytest.raises(ValueError, match="filled without a room"):
        _new(new_slot()).filled(1)


@pytest.mark.parametrize("n", [1, 4095, 4096])
def test_take_gives_exactly_the_held_bytes(n: int) -> None:
    rb = new_read_buffer()
    data = bytes(range(256)) * 16
    _read(rb, data[:n])
    rb.start = n // 2
    assert rb.take() == data[n // 2:n] and (rb.start, rb.wanted, len(rb)) == (n, 0, 0)


def test_a_message_larger_than_ahead_fills_its_buffer_before_it_moves() -> None:
    """A held message larger than AHEAD, arriving in reads smaller than its room: each buffer
    it is given is filled before it moves to one about twice as large, so its bytes are copied
    about once in all (a move at every read copied a 16 MiB message 8 times, 64 MiB 32 times:
    quadratic in its size), and they arrive whole."""
    size = 8 * AHEAD
    rb = _new(new_slot())
    head = b"\x02" + size.to_bytes(8, "big")
    _read(rb, head)
    rb.wanted = len(head) + size
    rb.settle()  # (out of the scratch: the head, copied once)
    stream = bytes(range(251)) * (size // 251 + 1)  # (no period of a power of two)
    moves = copied = 0
    for _ in range(4 * size // CHUNK):  # (bounded: each read takes CHUNK, or the rest)
        held = len(rb)
        if held == rb.wanted:
            break
        old = rb.data
        room = rb.room()
        if rb.data is not old:
            moves, copied = moves + 1, copied + held
        at = held - len(head)
        n = min(len(room), CHUNK, size - at)
        room[:n] = stream[at:at + n]
        del room
        rb.filled(n)
        rb.settle()  # (the pipe's own buffer: nothing moves here)
    assert len(rb) == rb.wanted
    assert moves <= 6 and copied <= 2 * size, (moves, copied)
    with memoryview(rb.data) as view:
        assert view[rb.start:rb.end] == head + stream[:size]


def _lend_scratch(slot: list[Any]) -> Any:
    """Another pipe reads into the scratch and lends a view of it (the slot is left empty);
    the view."""
    other = _new(slot)
    _read(other, bytes(9000))
    view = memoryview(other.data)[:9000]
    other.start, other.lent = 9000, True
    other.settle()
    assert slot[0] is None
    return view


def _held_whole(size: int, slot: list[Any], lend: bool = False) -> Any:
    """A read buffer that held a ``size``-byte ZMTP frame until it came whole (reads as large
    as its room), then gave it away (no view lent) and settled; ``lend``: another pipe took
    the scratch meanwhile."""
    rb = _new(slot)
    _read(rb, b"\x02" + size.to_bytes(8, "big"))
    rb.wanted = 9 + size
    rb.settle()
    if lend:
        _lend_scratch(slot)
    for _ in range(size // MIN_SIZE + 1):  # (bounded)
        if len(rb) == rb.wanted:
            break
        room = rb.room()
        n = min(len(room), rb.wanted - len(rb))
        del room
        rb.filled(n)
        rb.settle()
    assert len(rb) == rb.wanted
    rb.take()
    rb.settle()
    return rb


def test_a_large_message_s_buffer_is_let_go_once_it_was_taken() -> None:
    """A buffer made for a message is not kept once the message was taken and no view of it
    is left: the pipe reads into the scratch again (an idle pipe does not hold its largest
    message's size). When the slot is empty (another pipe took the scratch with its views) a
    buffer of a scratch's size (CHUNK to AHEAD) is the slot's new scratch; a larger one is
    let go."""
    slot = new_slot()
    rb = _held_whole(4 * AHEAD, slot)
    assert len(rb.data) == 0 and len(slot[0]) == CHUNK and rb.room() is slot[0]
    rb = _held_whole(4 * AHEAD, slot, lend=True)
    assert len(rb.data) == 0 and slot[0] is None  # (too large for the empty slot: let go)
    rb = _held_whole(1 << 20, slot, lend=True)
    assert len(rb.data) == 0 and CHUNK < len(slot[0]) <= AHEAD  # the slot's scratch now
    assert rb.room() is slot[0]
