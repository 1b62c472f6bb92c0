"""`make demo`: the native engine and live bridges between real ZeroMQ and nng peers, then a
small interop matrix on embedded Spark and its report. Everything on 127.0.0.1, bounded in time.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pynng
import zmq

import gateway

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))


def banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def serve_zmq_rep(sock: zmq.Socket, count: int) -> None:
    for _ in range(count):
        sock.send(b"libzmq:" + sock.recv())


def serve_nng_rep(sock: pynng.Socket, count: int) -> None:
    for _ in range(count):
        sock.send(b"nng:" + sock.recv())


async def native_engine() -> None:
    """One native REQ socket, connected to a libzmq REP and an nng REP at once."""
    zrep = zmq.Context.instance().socket(zmq.REP)
    zport = zrep.bind_to_random_port("tcp://127.0.0.1")
    nrep = pynng.Rep0(listen="tcp://127.0.0.1:0", recv_timeout=5000)
    nport = str(nrep.listeners[0].local_address).rsplit(":", 1)[1]
    threads = [threading.Thread(target=serve_zmq_rep, args=(zrep, 3), daemon=True),
               threading.Thread(target=serve_nng_rep, args=(nrep, 3), daemon=True)]
    for t in threads:
        t.start()
    async with gateway.Socket("REQ") as req:
        req.connect(f"zmq+tcp://127.0.0.1:{zport}")
        req.connect(f"sp+tcp://127.0.0.1:{nport}")
        await req.wait_peers(2, timeout=5)
        for i in range(6):
            t0 = time.perf_counter()
            await req.send(b"request-%d" % i)
            reply = await asyncio.wait_for(req.recv(), 5)
            print(f"  native REQ -> {reply.decode():<24} {(time.perf_counter() - t0) * 1e6:7.0f} us")
    for t in threads:
        t.join(5)
    zrep.close(0)
    nrep.close()


def bridges() -> None:
    try:
        from demo_bridges import run_demo
    except ImportError as exc:
        print(f"  (bridge demo unavailable: {exc})")
        return
    run_demo()


def matrix() -> int:
    out = ROOT / "out" / "demo-matrix"  # the results only: a rerun replaces them
    page = ROOT / "out" / "demo-matrix.html"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    run = [sys.executable, "-m", "gateway", "matrix", "run", "--out", str(out), "--select", "@small"]
    rc = subprocess.call(run, cwd=ROOT, env=env)
    report = [sys.executable, "-m", "gateway", "matrix", "report", str(out), "--format", "markdown"]
    subprocess.call(report, cwd=ROOT, env=env)
    html = [sys.executable, "-m", "gateway", "matrix", "report", str(out), "--format", "html",
            "--output", str(page)]
    subprocess.call(html, cwd=ROOT, env=env)
    print(f"\n  HTML report: {page}")
    return rc


def main() -> int:
    banner("1. native engine: one REQ socket, a libzmq REP and an nng REP, load-balanced")
    asyncio.run(native_engine())
    banner("2. live bridges: ZeroMQ clients <-> gateway <-> nng servers, and back; "
           "one port for both; pub/sub; a CURVE front")
    bridges()
    banner("3. a small interop matrix on embedded Spark (local[*]) and its report")
    return matrix()


if __name__ == "__main__":
    raise SystemExit(main())
