"""A pipe's read buffer (``get_buffer`` room, ``buffer_updated``), exact bytes, on each twin
(the engine-path fixture runs every test on the compiled kernel's and on the reference)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.engine.read_buffer import AHEAD, CHUNK, MIN_SIZE, new_read_buffer


def _read(rb: object, data: bytes) -> None:
    """One read of ``data`` into the room (it fits), as a loop's transport does."""
    room = rb.room()  # type: ignore[attr-defined]
    assert len(room) >= len(data)
    room[:len(data)] = data
    del room
    rb.filled(len(data))  # type: ignore[attr-defined]


def test_the_same_buffer_serves_read_after_read() -> None:
    rb = new_read_buffer()
    room = rb.room()
    assert type(room) is bytearray and len(room) == MIN_SIZE and room is rb.data
    del room
    for data in (b"\x00\x05hello", b"\x01\x01a\x00\x01b"):
        _read(rb, data)
        assert (rb.start, rb.end, len(rb)) == (0, len(data), len(data))
        assert rb.take() == data and len(rb) == 0
        assert rb.room() is rb.data  # everything taken: the whole buffer again, no new object


def test_a_read_that_fills_the_buffer_makes_the_next_one_bigger() -> None:
    rb = new_read_buffer()
    _read(rb, bytes(MIN_SIZE))
    assert rb.size == 2 * MIN_SIZE and len(rb.data) == MIN_SIZE
    rb.take()
    assert len(rb.room()) == 2 * MIN_SIZE
    for _ in range(10):
        rb.filled(len(rb.data) - rb.end)
        rb.take()
        rb.room()
    assert rb.size == len(rb.data) == CHUNK  # no further


def test_a_held_message_gets_room_for_its_rest_behind_it() -> None:
    """The kernel took a whole message and left the start of one it waits for (start, and the
    length its headers declare in wanted): the room is behind it, in the same buffer while it
    fits, else a new buffer with the held bytes at its start."""
    rb = new_read_buffer()
    _read(rb, b"\x00\x02ok" + b"\x02" + (40_000).to_bytes(8, "big") + b"abc")
    rb.start, rb.wanted = 4, 9 + 40_000  # (the kernel's, after the first message)
    old = rb.data
    room = rb.room()
    assert rb.data is not old and len(room) >= 40_000 - 3
    assert bytes(rb.data[:rb.end]) == b"\x02" + (40_000).to_bytes(8, "big") + b"abc"
    assert (rb.start, rb.end) == (0, 12)
    del room
    _read(rb, b"d" * 20_000)
    same = rb.data
    assert len(rb.room()) >= 40_000 - 20_003 and rb.data is same  # the rest lands in place
    assert bytes(rb.data[12:15]) == b"ddd"


def test_a_declared_length_is_held_ahead_at_most_by_ahead() -> None:
    rb = new_read_buffer()
    _read(rb, b"\x02" + (1 << 40).to_bytes(8, "big") + b"x" * 100)
    rb.wanted = 9 + (1 << 40)
    room = rb.room()
    assert len(room) == AHEAD and len(rb.data) == 109 + AHEAD
    del room
    rb.filled(AHEAD)  # as much arrived: the next room is as large as what is held
    held = len(rb)
    room = rb.room()
    assert len(rb.data) == 2 * held and len(room) == held


def test_a_small_rest_gets_the_least_room() -> None:
    rb = new_read_buffer()
    _read(rb, b"\x01\x05hel")
    rb.wanted = 7
    room = rb.room()
    assert len(room) == MIN_SIZE - 5  # behind the held bytes, in the same buffer
    del room


def test_views_of_taken_bytes_are_never_overwritten() -> None:
    """The kernel wrote a body as a view of the buffer (lent): while the view lives the next
    reads go behind it, or to a new buffer; once it is gone the buffer is used from its start
    again."""
    rb = new_read_buffer()
    _read(rb, bytes(MIN_SIZE))  # a full read: the next buffer is twice as big
    rb.take()
    _read(rb, b"A" * 1000)
    assert len(rb.data) == 2 * MIN_SIZE
    view = memoryview(rb.data)[0:1000]
    rb.start, rb.lent = 1000, True  # taken, and a view of it lent to a write
    room = rb.room()
    assert len(room) == 2 * MIN_SIZE - 1000 and (rb.start, rb.end) == (1000, 1000)
    room[:5] = b"BBBBB"
    del room
    rb.filled(5)
    assert rb.take() == b"BBBBB" and bytes(view) == b"A" * 1000
    rb.end = rb.start = len(rb.data) - MIN_SIZE + 1  # too little left behind: a new buffer
    old = rb.data
    room = rb.room()
    assert rb.data is not old and room is rb.data and not rb.lent
    room[:4] = b"CCCC"
    assert bytes(view) == b"A" * 1000
    del room
    view.release()
    rb.lent = True
    assert rb.room() is rb.data and (rb.start, rb.end) == (0, 0)  # no view left


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
    rb = new_read_buffer()
    head = b"\x02" + size.to_bytes(8, "big")
    _read(rb, head)
    rb.wanted = len(head) + size
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
    assert len(rb) == rb.wanted
    assert moves <= 6 and copied <= 2 * size, (moves, copied)
    with memoryview(rb.data) as view:
        assert view[rb.start:rb.end] == head + stream[:size]


def _held_whole(size: int) -> Any:
    """A read buffer that held a ``size``-byte ZMTP frame until it came whole (reads as large
    as its room), then gave it away."""
    rb = new_read_buffer()
    _read(rb, b"\x02" + size.to_bytes(8, "big"))
    rb.wanted = 9 + size
    for _ in range(size // MIN_SIZE + 1):  # (bounded)
        if len(rb) == rb.wanted:
            break
        room = rb.room()
        n = min(len(room), rb.wanted - len(rb))
        del room
        rb.filled(n)
    assert len(rb) == rb.wanted
    rb.take()
    return rb


def test_a_large_message_s_buffer_is_let_go_once_it_was_taken() -> None:
    """A buffer made for a message larger than AHEAD is not kept once the message was taken
    and no view of it is left: the next read gets a buffer of the usual size (an idle pipe
    does not hold its largest message's size for its whole life). One made for a message of
    1 MiB (the default limit) is kept: the next such message lands in it in place."""
    rb = _held_whole(4 * AHEAD)
    room = rb.room()
    assert len(rb.data) <= CHUNK and room is rb.data and (rb.start, rb.end) == (0, 0)
    del room
    rb = _held_whole(1 << 20)
    kept = rb.data
    assert len(kept) > CHUNK and rb.room() is kept
