"""The one receive buffer of the codecs, and frames on both sides of its copy-out threshold."""

from __future__ import annotations

import pytest

from gateway.engine.codecs import sp_role, zmtp_role
from gateway.wire._buffer import COPY_VIA_VIEW, ReceiveBuffer, new_buffer
from gateway.wire.events import HandshakeComplete
from gateway.wire.sp import SpCodec
from gateway.wire.zmtp import ZmtpCodec


def test_feed_drops_the_consumed_prefix() -> None:
    rx = ReceiveBuffer()
    rx.feed(b"abcdef")
    assert len(rx) == 6
    rx.pos = 4
    assert len(rx) == 2
    rx.feed(b"gh")
    assert (bytes(rx.data), rx.pos, len(rx)) == (b"efgh", 0, 4)


def test_a_chunk_after_a_consumed_buffer_is_kept_without_a_copy() -> None:
    rx = ReceiveBuffer()
    chunk = b"0123456789"
    rx.feed(chunk)
    assert rx.data is chunk  # frames will be slices of the read itself
    rx.pos = 10
    rx.feed(b"next")
    assert (rx.data, rx.pos) == (b"next", 0) and type(rx.data) is bytes
    rx.pos = 2  # a tail ("xt") left: the next chunk is appended to a copy of it
    rx.feed(b"!")
    assert (bytes(rx.data), rx.pos) == (b"xt!", 0) and type(rx.data) is bytearray
    rx.pos = 3
    rx.feed(bytearray(b"ba"))  # any bytes-like chunk; kept as bytes
    assert (rx.data, rx.pos) == (b"ba", 0) and type(rx.data) is bytes


def test_a_buffer_with_views_still_to_be_written_moves_its_tail() -> None:
    """The compiled kernel writes a large body as a view of the buffer it came in (issue 36):
    while that view waits to be written the bytearray cannot be resized, so the next chunk
    goes with the unparsed tail to a new buffer; the view keeps the old bytes as they were.
    (Both twins: the engine-path fixture runs this test on each.)"""
    rx = new_buffer()
    rx.feed(b"head")
    rx.pos = 1
    rx.feed(b"body!")  # a tail was left: a bytearray from now on
    old = rx.data
    assert type(old) is bytearray
    view = memoryview(old)[1:5]  # what the kernel hands to a write
    rx.pos = 3
    rx.feed(b"more")
    assert rx.data is not old and (bytes(rx.data), rx.pos) == (b"body!more", 0)
    assert bytes(view) == b"adbo" and bytes(old) == b"eadbody!"
    view.release()
    rx.pos = 2
    rx.feed(b"+")  # no view left: in place again
    assert (bytes(rx.data), rx.pos) == (b"dy!more+", 0)


def test_copy_is_a_detached_bytes() -> None:
    rx = ReceiveBuffer()
    rx.feed(b"0123456789")
    out = rx.copy(2, 5)
    rx.feed(b"more")  # resizing the bytearray must not fail: no view is left open
    assert out == b"234" and type(out) is bytes


def _open(a: ZmtpCodec | SpCodec, b: ZmtpCodec | SpCodec) -> None:
    a.receive_data(b.initiate())
    b.receive_data(a.initiate())
    for _ in range(2):
        for x, y in ((a, b), (b, a)):
            while x.next_event() is not None:
                pass
            y.receive_data(x.data_to_send())
    assert a.handshake_done and b.handshake_done


@pytest.mark.parametrize("size", [0, 1, COPY_VIA_VIEW - 1, COPY_VIA_VIEW, COPY_VIA_VIEW + 1, 1 << 18])
@pytest.mark.parametrize("wire", ["zmtp", "sp"])
def test_frames_around_the_threshold(wire: str, size: int) -> None:
    if wire == "zmtp":
        a: ZmtpCodec | SpCodec = ZmtpCodec(zmtp_role("DEALER", False))
        b: ZmtpCodec | SpCodec = ZmtpCodec(zmtp_role("ROUTER", False))
        parts = (b"", bytes(range(256)) * (size // 256) + b"z" * (size % 256))
        want: tuple[bytes, ...] = parts
    else:
        a, b = SpCodec(sp_role("REQ")), SpCodec(sp_role("REP"))
        parts = (b"\x80\x00\x00\x01", b"q" * size)
        want = (b"".join(parts),)
    _open(a, b)
    wire_bytes = a.send_message(parts) * 3
    got = []
    for i in range(0, len(wire_bytes), 7001):  # odd chunks: frames straddle feeds
        b.receive_data(wire_bytes[i : i + 7001])
        while (ev := b.next_event()) is not None:
            assert not isinstance(ev, HandshakeComplete)
            got.append(ev)
    assert got == [want] * 3
