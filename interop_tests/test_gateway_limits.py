"""Listener limits on a native front: ``max_connections`` and the ``allow`` networks refuse
real libzmq clients before any byte, count and log it, and the admitted clients are served."""

from __future__ import annotations

import time

import pytest
import zmq

from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.servers import NngServer, zmq_client
from gateway.tools.harness.procs import LOCAL, lib_url

pytestmark = pytest.mark.timeout(90)


def test_max_connections_refuses_the_third_client_and_serves_two() -> None:
    with NngServer() as server, Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0?max_connections=2",
            f">sp+tcp://{LOCAL}:{server.port}", "--log-format", "json", "--name", "capped",
            metrics=True) as gw:
        url = lib_url(gw.front)
        with zmq_client("REQ", url) as a, zmq_client("REQ", url) as b:
            for sock in (a, b):
                sock.send(b"in")
                assert sock.recv() == b"re:in"
            with zmq_client("REQ", url, timeout_ms=500) as c:
                c.send(b"out")
                with pytest.raises(zmq.Again):
                    c.recv()
                refused = gw.wait_event("connection.refused", timeout=10, socket="capped/front",
                                        reason="max-connections")
                assert refused["limit"] == 2
                assert gw.wait_metric("gateway_refused_connections_total", 1,
                                      socket="capped/front", reason="max-connections") >= 1
        # both admitted clients left: a newcomer gets in
        deadline = time.monotonic() + 10
        while True:
            with zmq_client("REQ", url, timeout_ms=1000) as d:
                d.send(b"later")
                try:
                    assert d.recv() == b"re:later"
                    break
                except zmq.Again:
                    assert time.monotonic() < deadline, "the freed slots were not given back"


def test_allow_list_refuses_an_address_outside_it() -> None:
    with NngServer() as server, Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0?allow=10.0.0.0/8", f">sp+tcp://{LOCAL}:{server.port}",
            "--log-format", "json", "--name", "fenced", metrics=True) as gw, \
            zmq_client("REQ", lib_url(gw.front), timeout_ms=500) as req:
        req.send(b"x")
        with pytest.raises(zmq.Again):
            req.recv()
        gw.wait_event("connection.refused", timeout=10, socket="fenced/front",
                      reason="not-allowed")
        assert gw.metric("gateway_refused_connections_total", socket="fenced/front",
                         reason="not-allowed") >= 1
    with NngServer() as server, Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0?allow=127.0.0.0/8,::1",
            f">sp+tcp://{LOCAL}:{server.port}") as gw, \
            zmq_client("REQ", lib_url(gw.front)) as req:
        req.send(b"y")
        assert req.recv() == b"re:y"


def test_library_fronts_refuse_listener_limits() -> None:
    from gateway.tools.harness.procs import run_cli

    done = run_cli("bridge", f"@zmq+tcp://{LOCAL}:0?backend=pyzmq&max_connections=3",
                   f">sp+tcp://{LOCAL}:1")
    assert done.returncode == 2 and "does not support max_connections" in done.stderr
