"""``--workers 2`` with real peers: two gateway processes share the front port (SO_REUSEPORT),
every request of many clients is answered, the parent's /metrics is the sum of both workers',
SIGHUP and SIGTERM reach both, and a worker that dies takes the set down with exit 1."""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.servers import NngServer, zmq_client
from gateway.tools.harness.procs import LOCAL, free_port, lib_url
from gateway.tools.harness.prometheus import parse as parse_prometheus
from interop_tests.helpers import wait_until

pytestmark = pytest.mark.timeout(120)
CLIENTS = 80
EACH = 5
CONNECTIONS = 24


def _forwarded(text: str) -> float:
    return sum(v for (name, labels), v in parse_prometheus(text).items()
               if name == "gateway_forwarded_messages_total"
               and ("direction", "request") in labels)


def _get(address: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_two_workers_answer_every_client_and_the_parent_sums_their_metrics() -> None:
    with NngServer() as server, Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{server.port}",
            "--workers", "2", "--log-format", "json", metrics=True, ready_timeout=60) as gw:
        assert len(gw.readies) == 1  # READY once, for the set
        ready = gw.wait_event("workers.ready")
        assert ready["workers"] == 2 and len(set(ready["metrics"])) == 2
        clients = [zmq_client("REQ", lib_url(gw.front), timeout_ms=20_000)
                   for _ in range(CLIENTS)]
        socks = [c.__enter__() for c in clients]
        try:
            for round_ in range(EACH):
                for i, s in enumerate(socks):
                    s.send(b"c%d-%d" % (i, round_))
                for i, s in enumerate(socks):
                    assert s.recv() == b"re:c%d-%d" % (i, round_)
        finally:
            for c in clients:
                c.__exit__(None, None, None)
        # each worker took some of the connections, and the parent shows their sum
        own = [_forwarded(_get(address, "/metrics")[1]) for address in ready["metrics"]]
        assert all(n > 0 for n in own) and sum(own) == CLIENTS * EACH, own
        total = gw.metrics()
        assert _forwarded(gw.metrics_text()) == CLIENTS * EACH
        assert total[("gateway_worker_processes", frozenset({("state", "configured")}))] == 2
        assert total[("gateway_worker_processes", frozenset({("state", "answering")}))] == 2
        status, body = _get(f"{LOCAL}:{gw.metrics_port}", "/readyz")
        assert status == 200 and "worker 0: bridge ready" in body and "worker 1: bridge" in body
        assert gw.terminate(timeout=30) == 0
        downs = [ev for ev in gw.events() if ev.get("event") == "bridge.down"]
        assert sorted(ev["worker"] for ev in downs) == [0, 1]


def test_sighup_reaches_every_worker(tmp_path: Path) -> None:
    first, second = free_port(), free_port()
    cfg = tmp_path / "g.toml"

    def write(ports: dict[str, int]) -> None:
        cfg.write_text("".join(f'[[bridge]]\nname = "{name}"\nfront = "@zmq+tcp://{LOCAL}:{p}"\n'
                               f'back = ">sp+tcp://{LOCAL}:{server.port}"\n'
                               for name, p in ports.items()))

    with NngServer() as server:
        write({"one": first})
        with Gateway("run", str(cfg), "--workers", "2", "--log-format", "json",
                     ready_timeout=60) as gw:
            gw.wait_event("workers.ready")
            write({"one": first, "two": second})
            gw.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
            gw.wait_event("config.reloaded", timeout=30, worker=0)
            ev = gw.wait_event("config.reloaded", timeout=30, worker=1)
            assert ev["added"] == ["two"] and ev["kept"] == ["one"]
            with zmq_client("REQ", f"tcp://{LOCAL}:{second}", timeout_ms=20_000) as req:
                req.send(b"new")
                assert req.recv() == b"re:new"
            assert gw.terminate(timeout=30) == 0


def test_a_worker_that_dies_stops_the_set_with_exit_1() -> None:
    with NngServer() as server, Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{server.port}",
            "--workers", "2", "--log-format", "json", ready_timeout=60) as gw:
        pids = gw.wait_event("workers.ready")["pids"]
        os.kill(pids[1], signal.SIGKILL)
        assert gw.proc is not None
        assert gw.proc.wait(30) == 1
        gw.wait_event("workers.exited", worker=1)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the other one was stopped, not orphaned
            try:
                os.kill(pids[0], 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"worker 0 (pid {pids[0]}) still runs")


def _refused(text: str) -> float:
    return sum(v for (name, labels), v in parse_prometheus(text).items()
               if name == "gateway_refused_connections_total"
               and ("reason", "not-allowed") in labels)


def test_every_worker_keeps_the_front_settings() -> None:
    """Workers 1..N-1 bind worker 0's real port: with the front's settings too (they once got
    its READY line's URL, without them: that worker took clients ``?allow=`` refuses, and
    sized no connection as ``?sndbuf=`` said)."""
    import socket

    with NngServer() as server, Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0?allow=10.0.0.0/8&sndbuf=48k",
            f">sp+tcp://{LOCAL}:{server.port}", "--workers", "2", "--log-format", "json",
            metrics=True, ready_timeout=60) as gw:
        ready = gw.wait_event("workers.ready")
        host, port = gw.front.rsplit("//", 1)[1].rsplit(":", 1)
        for _ in range(CONNECTIONS):  # spread over both workers by their source ports
            with socket.create_connection((host, int(port)), timeout=5) as conn:
                conn.settimeout(5)
                assert conn.recv(64) == b""  # refused: closed, never greeted
        wait_until(lambda: _refused(gw.metrics_text()) == CONNECTIONS, timeout=20,
                   what="every connection refused")
        own = [_refused(_get(address, "/metrics")[1]) for address in ready["metrics"]]
        assert all(n > 0 for n in own), own  # (both workers saw some)
        assert gw.terminate(timeout=30) == 0
