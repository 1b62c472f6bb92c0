"""The operator's first hour (issue 39), through the real process: signals that talk, a reload
that says what changed, honest readiness, READY lines, start-up errors in the log format
asked for, and the example scripts passing their options through."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, zmq_client
from gateway.tools.harness.procs import LOCAL, free_port, lib_url
from interop_tests.helpers import wait_until

pytestmark = pytest.mark.timeout(90)
REPO = Path(__file__).resolve().parents[1]


def test_a_signal_says_what_drains_and_a_second_one_ends_it() -> None:
    with NngServer(lambda body: None) as server:  # takes the request, never answers
        args = ["bridge", f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{server.port}",
                "--log-format", "json", "--grace", "30"]
        with Gateway(*args) as gw, zmq_client("REQ", lib_url(gw.front)) as req:
            req.send(b"never answered")
            wait_until(lambda: len(server.received) == 1, what="the request at the server")
            assert gw.proc is not None
            gw.proc.send_signal(signal.SIGINT)
            ev = gw.wait_event("shutdown.draining")
            assert (ev["signal"], ev["in_flight"], ev["grace"]) == ("SIGINT", 1, 30.0)
            t0 = time.monotonic()
            rc = gw.terminate(signal.SIGTERM, timeout=10)  # the second signal: now
            assert rc == 0 and time.monotonic() - t0 < 10  # not the 30 s of grace
            forced = gw.wait_event("shutdown.forced")
            assert forced["signal"] == "SIGTERM" and forced["dropped"] == 1
            drop = gw.wait_event("drop")  # counted with its reason, as every drop
            assert drop["reason"] == "forced-exit"


def test_a_reload_logs_what_changed(tmp_path: Path) -> None:
    cfg = tmp_path / "g.toml"
    port, moved = free_port(), free_port()

    def write(front_port: int, grace: float) -> None:
        cfg.write_text(f'[limits]\ngrace = {grace}\n\n[[bridge]]\nname = "a"\n'
                       f'front = "@zmq+tcp://{LOCAL}:{front_port}"\n'
                       f'back = ">sp+tcp://{LOCAL}:{free_port()}?reconnect_ivl=1s"\n')

    write(port, 2.0)
    with Gateway("run", str(cfg), "--log-format", "json") as gw:
        back = gw.back
        cfg.write_text(cfg.read_text().replace("grace = 2.0", "grace = 5.0")
                       .replace(f":{port}", f":{moved}"))
        assert gw.proc is not None
        gw.proc.send_signal(signal.SIGHUP)
        ev = gw.wait_event("config.changed", bridge="a")
        assert ev["limits.grace"] == "2.0 -> 5.0"
        assert ev["front"] == f"@zmq+tcp://{LOCAL}:{port} -> @zmq+tcp://{LOCAL}:{moved}"
        assert "back" not in ev and back


def _readyz(gw: Gateway) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{LOCAL}:{gw.metrics_port}/readyz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.parametrize("backend", ["native", "pyzmq"])
def test_readyz_is_503_with_nothing_behind(backend: str) -> None:
    """The report's case: examples/gateway.toml's pyzmq back end with no server said 200 (its
    peers were not counted: -1); now counted from libzmq's monitor events."""
    port = free_port()
    args = ["bridge", f"@sp+tcp://{LOCAL}:0",
            f">zmq+tcp://{LOCAL}:{port}?backend={backend}&reconnect_ivl=50ms",
            "--log-format", "json"]
    with Gateway(*args, metrics=True) as gw:
        status, body = _readyz(gw)
        assert status == 503 and body.startswith("bridge waiting front=0 back=0"), body
        with ZmqServer("REP", address=f"tcp://{LOCAL}:{port}"):
            wait_until(lambda: _readyz(gw)[0] == 200, what="/readyz 200 once the server is up")
            assert "back=1" in _readyz(gw)[1]


def test_a_back_end_that_cannot_tell_is_not_ready_unless_told() -> None:
    """pyzmq's asyncio face counts no peers of a pipeline back end (-1): not ready by default,
    ready with --unknown-peers ready."""
    args = ["bridge", f"@sp+tcp://{LOCAL}:0?pattern=pipeline",
            f">zmq+tcp://{LOCAL}:{free_port()}?backend=pyzmq", "--log-format", "json"]
    with Gateway(*args, metrics=True) as gw:
        status, body = _readyz(gw)
        assert status == 503 and "back=-1 (the back end cannot tell its peers)" in body, body
    with Gateway(*args, "--unknown-peers", "ready", metrics=True) as gw:
        assert _readyz(gw)[0] == 200


def test_a_back_end_down_is_visible_and_logged() -> None:
    port = free_port()
    args = ["bridge", f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{port}?reconnect_ivl=50ms",
            "--log-format", "json"]
    with Gateway(*args, metrics=True) as gw, zmq_client("DEALER", lib_url(gw.front)) as client:
        gw.wait_event("backend.down", waiting=0)
        client.send_multipart([b"", b"early"])  # sent while nobody serves
        gw.wait_metric("gateway_waiting_requests", 1, bridge="bridge")
        with NngServer(port=port) as server:
            assert client.recv_multipart() == [b"", b"re:early"]  # it waited, then crossed
            up = gw.wait_event("backend.up")
            assert up["peers"] == 1
            wait_until(lambda: _readyz(gw)[0] == 200, what="/readyz 200 with a server")
            assert gw.metric("gateway_waiting_requests", bridge="bridge") == 0
            assert server.received == [b"early"]
        # the second outage is counted at once (its line waits for the 10 s interval)
        gw.wait_metric("gateway_backend_down_total", 2, bridge="bridge")


EX = REPO / "examples"


def test_bridge_sh_passes_every_option_through() -> None:
    """The report: `bridge.sh FRONT BACK --metrics ...` dropped `--metrics ...` silently."""
    gw = Gateway(f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{free_port()}",
                 "--metrics", f"{LOCAL}:0", "--name", "viash", command=["sh", str(EX / "bridge.sh")],
                 extra_env={"PYTHON": sys.executable})
    with gw:
        assert gw.ready["name"] == "viash" and gw.ready["metrics"].startswith(f"{LOCAL}:")


@pytest.mark.parametrize("script", ["zmq_to_nng_bridge.sh", "nng_to_zmq_bridge.sh"])
def test_the_bridge_scripts_take_ports_then_options(script: str) -> None:
    """`zmq_to_nng_bridge.sh --metrics ...` failed with "bad port '--metrics'": the ports are
    optional, and what is not a port passes through."""
    front = free_port()
    gw = Gateway(str(front), "--metrics", f"{LOCAL}:0", "--log-format", "json",
                 command=["sh", str(EX / script)], extra_env={"PYTHON": sys.executable})
    with gw:
        assert gw.front.endswith(f":{front}") and "metrics" in gw.ready
        assert gw.back.endswith(":6000" if script.startswith("zmq") else ":7000")
