"""plugins.pyzmq_adapter.monitor.PeerWatch against real libzmq sockets on 127.0.0.1: who warns
about a refused CURVE handshake, and how fast close() returns."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import zmq
from gateway_plugins.pyzmq_adapter import monitor
from gateway_plugins.pyzmq_adapter.monitor import PeerWatch

from gateway.logging import configure
from gateway.metrics import METRICS


def _wait(pred: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _auth_failures(name: str) -> int:
    return int(METRICS.get("gateway_handshake_failures_total", socket=name, reason="auth"))


@pytest.fixture
def denying_server() -> Iterator[tuple[Any, str, bytes]]:
    """A CURVE ROUTER whose ZAP handler (on its own context) refuses every client."""
    ctx = zmq.Context()
    zap = ctx.socket(zmq.REP)
    zap.linger = 0
    zap.bind("inproc://zeromq.zap.01")
    stop = threading.Event()

    def deny() -> None:
        while not stop.is_set():
            if zap.poll(50):
                m = zap.recv_multipart()
                zap.send_multipart([m[0], m[1], b"400", b"denied", b"", b""])
        zap.close(0)

    thread = threading.Thread(target=deny, daemon=True)
    thread.start()
    pub, sec = zmq.curve_keypair()
    server = ctx.socket(zmq.ROUTER)
    server.linger = 0
    server.curve_server, server.curve_publickey, server.curve_secretkey = True, pub, sec
    port = server.bind_to_random_port("tcp://127.0.0.1")
    try:
        yield server, f"tcp://127.0.0.1:{port}", pub
    finally:
        stop.set()
        thread.join(5)
        server.close(0)
        ctx.term()


def test_a_client_refused_by_its_curve_server_warns_a_server_does_not(
        denying_server: tuple[Any, str, bytes], capsys: pytest.CaptureFixture[str]) -> None:
    """The review: the pyzmq back end refused by its CURVE server logged nothing (the `auth`
    early return assumed a local ZAP handler had said auth.denied)."""
    server, url, server_key = denying_server
    configure("json", "info")
    server_watch = PeerWatch(server, "r39/server")  # a CURVE server: its ZAP handler warns
    ctx = zmq.Context()
    client = ctx.socket(zmq.DEALER)
    client.linger = 0
    pub, sec = zmq.curve_keypair()
    client.curve_serverkey, client.curve_publickey, client.curve_secretkey = server_key, pub, sec
    client_watch = PeerWatch(client, "r39/client")
    try:
        client.connect(url)
        _wait(lambda: _auth_failures("r39/client") >= 1 and _auth_failures("r39/server") >= 1)
    finally:
        client_watch.close()
        server_watch.close()
        client.close(0)
        ctx.term()
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()
             if '"handshake.failed"' in line]
    warned = {line["socket"] for line in lines if line["level"] == "warning"}
    assert "r39/client" in warned and "r39/server" not in warned
    (line,) = [line for line in lines if line["socket"] == "r39/client"]
    assert line["reason"] == "auth" and line["endpoint"] == url


def test_close_returns_without_waiting_for_the_poll() -> None:
    """The review: close() joined a reader that polled every 100 ms (80-117 ms on the event
    loop); it wakes the reader now. A close that waited for the poll would take up to
    POLL_MS: it must take a small part of it (the best of five, against a loaded machine)."""
    bound = monitor.POLL_MS / 1000 / 20
    ctx = zmq.Context()
    times = []
    try:
        for _ in range(5):
            sock = ctx.socket(zmq.DEALER)
            sock.linger = 0
            watch = PeerWatch(sock, "r39/close")
            sock.connect("tcp://127.0.0.1:9")  # a REQ/DEALER back end dialling
            t0 = time.perf_counter()
            watch.close()
            times.append(time.perf_counter() - t0)
            assert not watch._thread.is_alive()
            sock.close(0)
    finally:
        ctx.term()
    assert min(times) < bound, times
