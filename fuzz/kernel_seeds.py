"""The kernel harnesses' seeds (``fuzz/corpus/kernel_*/seed-*``, written by ``python -m fuzz
seeds`` after the captures): what libzmq and nng sent in the codec harnesses' seeds, past their
handshakes, as the reads of a bridge's peer; and the crafted cases of the kernel's differential
tests (``tests/test_kernel.py``'s unusual messages and mangled replies) and of its security
review (``tests/test_kernel_findings.py``: frames counted toward the size limit, 32 and 33
frames, sizes at the limit and one past it, a 64-bit size, a hop limit, a departed client),
each on the routes and patterns it applies to.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import kernel_curve, kernel_sp, kernel_zmtp
from ._twins import DRAIN, ECHO, LEAVE, TICK, StepWriter, encode_input

CORPUS = Path(__file__).resolve().parent / "corpus"
MAX = 700  # the layout's first size limit
REQREP, PIPELINE, PUBSUB = range(3)
RID = b"\x80\x00\x00\x01"  # an SP request id (the top bit: the end of the backtrace)


def zframes(*frames: bytes, long: bool = False) -> bytes:
    """ZMTP frames, MORE on all but the last (``long``: every size in 8 bytes)."""
    out = bytearray()
    for i, f in enumerate(frames):
        more = int(i < len(frames) - 1)
        if long or len(f) > 255:
            out += bytes((more | 2,)) + len(f).to_bytes(8, "big") + f
        else:
            out += bytes((more, len(f))) + f
    return bytes(out)


def _past_zmtp_handshake(seed: bytes) -> bytes:
    """The bytes a libzmq peer sent after its greeting and READY (a ``zmtp_codec`` seed)."""
    stream = seed[6:]  # (kind prelude peer size limit ncuts=0)
    return stream[64 + 2 + stream[65]:]


def _past_sp_header(seed: bytes) -> bytes:
    """The bytes an nng peer sent after its SP header (an ``sp_codec`` seed)."""
    return seed[6 + 2 * seed[5] + 8:]


#: libzmq's captures: (the peer it is, for the bridge: pattern, client 0 or server 1)
LIBZMQ = {"DEALER": (REQREP, 0), "REQ": (REQREP, 0), "ROUTER": (REQREP, 1), "REP": (REQREP, 1),
          "PUSH": (PIPELINE, 0), "PULL": (PIPELINE, 1), "SUB": (PUBSUB, 0), "XSUB": (PUBSUB, 0),
          "PUB": (PUBSUB, 1)}
NNG = {"Req0": (REQREP, 0, False), "Req0-ipc": (REQREP, 0, True), "Rep0": (REQREP, 1, False),
       "Push0": (PIPELINE, 0, False), "Pull0": (PIPELINE, 1, False), "Pub0": (PUBSUB, 1, False),
       "Sub0": (PUBSUB, 0, False)}
HARNESS_ROUTES = {"kernel_zmtp": kernel_zmtp.ROUTES, "kernel_sp": kernel_sp.ROUTES}


def _placed(family: str, who: int) -> Iterator[tuple[str, int]]:
    """(harness, route) where a peer of ``family`` is a client (``who`` 0) or a server (1)."""
    for harness, routes in HARNESS_ROUTES.items():
        for route, sides in enumerate(routes):
            if sides[who] == family:
                yield harness, route


def captured() -> Iterator[tuple[str, str, bytes]]:
    """(harness, name, input) of what libzmq and nng sent, read by a bridge's peer that is a
    client or a server of the same kind."""
    for kind, (pattern, who) in LIBZMQ.items():
        path = CORPUS / "zmtp_codec" / f"seed-libzmq-{kind}"
        if path.exists():
            steps = StepWriter().raw_read(who, _past_zmtp_handshake(path.read_bytes())).echo(1)
            for harness, route in _placed("zmtp", who):
                yield harness, f"seed-libzmq-{kind}-{route}", encode_input(
                    pattern=pattern, route=route, steps=steps.bytes())
    for name, (pattern, who, ipc) in NNG.items():
        path = CORPUS / "sp_codec" / f"seed-nng-{name}"
        if path.exists():
            steps = StepWriter().raw_read(who, _past_sp_header(path.read_bytes())).echo(1)
            for harness, route in _placed("sp", who):
                yield harness, f"seed-nng-{name}-{route}", encode_input(
                    pattern=pattern, route=route, ipc=ipc, steps=steps.bytes())


def _zmtp_client_cases() -> dict[str, StepWriter]:
    """A ZeroMQ client's unusual requests (test_kernel's, the review's), then the answers."""
    W = StepWriter
    return {
        "hello": W().msg(0, b"", b"hello 0").msg(0, b"", b"hello 1").echo(1),
        "envelope": W().msg(0, b"app", b"", b"body").echo(1),
        "no-delimiter": W().msg(0, b"solo").msg(0, b"a", b"b").echo(1),
        "two-body-frames": W().msg(0, b"", b"body", b"second").echo(1),
        "double-delimiter": W().msg(0, b"", b"", b"x").msg(0, b"", b"").echo(1),
        "probe": W().msg(0, b"").msg(0, b"", b"after").echo(1),
        "ping-between": W().msg(0, b"", b"a").ping(0, 7, b"ctx").msg(0, b"", b"b").echo(1),
        "long-flag": W().raw_read(0, zframes(b"", b"hi", long=True)).echo(1),
        "long-300": W().raw_read(0, bytes((1, 0, 2)) + (300).to_bytes(8, "big") + bytes(300)),
        "40-empty": W().raw_read(0, zframes(*[b""] * 40, b"x")).echo(1),
        "32-frames": W().raw_read(0, zframes(*[b"e%d" % i for i in range(30)], b"", b"b"))
        .echo(1),
        "33-frames": W().raw_read(0, zframes(*[b"e%d" % i for i in range(31)], b"", b"b"))
        .echo(1),
        "body-at-limit": W().msg(0, b"", bytes(MAX - 2)).msg(0, b"", bytes(MAX - 1)).echo(1),
        "body-past-limit": W().msg(0, b"", bytes(MAX + 1)),
        "envelope-spread": W().msg(0, bytes(MAX - 12), b"", bytes(10))
        .msg(0, bytes(MAX - 12), b"", bytes(11)).echo(1),
        "size-2-63": W().raw_read(0, b"\x02" + (2**63 + 5).to_bytes(8, "big") + b"x"),
        "reserved-flag": W().msg(0, b"", b"ok").raw_read(0, b"\x08\x01x").echo(1),
        "fair-share": W().many(0, 140, b"", b"a").echo(1).echo(1),
        "split": W().split(0, (1, 3, 7, 20), b"", b"hello world").echo(1),
        "flip": W().flip(0, 1, 0x40, b"", b"hello").msg(0, b"", b"x").echo(1),
        "mangled-replies": W().many(0, 10, b"", b"r").echo(1, 3).many(0, 10, b"", b"s")
        .echo(1, 7).echo(1, 11),
    }


def _sp_client_cases() -> dict[str, StepWriter]:
    """An SP client's unusual requests (backtraces, hop limits), then the answers."""
    W = StepWriter
    return {
        "hello": W().msg(0, RID + b"hello").msg(0, b"\x80\x00\x00\x02hi").echo(1),
        "hops": W().msg(0, b"\x00\x00\x00\x09" + RID + b"body").echo(1),
        "hop-limit": W().msg(0, b"\x00\x00\x00\x02" * 9 + RID + b"x").msg(0, RID + b"y").echo(1),
        "no-request-id": W().msg(0, b"\x00").msg(0, b"\x00\x00\x00\x01"),
        "empty": W().msg(0, b"").msg(0, RID).echo(1),
        "body-at-limit": W().msg(0, RID + bytes(MAX - 4)).echo(1),
        "body-past-limit": W().msg(0, RID + bytes(MAX - 3)),
        "size-2-64": W().raw_read(0, b"\xff" * 8 + b"x"),
        "fair-share": W().many(0, 140, RID + b"a").echo(1).echo(1),
        "split": W().split(0, (1, 7, 9, 12), RID + b"hello world").echo(1),
        "flip": W().flip(0, 7, 0x01, RID + b"hello").msg(0, RID + b"x").echo(1),
        "mangled-replies": W().many(0, 10, RID + b"r").echo(1, 3).echo(1, 7)
        .many(0, 10, RID + b"s").echo(1, 11),
    }


def _common_cases(client: bytes, zmtp_front: bool) -> dict[str, tuple[int, dict[str, Any],
                                                                     StepWriter]]:
    """Cases of any front: (pattern, the layout's other fields, steps)."""
    W = StepWriter
    pub = b"A1"
    cases: dict[str, tuple[int, dict[str, Any], StepWriter]] = {
        # two clients; one leaves before its answer comes (a departed client)
        "departed-client": (REQREP, {"clients": 2}, W().msg(0, *_req(client, zmtp_front))
                            .msg(1, *_req(client, zmtp_front)).op(LEAVE, 0).echo(2)),
        # the mark: a small hwm, a read past it, the peers drain
        "at-the-mark": (REQREP, {"hwm": 2}, W().many(0, 40, *_req(client, zmtp_front))
                        .echo(1).op(DRAIN, 0).op(TICK, 0, 3).echo(1)),
        "two-servers": (REQREP, {"servers": 2}, W().many(0, 5, *_req(client, zmtp_front))
                        .echo(1).echo(2).op(ECHO, 2, 5)),
        "pipeline": (PIPELINE, {}, W().msg(0, b"job").many(0, 20, b"job2")
                     .msg(0, b"part", b"two").msg(0, bytes(MAX + 1)).ping(0)),
        "pipeline-mark": (PIPELINE, {"hwm": 1}, W().many(0, 200, b"j").op(DRAIN, 1)
                          .op(TICK, 0, 3)),
        "pubsub": (PUBSUB, {"clients": 2}, W().sub(0, b"A").sub(1, b"")
                   .msg(0, b"\x01B").msg(2, pub, b"body").many(2, 50, b"Btopic")
                   .msg(2, b"Z").msg(2, bytes(MAX + 1))),
        "pubsub-mark": (PUBSUB, {"hwm": 1}, W().sub(0, b"").many(1, 100, b"x").op(DRAIN, 0)),
    }
    return cases


def _req(client: bytes, zmtp_front: bool) -> tuple[bytes, ...]:
    return (b"", client) if zmtp_front else (RID + client,)


def crafted() -> Iterator[tuple[str, str, bytes]]:
    """(harness, name, input) of the crafted cases, on each route they apply to."""
    for name, steps in _zmtp_client_cases().items():
        for route in range(len(kernel_zmtp.ROUTES)):
            yield "kernel_zmtp", f"seed-{name}-{route}", encode_input(route=route,
                                                                      steps=steps.bytes())
        if name in ("hello", "envelope", "fair-share", "split", "flip", "mangled-replies",
                    "ping-between", "probe", "two-body-frames"):
            for route in (0, 1):  # (ZeroMQ fronts)
                yield "kernel_curve", f"seed-{name}-{route}", encode_input(
                    route=route, steps=steps.bytes())
    for name, steps in _sp_client_cases().items():
        for route in range(len(kernel_sp.ROUTES)):
            for ipc in (False, True):
                yield "kernel_sp", f"seed-{name}-{route}{'-ipc' if ipc else ''}", \
                    encode_input(route=route, ipc=ipc, steps=steps.bytes())
        if name in ("hello", "hops", "fair-share", "split", "mangled-replies"):
            yield "kernel_curve", f"seed-{name}-2", encode_input(route=2, steps=steps.bytes())
    for harness, routes in (("kernel_zmtp", kernel_zmtp.ROUTES), ("kernel_sp", kernel_sp.ROUTES),
                            ("kernel_curve", kernel_curve.ROUTES)):
        for route, (front, _) in enumerate(routes):
            front_zmtp = front == "zmtp"
            for name, (pattern, fields, steps) in _common_cases(b"req", front_zmtp).items():
                yield harness, f"seed-{name}-{route}", encode_input(
                    pattern=pattern, route=route, steps=steps.bytes(), **fields)


def inputs() -> Iterator[tuple[str, str, bytes]]:
    yield from captured()
    yield from crafted()


__all__ = ["captured", "crafted", "inputs", "zframes"]
