"""The bench peer's pub/sub fan-out and pipeline roles (``pattern-*``, driven by
:mod:`gateway.tools.bench.patterns`): library publishers, subscribers, pushers and pullers, and
the ``zmq.proxy`` / ``nng_device`` middles between them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from .peer_base import bound_url, emit, nng_port, zmq_port
from .peer_servers import run_nng_device

END = b"END"


def commands(op: str) -> Iterator[dict[str, Any]]:
    """The harness's commands on stdin (one JSON object per line) while they say ``op``."""
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        if cmd.get("op") != op:
            return
        yield cmd


def _plain_socket(wire: str, kind: str, hwm: int = 1000) -> Any:
    """A cooked library socket of ``kind`` (PUB SUB PUSH PULL) on ``wire`` (zmq, sp), queues
    of ``hwm`` messages (nng: at most 8192)."""
    if wire == "zmq":
        import zmq

        ctx: Any = zmq.Context.instance()
        s = ctx.socket(getattr(zmq, kind))
        s.linger = 0
        s.sndhwm = s.rcvhwm = hwm
        return s
    import pynng

    buf = min(hwm, 8192)
    if kind in ("PUB", "PUSH"):
        return {"PUB": pynng.Pub0, "PUSH": pynng.Push0}[kind](send_buffer_size=buf)
    return {"SUB": pynng.Sub0, "PULL": pynng.Pull0}[kind](recv_buffer_size=buf)


def _bind_any(wire: str, s: Any) -> str:
    if wire == "zmq":
        s.bind("tcp://127.0.0.1:*")
        return bound_url(zmq_port(s))
    s.listen("tcp://127.0.0.1:0")
    return bound_url(nng_port(s))


def _dial(wire: str, s: Any, url: str) -> None:
    if wire == "zmq":
        s.connect(url)
    else:
        s.dial(url, block=False)


def serve_pattern_pub(cfg: dict[str, Any]) -> None:
    """A publisher (binds). ``{"op": "go", "n", "size", "warm"}``: ``warm`` seconds of ``w.``
    messages (subscriptions settle), ``n`` ``d.`` messages as fast as it can, then ``END``
    markers for a second. RESULT ``{"sent", "elapsed"}``."""
    wire = cfg["wire"]
    s = _plain_socket(wire, "PUB", int(cfg.get("hwm", 1000)))
    emit("READY", {"url": _bind_any(wire, s)})
    for cmd in commands("go"):
        end = time.monotonic() + float(cmd.get("warm", 1.0))
        while time.monotonic() < end:
            s.send(b"w.")
            time.sleep(0.002)
        body = b"d." + b"x" * max(0, int(cmd["size"]) - 2)
        send = s.send
        t0 = time.perf_counter()
        for _ in range(int(cmd["n"])):
            send(body)
        elapsed = time.perf_counter() - t0
        for _ in range(100):
            send(END)
            time.sleep(0.01)
        emit("RESULT", {"sent": int(cmd["n"]), "elapsed": elapsed})
    os._exit(0)


def run_pattern_subs(cfg: dict[str, Any]) -> None:
    """``count`` subscribers of ``d.`` and ``END`` on ``url``. ``{"op": "collect", "timeout"}``:
    count ``d.`` messages per socket until each saw END (or the timeout). RESULT ``{"received",
    "per_socket", "elapsed"}`` (first to last ``d.`` message over all sockets)."""
    import select as _select

    wire, n = cfg["wire"], int(cfg["count"])
    socks = [_plain_socket(wire, "SUB", int(cfg.get("hwm", 1000))) for _ in range(n)]
    for s in socks:
        s.subscribe(b"d.")
        s.subscribe(END)
        _dial(wire, s, cfg["url"])
    emit("READY", {"count": n})
    for cmd in commands("collect"):
        counts = [0] * n
        done = [False] * n
        first = last = 0.0
        deadline = time.monotonic() + float(cmd["timeout"])

        def note(i: int, m: bytes, counts: list[int] = counts, done: list[bool] = done) -> None:
            nonlocal first, last
            if m[:2] == b"d.":
                now = time.perf_counter()
                first = first or now
                last = now
                counts[i] += 1
            elif m == END:
                done[i] = True

        if wire == "zmq":
            import zmq

            poller = zmq.Poller()
            for s in socks:
                poller.register(s, zmq.POLLIN)
            index = {s: i for i, s in enumerate(socks)}
            while not all(done) and time.monotonic() < deadline:
                for s, _ in poller.poll(100):
                    with contextlib.suppress(zmq.Again):
                        while True:
                            note(index[s], s.recv(zmq.NOBLOCK))
        else:
            import pynng

            poll = _select.poll()
            by_fd = {}
            for i, s in enumerate(socks):
                by_fd[s.recv_fd] = i
                poll.register(s.recv_fd, _select.POLLIN)
            while not all(done) and time.monotonic() < deadline:
                for fd, _ in poll.poll(100):
                    with contextlib.suppress(pynng.TryAgain):
                        while True:
                            note(by_fd[fd], socks[by_fd[fd]].recv(block=False))
        emit("RESULT", {"received": sum(counts), "per_socket": counts,
                        "elapsed": max(last - first, 1e-9), "complete": all(done)})
    os._exit(0)


def serve_pattern_pull(cfg: dict[str, Any]) -> None:
    """A PULL server (binds). ``{"op": "collect", "n", "timeout"}``: RESULT ``{"received",
    "elapsed"}`` from its first message to its ``n``-th."""
    wire = cfg["wire"]
    s = _plain_socket(wire, "PULL", int(cfg.get("hwm", 1000)))
    emit("READY", {"url": _bind_any(wire, s)})
    for cmd in commands("collect"):
        n, got, t0 = int(cmd["n"]), 0, 0.0
        deadline = time.monotonic() + float(cmd["timeout"])
        if wire == "zmq":
            s.rcvtimeo = 200
            import zmq

            timeout_exc: Any = zmq.Again
        else:
            import pynng

            s.recv_timeout = 200
            timeout_exc = pynng.Timeout
        while got < n and time.monotonic() < deadline:
            try:
                s.recv()
            except timeout_exc:
                continue
            if not got:
                t0 = time.perf_counter()
            got += 1
        emit("RESULT", {"received": got, "elapsed": max(time.perf_counter() - t0, 1e-9)})
    os._exit(0)


def run_pattern_push(cfg: dict[str, Any]) -> None:
    """A PUSH client. ``{"op": "go", "n", "size"}``: ``n`` blocking sends. RESULT ``{"sent",
    "elapsed"}``."""
    wire = cfg["wire"]
    s = _plain_socket(wire, "PUSH", int(cfg.get("hwm", 1000)))
    _dial(wire, s, cfg["url"])
    emit("READY", {"url": cfg["url"]})
    for cmd in commands("go"):
        body = b"x" * int(cmd["size"])
        t0 = time.perf_counter()
        for _ in range(int(cmd["n"])):
            s.send(body)
        emit("RESULT", {"sent": int(cmd["n"]), "elapsed": time.perf_counter() - t0})
    os._exit(0)


def serve_pattern_proxy(cfg: dict[str, Any]) -> None:
    """libzmq's ``zmq.proxy``: XSUB (dials the publisher) -> XPUB (subscribers connect), or
    PULL (pushers connect) -> PUSH (dials the puller)."""
    import zmq

    ctx: Any = zmq.Context.instance()
    pubsub = cfg["pattern"] == "pubsub"
    front = ctx.socket(zmq.XPUB if pubsub else zmq.PULL)
    back = ctx.socket(zmq.XSUB if pubsub else zmq.PUSH)
    front.linger = back.linger = 0
    hwm = int(cfg.get("hwm", 1000))
    for sock in (front, back):
        sock.sndhwm = sock.rcvhwm = hwm
    front.bind("tcp://127.0.0.1:*")
    back.connect(cfg["upstream"])
    emit("READY", {"url": bound_url(zmq_port(front))})
    if pubsub:
        zmq.proxy(back, front)
    else:
        zmq.proxy(front, back)


def serve_pattern_device(cfg: dict[str, Any]) -> None:
    """nng_device between raw sockets: raw sub0 (dials the publisher) -> raw pub0, or raw
    pull0 (pushers dial it) -> raw push0 (dials the puller). Raw sub0 takes everything."""
    import pynng

    lib = pynng.lib
    if cfg["pattern"] == "pubsub":
        front = pynng.Pub0(opener=lib.nng_pub0_open_raw)
        back = pynng.Sub0(opener=lib.nng_sub0_open_raw)
    else:
        front = pynng.Pull0(opener=lib.nng_pull0_open_raw)
        back = pynng.Push0(opener=lib.nng_push0_open_raw)
    buf = min(int(cfg.get("hwm", 1000)), 8192)
    for sock in (front, back):
        for option in ("send_buffer_size", "recv_buffer_size"):
            try:
                setattr(sock, option, buf)
            except Exception:  # noqa: BLE001 - the protocol has no such buffer
                pass
    front.listen("tcp://127.0.0.1:0")
    back.dial(cfg["upstream"], block=False)
    run_nng_device(front, back)
