"""The tap's record codec and its counting, as libzmq's proxy counts (exact bytes)."""

from __future__ import annotations

import struct

from gateway.device.tap import (
    REPLY,
    REQUEST,
    Record,
    Tap,
    pack_record,
    parts_of,
    unpack_record,
)
from gateway.message import Message
from gateway.metrics import Registry


def test_a_record_round_trips_with_exact_header_bytes() -> None:
    r = Record(REQUEST, "zmtp", "sp", b"\x00\x01\x02\x03\x04", b"\x80\x00\x00\x01",
               (b"\x00\x01\x02\x03\x04", b"", b"hi"), (b"\x80\x00\x00\x07", b"hi"), 5)
    frames = pack_record(r)
    assert frames[0] == b"GWC1" + bytes([1, REQUEST, 0, 1]) + struct.pack("!HQ", 3, 5)
    assert frames[1:3] == [r.in_pipe, r.out_pipe]
    assert unpack_record(frames) == r
    assert unpack_record([b"hello", b"x", b"y"]) is None  # a frames-format message
    assert unpack_record(frames[:1]) is None
    bad = bytearray(frames[0])
    bad[7] = 9  # no such family
    assert unpack_record([bytes(bad), *frames[1:]]) is None
    short = bytearray(frames[0])
    short[8:10] = (200).to_bytes(2, "big")  # more frames in than there are
    assert unpack_record([bytes(short), *frames[1:]]) is None


def test_parts_count_as_libzmq_and_nng_hold_them() -> None:
    zmtp = Message((b"\x00abcd", b""), (b"body", b"more"))
    assert parts_of("zmtp", zmtp) == (4, 5 + 0 + 4 + 4)
    sp = Message((b"\x00\x00\x00\x01", b"\x80\x00\x00\x02"), (b"body",))
    assert parts_of("sp", sp) == (1, 12)


def test_statistics_are_in_libzmq_order_and_refusals_count_in_only() -> None:
    reg = Registry()
    tap = Tap("b", lambda rid: "zmtp", "sp", metrics=reg)
    req = Message((b"\x00abcd", b""), (b"hi",))
    out = Message((b"\x80\x00\x00\x01",), (b"hi",))
    tap.request(req, out, b"\x00\x00\x00\x09")
    tap.request(req, None, None)  # refused: received, never sent
    tap.reply(Message((b"\x80\x00\x00\x01",), (b"ok!",)), Message((b"\x00abcd", b""), (b"ok!",)))
    assert tap.statistics() == (6, 14, 3, 8, 1, 7, 1, 6)
    assert reg.get("gateway_side_parts_total", bridge="b", side="front", direction="in") == 6
    assert reg.get("gateway_side_bytes_total", bridge="b", side="back", direction="out") == 6
    assert REPLY != REQUEST
