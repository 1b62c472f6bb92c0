"""What every bench peer role shares (:mod:`gateway.tools.bench.peer`): the ``READY``/``RESULT``
lines, bound ports and URLs, the route's keys and certificates, and the two timed loops of one
client (latency, windowed throughput).

Imported by relative imports only, like every ``peer_*`` module: ``peer.py`` runs by path,
without the ``gateway`` package (its docstring).
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def emit(tag: str, payload: dict[str, Any]) -> None:
    sys.stdout.write(f"{tag} {json.dumps(payload, separators=(',', ':'))}\n")
    sys.stdout.flush()


def nng_port(sock: Any) -> int:
    return socket.ntohs(sock.listeners[0].local_address.port)


def zmq_port(sock: Any) -> int:
    import zmq

    return int(sock.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])


def bound_url(port: int) -> str:
    return f"tcp://127.0.0.1:{port}"


def _material(cfg: dict[str, Any]) -> Any:
    """The keys and certificates the harness made (``gateway.tools.harness.security``), by path."""
    from gateway.tools.harness.security import Material

    return Material(Path(cfg["root"]))


def _curve_client(sock: Any, cfg: dict[str, Any]) -> None:
    """A libzmq socket as a CURVE client of the route's server key (before it connects)."""
    from gateway.tools.harness.security import configure_libzmq

    configure_libzmq(sock, None, "CURVE", "client", False, _material(cfg))


def _tls_client(sock: Any, cfg: dict[str, Any]) -> None:
    """An nng socket as a TLS client trusting the route's CA (before it dials)."""
    sock.tls_config = _tls_config(cfg, "client")


def _tls_config(cfg: dict[str, Any], role: str) -> Any:
    from gateway.tools.harness.security import nng_tls_config

    return nng_tls_config(role, False, _material(cfg))


def timed_echo(send: Any, recv: Any, payload: bytes, n: int, warmup: int,
               timeout: float) -> dict[str, Any]:
    """``n`` timed round trips of ``payload`` after ``warmup`` untimed ones (one client)."""
    deadline = time.monotonic() + timeout
    clock = time.perf_counter_ns
    for _ in range(warmup):
        send(payload)
        recv()
    samples = [0] * n
    t0 = time.perf_counter()
    reply = payload
    for i in range(n):
        a = clock()
        send(payload)
        reply = recv()
        samples[i] = clock() - a
        if i & 255 == 0 and time.monotonic() > deadline:
            raise TimeoutError(f"latency slice over {timeout}s after {i} requests")
    if reply != payload:
        raise ValueError(f"bad echo: {reply[:20]!r}")
    return {"samples_ns": samples, "elapsed": time.perf_counter() - t0}


def windowed_tput(send: Callable[[], Any], recv: Callable[[], Any],
                  timeout_error: type[BaseException], window: int, n: int,
                  timeout: float) -> dict[str, Any]:
    """``n`` round trips with ``window`` requests in flight (one client): ``send()`` one
    request, ``recv()`` one reply; stops early at a receive timeout (``timeout_error``) or once
    past ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    t0 = time.perf_counter()
    sent = 0
    for _ in range(min(window, n)):
        send()
        sent += 1
    got = 0
    timed_out = False
    while got < n:
        try:
            recv()
        except timeout_error:
            timed_out = True
            break
        got += 1
        if sent < n:
            send()
            sent += 1
        if got & 1023 == 0 and time.monotonic() > deadline:
            timed_out = True
            break
    return {"n": got, "elapsed": time.perf_counter() - t0, "timed_out": timed_out}
