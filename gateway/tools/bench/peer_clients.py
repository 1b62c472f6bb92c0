"""The bench peer's request-reply clients (:mod:`gateway.tools.bench.peer` roles ``client`` and
``idle-clients``): persistent connections of pyzmq, pynng or the native engine, driven by
commands on stdin; the byte-stream clients are :mod:`gateway.tools.bench.peer_streams`.
"""

from __future__ import annotations

import functools
import json
import os
import struct
import sys
import time
from typing import Any

from .peer_base import _curve_client, _tls_client, emit, timed_echo, windowed_tput
from .peer_streams import SpStreamClient, ZmtpStreamClient


class ZmqClient:
    """REQ for latency, DEALER (empty delimiter + body) with a window for throughput."""

    def __init__(self, url: str) -> None:
        import zmq

        self.zmq = zmq
        self.ctx: Any = zmq.Context.instance()
        self.url = url
        self.secure: Any = None  # CURVE on every socket (set before the first request)
        self.req: Any = None
        self.dealer: Any = None

    def secure_existing(self) -> None:
        pass  # sockets are made on first use, after ``secure`` is set

    def _socket(self, kind: int) -> Any:
        s = self.ctx.socket(kind)
        s.linger = 0
        if self.secure is not None:
            self.secure(s)
        s.connect(self.url)
        return s

    def lat(self, n: int, size: int, timeout: float, warmup: int) -> dict[str, Any]:
        if self.req is None:
            self.req = self._socket(self.zmq.REQ)
        s = self.req
        s.rcvtimeo = int(timeout * 1000)
        payload = b"x" * size
        send, recv = s.send, s.recv
        return timed_echo(send, recv, payload, n, warmup, timeout)

    def tput(self, window: int, n: int, size: int, timeout: float) -> dict[str, Any]:
        if self.dealer is None:
            self.dealer = self._socket(self.zmq.DEALER)
            time.sleep(0.05)
        d = self.dealer
        d.rcvtimeo = int(timeout * 1000)
        d.sndtimeo = int(timeout * 1000)
        frames = [b"", b"x" * size]
        return windowed_tput(functools.partial(d.send_multipart, frames), d.recv_multipart,
                             self.zmq.Again, window, n, timeout)

    def flood(self, n: int, size: int, duration: float) -> dict[str, Any]:
        """Send without reading replies, as fast as the socket accepts, within ``duration``."""
        if self.dealer is None:
            self.dealer = self._socket(self.zmq.DEALER)
            time.sleep(0.1)
        d = self.dealer
        frames = [b"", b"x" * size]
        again = self.zmq.Again
        t0 = time.monotonic()
        deadline = t0 + duration
        sent = 0
        while sent < n and time.monotonic() < deadline:
            try:
                d.send_multipart(frames, flags=self.zmq.NOBLOCK)
                sent += 1
            except again:
                time.sleep(0.001)
        return {"sent": sent, "elapsed": time.monotonic() - t0}


class NngClient:
    """Cooked Req0 for latency; raw Req0 (request id written by hand) for throughput."""

    def __init__(self, url: str) -> None:
        import pynng

        self.pynng = pynng
        self.url = url
        self.secure: Any = None  # TLS on every socket
        self.req = pynng.Req0()
        self.raw: Any = None
        self._dialed = False

    def secure_existing(self) -> None:
        if self.secure is not None:
            self.secure(self.req)
        self._dial()

    def _dial(self) -> None:
        if not self._dialed:
            self._dialed = True
            self.req.dial(self.url, block=False)
        self.rid = 0x80000000 | (os.getpid() & 0xFFFF) << 8

    def lat(self, n: int, size: int, timeout: float, warmup: int) -> dict[str, Any]:
        self._dial()
        s = self.req
        s.recv_timeout = int(timeout * 1000)
        s.send_timeout = int(timeout * 1000)
        payload = b"x" * size
        send, recv = s.send, s.recv
        return timed_echo(send, recv, payload, n, warmup, timeout)

    def tput(self, window: int, n: int, size: int, timeout: float) -> dict[str, Any]:
        pynng = self.pynng
        if self.raw is None:
            self.raw = pynng.Req0(opener=pynng.lib.nng_req0_open_raw)
            if self.secure is not None:
                self.secure(self.raw)
            self.raw.dial(self.url, block=False)
            time.sleep(0.05)
        s = self.raw
        s.recv_timeout = int(timeout * 1000)
        s.send_timeout = int(timeout * 1000)
        payload = b"x" * size
        pack = struct.Struct(">I").pack
        send = s.send
        rid = self.rid

        def send_one() -> None:
            nonlocal rid
            rid = 0x80000000 | ((rid + 1) & 0x7FFFFFFF)
            send(pack(rid) + payload)  # raw Req0: header words go first on the wire

        result = windowed_tput(send_one, s.recv, pynng.Timeout, window, n, timeout)
        self.rid = rid
        return result


class NativeClient:
    """The native engine: one REQ for latency, ``window`` REQ sockets in one loop for throughput."""

    def __init__(self, url: str) -> None:
        import asyncio

        import gateway

        self.asyncio = asyncio
        self.gateway = gateway
        self.url = url
        from gateway.engine.loop import new_event_loop

        self.loop = new_event_loop()  # uvloop when installed, as the CLI runs
        self.req = self.loop.run_until_complete(self._open())
        self.pool: list[Any] = []

    async def _open(self) -> Any:
        s = self.gateway.Socket("REQ")
        s.connect(self.url)
        return s

    def lat(self, n: int, size: int, timeout: float, warmup: int) -> dict[str, Any]:
        asyncio = self.asyncio
        s = self.req
        payload = b"x" * size
        clock = time.perf_counter_ns

        async def go() -> dict[str, Any]:
            send, recv = s.send, s.recv
            async with asyncio.timeout(timeout):
                for _ in range(warmup):
                    await send(payload)
                    await recv()
                samples = [0] * n
                t0 = time.perf_counter()
                reply = payload
                for i in range(n):
                    a = clock()
                    await send(payload)
                    reply = await recv()
                    samples[i] = clock() - a
            if reply != payload:
                raise ValueError(f"bad echo: {reply[:20]!r}")
            return {"samples_ns": samples, "elapsed": time.perf_counter() - t0}

        return self.loop.run_until_complete(go())

    def tput(self, window: int, n: int, size: int, timeout: float) -> dict[str, Any]:
        asyncio = self.asyncio
        payload = b"x" * size

        async def go() -> dict[str, Any]:
            while len(self.pool) < window:
                self.pool.append(await self._open())
            await asyncio.gather(*(p.wait_peers(1, timeout) for p in self.pool[:window]))
            left = [n]
            got = [0]

            async def worker(s: Any) -> None:
                while left[0] > 0:
                    left[0] -= 1
                    await s.send(payload)
                    await s.recv()
                    got[0] += 1

            t0 = time.perf_counter()
            timed_out = False
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*(worker(s) for s in self.pool[:window]))
            except TimeoutError:
                timed_out = True
            return {"n": got[0], "elapsed": time.perf_counter() - t0, "timed_out": timed_out}

        return self.loop.run_until_complete(go())


def run_client(cfg: dict[str, Any]) -> None:
    kind = cfg["client"]
    client: Any = {"zmq": ZmqClient, "nng": NngClient, "native": NativeClient,
                   "zmq-stream": ZmtpStreamClient, "sp-stream": SpStreamClient}[kind](cfg["url"])
    if cfg.get("security"):  # every socket it opens from now on is secured
        client.secure = functools.partial(
            _curve_client if cfg["security"] == "curve" else _tls_client, cfg=cfg)
    getattr(client, "secure_existing", lambda: None)()
    emit("READY", {"url": cfg["url"]})
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        op = cmd.pop("op")
        if op == "quit":
            break
        try:
            emit("RESULT", getattr(client, op)(**cmd))
        except Exception as exc:  # noqa: BLE001 - reported to the harness, which marks the route
            emit("RESULT", {"error": f"{type(exc).__name__}: {exc}"})
            sys.stdout.flush()
    os._exit(0)  # no linger, no context teardown waits


def run_idle_clients(cfg: dict[str, Any]) -> None:
    """``n`` zmq DEALER sockets connect to ``url``; each makes one round trip, then all idle."""
    import resource

    import zmq

    n = int(cfg["n"])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * n + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    ctx: Any = zmq.Context()
    ctx.set(zmq.MAX_SOCKETS, n + 64)
    socks = []
    for _ in range(n):
        s = ctx.socket(zmq.DEALER)
        s.linger = 0
        s.connect(cfg["url"])
        socks.append(s)
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)
    t0 = time.monotonic()
    deadline = t0 + float(cfg.get("timeout", 60))
    for s in socks:
        s.send_multipart([b"", b"hello"])
    pending = set(socks)
    while pending and time.monotonic() < deadline:
        for s, _ in poller.poll(200):
            while True:
                try:
                    s.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                pending.discard(s)
    emit("READY", {"connected": n - len(pending), "n": n, "elapsed": time.monotonic() - t0})
    for line in sys.stdin:
        if line.strip() and json.loads(line).get("op") == "quit":
            break
    os._exit(0)
