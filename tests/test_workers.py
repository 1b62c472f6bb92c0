"""``--workers N`` without processes: what can share a port, the workers' arguments and
environment, and the parent's sum of the workers' metrics (the running parent: the interop test
``interop_tests/test_gateway_worker_processes.py``)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.config import BridgeSpec, Limits
from gateway.tools.harness.procs import child_env
from gateway.workers import (
    ENV_FRONTS,
    ENV_WORKER,
    check_shareable,
    front_overrides,
    shared_front,
    sum_metrics,
    worker_argv,
    worker_index,
)

BACK = ">sp+tcp://127.0.0.1:6000"


def Shape(name: str, front: str, back: str, forwarder: str = "auto") -> BridgeSpec:  # noqa: N802
    return BridgeSpec(name, front, back, Limits(), forwarder)


def test_native_tcp_fronts_with_connecting_backs_can_share() -> None:
    ok = [Shape("a", "@zmq+tcp://127.0.0.1:0", BACK),
          Shape("b", "sp+tcp://127.0.0.1:5556?backend=native", ">zmq+tcp://127.0.0.1:6001")]
    assert check_shareable(ok, fixed_ports=False) == []


@pytest.mark.parametrize(("shape", "fixed", "why"), [
    (Shape("lib", "@zmq+tcp://127.0.0.1:5555?backend=pyzmq", BACK), False, "native tcp front"),
    (Shape("nng", "@sp+tcp://127.0.0.1:5555?backend=pynng", BACK), False, "cannot share a port"),
    (Shape("ipc", "@zmq+ipc:///tmp/x.sock", BACK), False, "is ipc"),
    (Shape("dial", ">zmq+tcp://127.0.0.1:5555", BACK), False, "this front connects"),
    (Shape("bound", "@zmq+tcp://127.0.0.1:5555", "@sp+tcp://127.0.0.1:6000"), False,
     "one worker only"),
    (Shape("proxy", "@zmq+tcp://127.0.0.1:5555?backend=pyzmq",
           ">zmq+tcp://127.0.0.1:6000?backend=pyzmq", "proxy"), False, "forwarder=proxy"),
    (Shape("zero", "@zmq+tcp://127.0.0.1:0", BACK), True, "fixed front port"),
])
def test_what_cannot_share_a_port_is_refused_with_the_bridge_and_the_reason(
        shape: BridgeSpec, fixed: bool, why: str) -> None:
    [error] = check_shareable([shape], fixed_ports=fixed)
    assert f"bridge {shape.name!r}" in error and why in error


def test_worker_argv_drops_workers_and_metrics_and_serves_its_own() -> None:
    argv = ["bridge", "@zmq+tcp://127.0.0.1:0", BACK, "--workers", "2", "--metrics",
            "127.0.0.1:9100", "--workers=3", "--metrics=x:1", "--grace", "1"]
    assert worker_argv(argv) == ["bridge", "@zmq+tcp://127.0.0.1:0", BACK, "--grace", "1",
                                 "--metrics", "127.0.0.1:0"]


def test_worker_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_WORKER, raising=False)
    monkeypatch.delenv(ENV_FRONTS, raising=False)
    assert worker_index() is None and front_overrides() == {}
    monkeypatch.setenv(ENV_WORKER, "1/2")
    monkeypatch.setenv(ENV_FRONTS, '{"orders": "zmq+tcp://127.0.0.1:41000"}')
    assert worker_index() == 1
    assert front_overrides() == {"orders": "zmq+tcp://127.0.0.1:41000"}
    monkeypatch.setenv(ENV_FRONTS, "not json")
    assert front_overrides() == {}


W0 = """# HELP gateway_forwarded_messages_total Messages.
# TYPE gateway_forwarded_messages_total counter
gateway_forwarded_messages_total{bridge="b",direction="request"} 3.0
gateway_forwarded_messages_total{bridge="b",direction="reply"} 3.0
# HELP gateway_peers Peers.
# TYPE gateway_peers gauge
gateway_peers{bridge="b",side="front"} 2.0
gateway_peers{bridge="lib",side="front"} -1.0
# HELP gateway_hop_latency_seconds Hop.
# TYPE gateway_hop_latency_seconds histogram
gateway_hop_latency_seconds_bucket{bridge="b",direction="request",le="0.001"} 2.0
gateway_hop_latency_seconds_bucket{bridge="b",direction="request",le="+Inf"} 3.0
gateway_hop_latency_seconds_count{bridge="b",direction="request"} 3.0
gateway_hop_latency_seconds_sum{bridge="b",direction="request"} 0.004
# HELP gateway_build_info Versions.
# TYPE gateway_build_info gauge
gateway_build_info{version="0.1.0"} 1.0
"""
W1 = W0.replace("} 3.0", "} 5.0").replace("} 2.0", "} 4.0").replace("0.004", "0.006")


def _samples(families: list) -> dict:
    from prometheus_client import CollectorRegistry, generate_latest

    class C:
        def collect(self):  # type: ignore[no-untyped-def]
            return families

    reg = CollectorRegistry(auto_describe=False)
    reg.register(C())  # type: ignore[arg-type]
    text = generate_latest(reg).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_the_parent_sums_every_series_over_the_workers() -> None:
    got = _samples(sum_metrics([W0, W1]))
    req = (("bridge", "b"), ("direction", "request"))
    assert got[("gateway_forwarded_messages_total", req)] == 8
    assert got[("gateway_peers", (("bridge", "b"), ("side", "front")))] == 6
    assert got[("gateway_peers", (("bridge", "lib"), ("side", "front")))] == -1  # cannot tell
    assert got[("gateway_hop_latency_seconds_bucket", (*req, ("le", "0.001")))] == 6
    assert got[("gateway_hop_latency_seconds_bucket", (*req, ("le", "+Inf")))] == 8
    assert got[("gateway_hop_latency_seconds_count", req)] == 8
    assert got[("gateway_hop_latency_seconds_sum", req)] == pytest.approx(0.010)
    assert got[("gateway_build_info", (("version", "0.1.0"),))] == 1  # the same, not summed
    assert _samples(sum_metrics([])) == {}


def test_a_silent_worker_keeps_its_counters_in_the_sums_not_its_gauges() -> None:
    """Prometheus must never see a summed counter go down while a worker does not answer."""
    got = _samples(sum_metrics([W0], stale=[W1]))
    req = (("bridge", "b"), ("direction", "request"))
    assert got[("gateway_forwarded_messages_total", req)] == 8  # W1's last 5 stay in
    assert got[("gateway_hop_latency_seconds_bucket", (*req, ("le", "+Inf")))] == 8
    assert got[("gateway_hop_latency_seconds_sum", req)] == pytest.approx(0.010)
    assert got[("gateway_peers", (("bridge", "b"), ("side", "front")))] == 2  # W0's only
    only_stale = _samples(sum_metrics([], stale=[W1]))
    assert only_stale[("gateway_forwarded_messages_total", req)] == 5
    assert not any(name == "gateway_peers" for name, _ in only_stale)


def test_the_open_files_ratio_is_the_workers_maximum_not_their_sum() -> None:
    ratio = "# HELP gateway_open_files_ratio R.\n# TYPE gateway_open_files_ratio gauge\n" \
            "gateway_open_files_ratio {}\n"
    got = _samples(sum_metrics([ratio.format(0.5), ratio.format(0.25), ratio.format(0.5)]))
    assert got[("gateway_open_files_ratio", ())] == 0.5


def test_share_ports_lets_two_tcp_listeners_bind_one_port() -> None:
    import asyncio

    from gateway.plugins import registry
    from gateway.transport import ports_shared, share_ports

    tcp = registry().transports["tcp"]

    async def main() -> None:
        first = tcp.listen("127.0.0.1:0", asyncio.Protocol)
        try:
            with pytest.raises(OSError):  # not shared: the port is taken
                tcp.listen(first.address, asyncio.Protocol)
            share_ports()
            try:
                shared = tcp.listen("127.0.0.1:0", asyncio.Protocol)
                twin = tcp.listen(shared.address, asyncio.Protocol)
                assert twin.address == shared.address
                opt = twin._sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT)  # type: ignore[attr-defined]
                assert opt == 1
                twin.close()
                shared.close()
            finally:
                share_ports(False)
            assert not ports_shared()
        finally:
            first.close()

    asyncio.run(main())


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("argv", "why"), [
    (["--workers", "2", "@zmq+tcp://127.0.0.1:0?backend=pyzmq", BACK], "native tcp front"),
    (["--workers", "0", "@zmq+tcp://127.0.0.1:0", BACK], "--workers must be 1..64"),
])
def test_cli_refuses_workers_it_cannot_run_with_one_line_and_exit_2(argv: list[str],
                                                                     why: str) -> None:
    r = subprocess.run([sys.executable, "-m", "gateway", "bridge", *argv], capture_output=True,
                       text=True, timeout=50, env=child_env())
    assert r.returncode == 2, r.stderr
    assert why in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(("given", "bound", "shown"), [
    ("@zmq+tcp://127.0.0.1:0?allow=10.0.0.0/8&sndbuf=48k", "zmq+tcp://127.0.0.1:4321",
     "@zmq+tcp://127.0.0.1:4321?allow=10.0.0.0/8&sndbuf=48k"),
    ("zmq+tcp://*:0", "zmq+tcp://0.0.0.0:4321", "zmq+tcp://0.0.0.0:4321"),
    ("@sp+tcp://[::1]:0?hwm=5", "sp+tcp://[::1]:4321", "@sp+tcp://[::1]:4321?hwm=5"),
])
def test_the_other_workers_bind_worker_0s_port_with_the_front_as_given(
        monkeypatch: pytest.MonkeyPatch, given: str, bound: str, shown: str) -> None:
    monkeypatch.setenv(ENV_FRONTS, json.dumps({"b": bound}))
    assert shared_front("b", given) == shown
    assert shared_front("other", given) == given
    monkeypatch.delenv(ENV_FRONTS)
    assert shared_front("b", given) == given
