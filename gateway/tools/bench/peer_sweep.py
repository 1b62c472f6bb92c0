"""The bench peer's clients sweep (:mod:`gateway.tools.bench.peer` role ``sweep-client``): one
point of it, ``clients`` connections with one request in flight each, from pyzmq, the native
engine or the byte-stream clients.
"""

from __future__ import annotations

import json
import os
import selectors
import sys
import time
from collections.abc import Callable
from typing import Any

from .peer_base import emit
from .peer_streams import SpStreamClient, ZmtpStreamClient, _Outbox


def _raise_nofile(n: int) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * n + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))


def _sweep_result(samples: list[int], elapsed: float, timed_out: bool) -> dict[str, Any]:
    s = sorted(samples)

    def pct(q: int) -> float | None:
        if not s:
            return None
        return round(s[max(0, min(len(s) - 1, -(-len(s) * q // 100) - 1))] / 1e3, 1)

    return {"n": len(s), "elapsed": elapsed, "timed_out": timed_out, "p50_us": pct(50),
            "p90_us": pct(90), "p99_us": pct(99), "max_us": round(s[-1] / 1e3, 1) if s else None}


def sweep_zmq(url: str, clients: int, n: int, size: int, timeout: float) -> dict[str, Any]:
    """``clients`` DEALER sockets (one connection each), each with one request in flight; one
    untimed round trip each first (every connection handshaken), then ``n`` timed ones."""
    wall0 = time.perf_counter()  # "wall": the whole point, for CPU per second of the processes
    import zmq

    _raise_nofile(clients)
    ctx: Any = zmq.Context()
    ctx.set(zmq.MAX_SOCKETS, clients + 64)
    frames = [b"", b"x" * size]
    socks = []
    for _ in range(clients):
        s = ctx.socket(zmq.DEALER)
        s.linger = 0
        s.connect(url)
        socks.append(s)
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)
    deadline = time.monotonic() + timeout
    clock = time.perf_counter_ns
    sent_at: dict[Any, int] = {}
    for s in socks:  # warm-up: one round trip per client
        s.send_multipart(frames)
    waiting = set(socks)
    while waiting and time.monotonic() < deadline:
        for s, _ in poller.poll(200):
            s.recv_multipart()
            waiting.discard(s)
    if waiting:
        return {"error": f"{len(waiting)} of {clients} clients got no warm-up reply"}
    samples: list[int] = []
    left = n
    t0 = time.perf_counter()
    for s in socks[:n]:
        sent_at[s] = clock()
        s.send_multipart(frames)
        left -= 1
    timed_out = False
    while len(samples) < n:
        ready = poller.poll(200)
        now = clock()
        for s, _ in ready:
            s.recv_multipart()
            samples.append(now - sent_at[s])
            if left > 0:
                left -= 1
                sent_at[s] = clock()
                s.send_multipart(frames)
        if time.monotonic() > deadline:
            timed_out = True
            break
    out = _sweep_result(samples, time.perf_counter() - t0, timed_out)
    out["wall"] = time.perf_counter() - wall0
    for s in socks:
        s.close(0)
    return out


def sweep_native(url: str, clients: int, n: int, size: int, timeout: float) -> dict[str, Any]:
    """``clients`` native REQ sockets (one connection each) in one event loop, each with one
    request in flight (for SP fronts: the native engine speaks both wires)."""
    wall0 = time.perf_counter()  # "wall": the whole point, imports included
    import asyncio

    import gateway
    from gateway.engine.loop import new_event_loop

    _raise_nofile(clients)
    payload = b"x" * size
    clock = time.perf_counter_ns

    async def go() -> dict[str, Any]:
        socks = []
        for _ in range(clients):
            s = gateway.Socket("REQ")
            s.connect(url)
            socks.append(s)
        samples: list[int] = []
        left = [n]

        async def warm(s: Any) -> None:
            await s.send(payload)
            await s.recv()

        async def one(s: Any) -> None:
            while left[0] > 0:
                left[0] -= 1
                a = clock()
                await s.send(payload)
                await s.recv()
                samples.append(clock() - a)

        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(warm(s) for s in socks))
        except TimeoutError:
            return {"error": f"warm-up round trips of {clients} clients over {timeout:.0f}s"}
        t0 = time.perf_counter()
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(one(s) for s in socks))
        except TimeoutError:
            timed_out = True
        out = _sweep_result(samples, time.perf_counter() - t0, timed_out)
        out["wall"] = time.perf_counter() - wall0
        for s in socks:
            s.close()
        return out

    return new_event_loop().run_until_complete(go())


def sweep_stream(url: str, clients: int, n: int, size: int, timeout: float,
                 kind: str = "zmq-stream") -> dict[str, Any]:
    """``clients`` byte-stream connections (``StreamClient``: a handshake each, then requests
    written whole) on one ``selectors`` loop, each with one request in flight: the sweep with a
    client that costs a few microseconds a request, not a library's."""
    wall0 = time.perf_counter()
    _raise_nofile(clients)
    cls = ZmtpStreamClient if kind == "zmq-stream" else SpStreamClient
    payload = b"x" * size
    makers = [cls(url) for _ in range(clients)]  # a handshake each, and its request ids
    conns = [c.connect(timeout) for c in makers]
    for s in conns:
        s.setblocking(False)
    sel = selectors.DefaultSelector()
    want: list[bytes] = [b""] * clients  # the reply each connection waits for: its request
    got: list[bytes] = [b""] * clients
    sent_at = [0] * clients
    for i, s in enumerate(conns):
        sel.register(s, selectors.EVENT_READ, i)
    clock = time.perf_counter_ns
    deadline = time.monotonic() + timeout
    samples: list[int] = []
    outs = [_Outbox(sel, s, i) for i, s in enumerate(conns)]

    def send(i: int) -> None:
        want[i] = req = makers[i].request(payload)
        got[i] = b""
        sent_at[i] = clock()
        outs[i].write(req)  # what the socket does not take now goes when it is writable

    def rounds(total: int, record: bool) -> int:
        left = total - min(total, clients)
        for i in range(min(total, clients)):
            send(i)
        busy = min(total, clients)
        while busy and time.monotonic() < deadline:
            for key, mask in sel.select(0.2):
                i = key.data
                if mask & selectors.EVENT_WRITE:
                    outs[i].flush()
                if not mask & selectors.EVENT_READ:
                    continue
                try:
                    chunk = conns[i].recv(1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    raise ConnectionError(f"connection {i} closed by the peer")
                have = got[i] = got[i] + chunk
                if len(have) < len(want[i]):
                    continue
                if have != want[i]:
                    raise ValueError(f"bad echo on connection {i}: {have[:24]!r}")
                if record:
                    samples.append(clock() - sent_at[i])
                if left > 0:
                    left -= 1
                    send(i)
                else:
                    busy -= 1
        return busy

    try:
        if rounds(clients, False):  # warm-up: one round trip per connection
            return {"error": f"{clients} clients: no warm-up reply within {timeout:.0f}s"}
        t0 = time.perf_counter()
        timed_out = bool(rounds(n, True))
        out = _sweep_result(samples, time.perf_counter() - t0, timed_out)
        out["wall"] = time.perf_counter() - wall0
        return out
    finally:
        sel.close()
        for s in conns:
            s.close()


def run_sweep_client(cfg: dict[str, Any]) -> None:
    """One point of the clients sweep: READY, then one ``{"op": "sweep", ...}`` command."""
    emit("READY", {"url": cfg["url"]})
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        if cmd.pop("op") != "sweep":
            break
        kind = cfg["client"]
        if kind in ("zmq-stream", "sp-stream"):
            cmd["kind"] = kind
            fn: Callable[..., dict[str, Any]] = sweep_stream
        else:
            fn = sweep_zmq if kind == "zmq" else sweep_native
        try:
            emit("RESULT", fn(cfg["url"], **cmd))
        except Exception as exc:  # noqa: BLE001 - reported to the harness
            emit("RESULT", {"error": f"{type(exc).__name__}: {exc}"})
    os._exit(0)
