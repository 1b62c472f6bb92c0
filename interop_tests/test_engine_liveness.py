"""The native engine's heartbeats against libzmq (pyzmq), both ways, on 127.0.0.1.

* libzmq's PINGs (ZMQ_HEARTBEAT_IVL/TIMEOUT) are answered: libzmq keeps the connection;
* our PINGs are answered by libzmq: we keep the connection;
* a libzmq peer in a stopped process (SIGSTOP: the kernel keeps the TCP connection, nobody
  answers) is closed after our heartbeat timeout, counted as ``heartbeat-timeout``;
* the TTL a libzmq peer puts in its PINGs (ZMQ_HEARTBEAT_TTL) is honoured: when the process
  stops, we close the connection after the TTL although our own heartbeats are off.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import zmq
import zmq.asyncio

import gateway
from gateway.metrics import METRICS
from gateway.tools.harness.procs import child_env
from interop_tests.helpers import run

pytestmark = pytest.mark.timeout(60)


def closed(reason: str) -> int:
    return METRICS.get("gateway_pipes_closed_total", reason=reason)


async def until(pred: object, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not pred():  # type: ignore[operator]
            await asyncio.sleep(0.01)


def _disconnects(mon: zmq.Socket) -> int:
    from zmq.utils.monitor import parse_monitor_message

    n = 0
    while True:
        try:
            event = parse_monitor_message(mon.recv_multipart(zmq.NOBLOCK))
        except zmq.Again:
            return n
        if event["event"] == zmq.EVENT_DISCONNECTED:
            n += 1


def test_libzmq_pings_are_answered() -> None:
    """libzmq DEALER with HEARTBEAT_IVL 100 ms / TIMEOUT 1 s against a native ROUTER without
    heartbeats: over 3 s (30 PINGs) libzmq never drops the connection, because every PING gets
    its PONG. (A timeout of 1 s, not less: libzmq's own thread counts it, and a loaded test
    machine can hold this process's loop for a few hundred milliseconds.)"""

    async def main() -> None:
        ctx = zmq.Context()
        dealer = ctx.socket(zmq.DEALER)
        mon = None
        try:
            dealer.linger = 0
            dealer.setsockopt(zmq.HEARTBEAT_IVL, 100)
            dealer.setsockopt(zmq.HEARTBEAT_TIMEOUT, 1000)
            dealer.setsockopt(zmq.ROUTING_ID, b"lib")
            mon = dealer.get_monitor_socket(zmq.EVENT_DISCONNECTED)
            async with gateway.Socket("ROUTER") as router:
                dealer.connect(router.bind("zmq+tcp://127.0.0.1:0").replace("zmq+", ""))
                await router.wait_peers(1)
                await asyncio.sleep(3.0)
                assert _disconnects(mon) == 0
                assert router.peers == 1
                dealer.send(b"still here")
                msg = await asyncio.wait_for(router.recv_msg(), 5)
                assert msg.hops == (b"lib",) and msg.body == (b"still here",)
        finally:
            if mon is not None:
                dealer.disable_monitor()
                mon.close(0)
            dealer.close(0)
            ctx.term()

    run(main())


def test_libzmq_without_heartbeat_answers_ours() -> None:
    """A native DEALER with heartbeats (50 ms, timeout 500 ms) against a libzmq ROUTER that sets
    none: libzmq answers our PINGs (libzmq >= 4.2 always does), so the idle pipe stays up. The
    PONG comes from libzmq's I/O thread, which a loaded machine may leave unscheduled for a
    while: the timeout is ten intervals (at 150 ms, one run in a heavily loaded one failed)."""

    async def main() -> None:
        ctx = zmq.asyncio.Context()
        router = ctx.socket(zmq.ROUTER)
        try:
            router.linger = 0
            port = router.bind_to_random_port("tcp://127.0.0.1")
            before = closed("heartbeat-timeout")
            async with gateway.Socket("DEALER", identity=b"native", heartbeat_ivl=0.05,
                                      heartbeat_timeout=0.5) as dealer:
                dealer.connect(f"zmq+tcp://127.0.0.1:{port}")
                await dealer.wait_peers(1)
                await asyncio.sleep(2.5)  # 50 intervals, 5 timeouts
                assert closed("heartbeat-timeout") == before
                assert dealer.peers == 1
                await dealer.send(b"hi")
                assert await asyncio.wait_for(router.recv_multipart(), 5) == [b"native", b"hi"]
        finally:
            router.close(0)
            ctx.term()

    run(main())


_PEER = """
import sys, time, zmq
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.linger = 0
ivl, ttl = int(sys.argv[2]), int(sys.argv[3])
if ivl:
    s.setsockopt(zmq.HEARTBEAT_IVL, ivl)
if ttl:
    s.setsockopt(zmq.HEARTBEAT_TTL, ttl)
s.connect(sys.argv[1])
s.send(b"hello")
print("sent", flush=True)
time.sleep(60)
"""


@contextlib.contextmanager
def libzmq_peer(url: str, ivl_ms: int = 0, ttl_ms: int = 0) -> Iterator[subprocess.Popen[str]]:
    """A libzmq DEALER in its own process (so that SIGSTOP freezes it and nothing else)."""
    proc = subprocess.Popen([sys.executable, "-c", _PEER, url, str(ivl_ms), str(ttl_ms)],
                            env=child_env(), stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(5)


@pytest.mark.parametrize(("ours", "peer_ttl_ms", "reason_waits"), [
    (0.1, 0, "our heartbeat timeout (0.5 s)"),
    (0.0, 500, "the peer's TTL (0.5 s), our heartbeats off"),
])
def test_a_stopped_libzmq_peer_is_closed(ours: float, peer_ttl_ms: int, reason_waits: str) -> None:
    async def main() -> None:
        async with gateway.Socket("ROUTER", heartbeat_ivl=ours, heartbeat_timeout=0.5) as router:
            url = router.bind("zmq+tcp://127.0.0.1:0").replace("zmq+", "")
            before = closed("heartbeat-timeout")
            with libzmq_peer(url, ivl_ms=100 if peer_ttl_ms else 0, ttl_ms=peer_ttl_ms) as proc:
                msg = await asyncio.wait_for(router.recv_msg(), 15)  # the process is up
                assert msg.body == (b"hello",)
                if peer_ttl_ms:  # the peer's PING (its TTL) has come: our TTL wait runs
                    await until(lambda: any(p.liveness._ttl_wait is not None
                                            for p in router.endpoints.pipes), 10.0)
                os.kill(proc.pid, signal.SIGSTOP)
                t0 = time.monotonic()
                await until(lambda: closed("heartbeat-timeout") == before + 1, 5.0)
                took = time.monotonic() - t0
                await until(lambda: router.peers == 0, 2.0)
                # a PING after at most 0.1 s, then 0.5 s; or the TTL after the peer's last PING
                # (up to an interval before the stop; a loaded machine may send it later, or
                # take t0 late: the lower bound only says it was a wait, not an at-once close)
                assert 0.2 <= took < 3.0, (reason_waits, took)

    run(main())
