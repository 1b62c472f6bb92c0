"""The ZMTP readers (gateway.wire.zmtp.readers): limits and bad frames, partial messages, the batch
reader next_messages and its fast twin."""

from __future__ import annotations

import pytest
from _zmtp import GREETING, drain, frames, opened, ready, zmtp_codec
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gateway.errors import LocalProtocolError, MessageTooLarge, RemoteProtocolError
from gateway.testing.codec_checks import chunked, same_in_batches
from gateway.wire.events import HandshakeComplete, Ping
from gateway.wire.zmtp import ZmtpCodec
from gateway.wire.zmtp.codec import READERS
from gateway.wire.zmtp.framing import encode_message
from gateway.wire.zmtp.readers import (
    AWAIT_READY,
    CLOSED,
    GREETING_REST,
    OPEN,
    SEALED,
    V2_IDENTITY,
    counted,
)
from gateway.wire.zmtp.readers import GREETING as GREETING_STATE

# -- limits and bad frames ------------------------------------------------------------------


@pytest.mark.parametrize("flags", [0x08, 0x10, 0x20, 0x40, 0x80, 0xF8, 0x09])
def test_reserved_flag_bits(flags: int) -> None:
    codec = opened()
    codec.receive_data(bytes((flags, 0)))
    with pytest.raises(RemoteProtocolError, match="reserved"):
        codec.next_event()


def test_oversize_single_frame_refused_at_header() -> None:
    codec = opened(max_message_size=1000)
    codec.receive_data(b"\x02" + (1001).to_bytes(8, "big"))  # no payload yet
    with pytest.raises(MessageTooLarge):
        codec.next_event()


def test_oversize_total_refused() -> None:
    codec = opened(max_message_size=300)
    codec.receive_data(b"\x01\xc8" + b"a" * 200)
    assert codec.next_event() is None
    codec.receive_data(b"\x00\xc8")
    with pytest.raises(MessageTooLarge):
        codec.next_event()


def test_exact_limit_accepted() -> None:
    codec = opened(max_message_size=300)
    codec.receive_data(b"\x01\xc8" + b"a" * 200 + b"\x00\x64" + b"b" * 100)
    assert codec.next_event() == (b"a" * 200, b"b" * 100)


def test_oversize_command_refused() -> None:
    codec = opened(max_message_size=100)
    codec.receive_data(b"\x06" + (101).to_bytes(8, "big"))
    with pytest.raises(MessageTooLarge):
        codec.next_event()


def test_huge_long_size() -> None:
    codec = opened()
    codec.receive_data(b"\x02\xff\xff\xff\xff\xff\xff\xff\xff")
    with pytest.raises(MessageTooLarge):
        codec.next_event()


# -- partial: an incomplete message is buffered (the engine's per-message deadline) -----------


@pytest.mark.parametrize(
    ("chunks", "partial"),
    [
        ([], False),
        ([b"\x00"], True),  # one byte of a frame header
        ([b"\x02\x00\x00\x00\x00\x00\x10"], True),  # part of a long header
        ([b"\x02" + (1 << 20).to_bytes(8, "big") + b"x" * 1000], True),  # half a 1 MiB frame
        ([b"\x00\x03abc"], False),  # one whole message
        ([b"\x00\x03abc\x00\x02d"], True),  # a whole message, then part of the next
        ([b"\x01\x03one"], True),  # a whole frame with MORE: the message is not complete
        ([b"\x01\x03one\x01\x03two"], True),
        ([b"\x01\x03one", b"\x00\x03two"], False),  # its last frame came
        ([b"\x04\x06\x04PI"], True),  # part of a command
        ([b"\x04\x07\x04PING\x00\x00"], False),  # a whole PING
    ],
)
def test_partial(chunks: list[bytes], partial: bool) -> None:
    codec = opened("DEALER", b"ROUTER")
    assert codec.partial is False
    for chunk in chunks:
        codec.receive_data(chunk)
        drain(codec)
    assert codec.partial is partial


def test_partial_before_the_handshake() -> None:
    codec = zmtp_codec("REQ")
    codec.receive_data(GREETING[:10])
    assert codec.next_event() is None and codec.partial
    codec.receive_data(GREETING[10:] + ready(b"REP"))
    assert isinstance(codec.next_event(), HandshakeComplete) and not codec.partial


# -- next_messages: whole messages in one call, the same stream as next_event ----------------


def test_next_messages_stops_before_a_command() -> None:
    rx = opened()
    ping = bytes.fromhex("0407 0450494e470000")
    rx.receive_data(bytes.fromhex("0100 000161 000162") + ping + bytes.fromhex("000163"))
    assert rx.next_messages(10) == [(b"", b"a"), (b"b",)]
    assert rx.next_messages(10) == []  # the PING is next_event's
    assert isinstance(rx.next_event(), Ping)
    assert rx.next_messages(10) == [(b"c",)]
    assert rx.next_event() is None


def test_next_messages_limit_and_missing_bytes() -> None:
    rx = opened()
    rx.receive_data(bytes.fromhex("000161 000162 000163 0101"))  # the last one is cut short
    assert rx.next_messages(0) == []
    assert rx.next_messages(2) == [(b"a",), (b"b",)]
    assert rx.next_messages(2) == [(b"c",)]
    assert rx.partial
    rx.receive_data(bytes.fromhex("64 000165"))
    assert rx.next_messages(2) == [(b"d", b"e")]
    assert not rx.partial


def test_next_messages_long_frames_and_frame_types() -> None:
    rx = opened()
    rx.receive_data(bytes.fromhex("030000000000000100") + b"x" * 256 + bytes.fromhex("000179"))
    [msg] = rx.next_messages(4)
    assert msg == (b"x" * 256, b"y")
    assert all(type(f) is bytes for f in msg)


def test_next_messages_leaves_refusals_to_next_event() -> None:
    rx = opened()
    rx.max_message_size = 4  # (after the handshake: READY itself is longer)
    rx.receive_data(bytes.fromhex("000161 0005") + b"hello")
    assert rx.next_messages(8) == [(b"a",)]
    assert rx.next_messages(8) == []
    with pytest.raises(MessageTooLarge):
        rx.next_event()
    bad = opened()
    bad.receive_data(bytes.fromhex("000161 080162"))  # a reserved flag bit
    assert bad.next_messages(8) == [(b"a",)]
    with pytest.raises(RemoteProtocolError, match="reserved"):
        bad.next_event()


def test_next_messages_before_the_handshake_is_empty() -> None:
    codec = zmtp_codec("REQ")
    codec.initiate()
    codec.receive_data(GREETING + ready(b"REP") + bytes.fromhex("000161"))
    assert codec.next_messages(8) == []
    assert isinstance(codec.next_event(), HandshakeComplete)
    assert codec.next_messages(8) == [(b"a",)]


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(st.tuples(frames, st.sampled_from(["msg", "ping", "garbage", "big"])),
                      max_size=10),
    cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=20),
    limit=st.integers(min_value=1, max_value=5),
)
def test_next_messages_gives_what_next_event_gives(
    messages: list[tuple[tuple[bytes, ...], str]], cuts: list[int], limit: int
) -> None:
    enc = opened()
    wire = b""
    for parts, kind in messages:
        if kind == "ping":
            wire += enc.ping(1, b"c")
        elif kind == "garbage":
            wire += parts[0][:3]
        else:
            wire += enc.send_message(((b"b" * 901,) if kind == "big" else ()) + parts)
    same_in_batches(lambda: opened(max_message_size=900), chunked(wire, cuts), limit)


def test_next_messages_counts_a_message_cut_at_frame_boundaries_towards_the_limit() -> None:
    """Frames of one message in reads of their own: each read alone is far under the size
    limit, the message is not (its earlier frames count), so the fast path must not take it."""
    frame = bytes.fromhex("0132") + b"m" * 50  # 50 bytes, MORE
    last = bytes.fromhex("0032") + b"l" * 50
    chunks = [frame, frame, last, bytes.fromhex("000161")]
    same_in_batches(lambda: opened(max_message_size=120), chunks, 8)
    codec = opened(max_message_size=120)
    for chunk in chunks[:2]:
        codec.receive_data(chunk)
        assert codec.next_messages(8) == []
    codec.receive_data(chunks[2])
    assert codec.next_messages(8) == []
    with pytest.raises(MessageTooLarge, match="150"):
        codec.next_event()
    fits = opened(max_message_size=150)
    for chunk in chunks[:3]:
        fits.receive_data(chunk)
        got = fits.next_messages(8)
    assert got == [(b"m" * 50, b"m" * 50, b"l" * 50)]


def test_a_handshake_command_over_64k_is_refused_at_its_header() -> None:
    """Finding 9: before the handshake a frame may be at most 64 KiB (a CURVE HELLO is 200
    bytes), whatever max_message_size says; refused when its size arrives, nothing buffered."""
    from gateway.wire.zmtp import HANDSHAKE_FRAME_LIMIT

    codec = zmtp_codec("REQ")
    codec.initiate()
    size = HANDSHAKE_FRAME_LIMIT + 1
    codec.receive_data(GREETING + b"\x06" + size.to_bytes(8, "big") + b"\x05READY")
    with pytest.raises(RemoteProtocolError, match="handshake command of 65537 bytes"):
        codec.next_event()
    ok = zmtp_codec("REQ")  # a READY up to the limit is fine
    ok.initiate()
    big = b"\x0bSocket-Type\x00\x00\x00\x03REP\x01X" + (60000).to_bytes(4, "big") + b"v" * 60000
    body = b"\x05READY" + big
    ok.receive_data(GREETING + b"\x06" + len(body).to_bytes(8, "big") + body)
    assert isinstance(ok.next_event(), HandshakeComplete)


# -- one reader per state; the fast twins ------------------------------------------------------


def test_every_state_has_its_reader_and_a_stage() -> None:
    states = [GREETING_STATE, GREETING_REST, V2_IDENTITY, AWAIT_READY, OPEN, SEALED, CLOSED]
    assert states == sorted(states) and set(READERS) == set(states)  # they only move forward
    codec = zmtp_codec("REQ")
    seen = [codec.handshake_stage]
    codec.initiate()
    for byte in GREETING + ready(b"REP"):  # a 3.x handshake, byte by byte
        codec.receive_data(bytes((byte,)))
        while codec.next_event() is not None:
            pass
        if seen[-1] != codec.handshake_stage:
            seen.append(codec.handshake_stage)
    assert seen == ["greeting", "ready", "done"]


def _open_with(limit: int) -> ZmtpCodec:
    codec = opened()  # the handshake under the default limit, then ours (a plain attribute)
    codec.max_message_size = limit
    return codec


def _batched(codec: ZmtpCodec) -> tuple[list[tuple[bytes, ...]], int, list[bytes]]:
    got = codec.next_messages(1000)
    return got, codec.rx.pos, list(codec._parts)


@settings(max_examples=200, deadline=None)
@given(messages=st.lists(frames, min_size=1, max_size=8), long_frame=st.booleans(),
       tail=st.integers(min_value=0, max_value=12))
def test_the_fast_twin_reads_what_the_general_loop_reads(
    messages: list[tuple[bytes, ...]], long_frame: bool, tail: int
) -> None:
    """The batch reader's fast twin (a bytes read that cannot hold a message over the limit)
    and its general loop (a bytearray read, or one near the limit) take the same messages,
    stop at the same byte and keep the same partial message; next_event agrees with both."""
    enc = opened()
    msgs = [(b"L" * 300,) + m if long_frame and i == 0 else m for i, m in enumerate(messages)]
    wire = b"".join(enc.send_message(m) for m in msgs)
    wire += enc.send_message((b"cut-off message",))[:tail]  # a partial message at the end
    biggest = max(sum(map(len, m)) for m in msgs) + len(wire) + 64  # the cut one fits too

    fast = _open_with(biggest)  # bytes, far under the limit: the fast twin
    fast.receive_data(wire)
    assert type(fast.rx.data) is bytes and len(wire) <= fast.max_message_size
    # (the limit as the readers count: each frame at least FRAME_FLOOR)
    slow_bytes = _open_with(max(sum(map(counted, map(len, m))) for m in msgs))
    slow_bytes.receive_data(wire)  # bytes, but the read could hold more than the limit
    assume(len(wire) > slow_bytes.max_message_size)  # (not so: a read of one empty frame)
    slow_array = _open_with(biggest)
    slow_array.receive_data(b"\x01")  # a tail left over: the buffer becomes a bytearray
    assert slow_array.next_messages(8) == []
    slow_array.rx.data, slow_array.rx.pos = bytearray(wire), 0
    assert type(slow_array.rx.data) is bytearray

    want = _batched(fast)
    assert want[0] == [tuple(m) for m in msgs]
    assert _batched(slow_bytes) == want and _batched(slow_array) == want
    plain = _open_with(biggest)
    plain.receive_data(wire)
    assert drain(plain) == want[0] and plain.rx.pos == want[1]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.binary(max_size=300), max_size=6).map(tuple))
def test_send_messages_shapes_are_the_general_encoders(parts: tuple[bytes, ...]) -> None:
    """``send_message`` writes one, two, three and four short frames without a loop: the same
    bytes as the general encoder (``framing.encode_message``), which also refuses no frame."""
    codec = opened()
    if not parts:
        with pytest.raises(LocalProtocolError):
            codec.send_message(parts)
        with pytest.raises(LocalProtocolError):
            encode_message(parts)
        return
    assert codec.send_message(parts) == encode_message(parts)
