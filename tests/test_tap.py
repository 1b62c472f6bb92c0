"""The tap's record codec and its counting, as libzmq's proxy counts (exact bytes)."""

from __future__ import annotations

import struct
from typing import Any

import pynng
import pytest
import zmq
from _aio import run, until

from gateway.device import tap as tap_module
from gateway.device.tap import (
    REPLY,
    REQUEST,
    CapturePublisher,
    Record,
    Tap,
    pack_record,
    parts_of,
    unpack_record,
)
from gateway.message import Message
from gateway.metrics import BUCKETS, Registry


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


# -- the capture endpoint's readers and the compiled kernel's turns (real peers on 127.0.0.1) ---

def _capture(wire: str, reg: Registry) -> tuple[Any, str, list[bool]]:
    from gateway.device.ledger import Tally
    from gateway.engine.socket import Socket

    sock = Socket("PUB")
    url = sock.bind(f"{wire}+tcp://127.0.0.1:0")
    pub = CapturePublisher("b", sock, metrics=reg)
    watched = [True]
    pub.watch(watched, Tally(len(BUCKETS)))
    return pub, url.split("+", 1)[1], watched


@pytest.mark.parametrize("wire", ["zmq", "sp"])
def test_a_readers_arrival_takes_the_bridge_from_the_kernel_at_once(
        wire: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A libzmq SUB is a reader once its SUBSCRIBE arrived, an nng sub0 once its pipe is up
    (it sends none): either is told to the publisher at once, not at the next periodic look
    (here an hour away), so no copy it could take is counted as a no-reader drop."""
    monkeypatch.setattr(tap_module, "WATCH_INTERVAL", 3600.0)

    async def trial() -> None:
        pub, url, watched = _capture(wire, Registry())
        ctx = zmq.Context()
        if wire == "sp":
            reader: Any = pynng.Sub0()
            reader.subscribe(b"")
            reader.dial(url, block=False)
        else:
            reader = ctx.socket(zmq.SUB)
            reader.subscribe(b"")
            reader.connect(url)
        try:
            assert watched[0] is False  # nobody reads: the kernel's turn
            await until(lambda: bool(pub.readers()))
            assert watched[0] is True  # the Python step's, whose copies the reader takes
        finally:
            pub.close()
            reader.close()
            ctx.term()

    run(trial(), 20.0)


def test_copies_queued_when_the_capture_endpoint_closes_are_counted() -> None:
    """Every forwarded message ends as one published or dropped copy, also the ones queued
    in the pass the endpoint closes in."""
    reg = Registry()

    async def trial() -> None:
        pub, _, _ = _capture("zmq", reg)
        msg = Message((b"\x00abcd", b""), (b"hi",))
        for _ in range(3):
            pub.put(REQUEST, "zmtp", "sp", msg, msg, b"", b"")
        pub.close()

    run(trial(), 20.0)
    assert reg.get("gateway_capture_published_total", bridge="b") == 0
    assert reg.get("gateway_capture_dropped_total", bridge="b", reason="no-reader") == 3
