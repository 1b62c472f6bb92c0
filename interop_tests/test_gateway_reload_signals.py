"""Reloads and signals through the real process: a reload that cannot end the
gateway, ``[gateway] unknown_peers`` applied on reload, signals while stopping."""

from __future__ import annotations

import contextlib
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.procs import LOCAL, free_port
from interop_tests.helpers import wait_until

pytestmark = pytest.mark.timeout(90)


def _readyz(gw: Gateway) -> int:
    try:
        with urllib.request.urlopen(f"http://{LOCAL}:{gw.metrics_port}/readyz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def test_a_wrong_typed_unknown_peers_on_reload_is_refused_and_a_good_one_applied(
        tmp_path: Path) -> None:
    """The review: `unknown_peers = ["ready"]` then SIGHUP raised TypeError and killed the
    gateway; now refused (logged), and a right value is applied to /readyz at once."""
    cfg = tmp_path / "g.toml"
    bridge = (f'[[bridge]]\nname = "p"\nfront = "@sp+tcp://{LOCAL}:0?pattern=pipeline"\n'
              f'back = ">zmq+tcp://{LOCAL}:{free_port()}?backend=pyzmq"\n')
    cfg.write_text('[gateway]\n' + bridge)
    with Gateway("run", str(cfg), "--log-format", "json", metrics=True) as gw:
        assert gw.proc is not None
        assert _readyz(gw) == 503  # back=-1, unknown_peers "waiting"
        cfg.write_text('[gateway]\nunknown_peers = ["ready"]\n' + bridge)
        gw.proc.send_signal(signal.SIGHUP)
        ev = gw.wait_event("config.reload_failed")
        assert "unknown_peers" in ev["error"] and str(cfg) in ev["error"]
        assert gw.alive() and _readyz(gw) == 503
        cfg.write_text('[gateway]\nunknown_peers = "ready"\n' + bridge)
        gw.proc.send_signal(signal.SIGHUP)
        ev = gw.wait_event("config.changed", gateway="unknown_peers")
        assert (ev["unknown_peers"], ev["was"]) == ("ready", "waiting")
        wait_until(lambda: _readyz(gw) == 200, what="/readyz 200 once unknown_peers is ready")
        assert "Traceback" not in gw.stderr


def test_a_second_sigterm_forces_the_workers_exit() -> None:
    """The review: with --workers, the parent's second SIGTERM sat unread while it waited
    for the workers' drain (the grace): now it is passed on and ends the drain."""
    from gateway.tools.harness.peers.servers import NngServer, zmq_client
    from gateway.tools.harness.procs import lib_url

    with NngServer(lambda body: None) as server, Gateway(  # takes requests, never answers
            "bridge", f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{server.port}",
            "--workers", "2", "--grace", "30", "--log-format", "json", ready_timeout=60) as gw, \
            contextlib.ExitStack() as clients:
        gw.wait_event("workers.ready", timeout=30)
        for i in range(6):
            client = clients.enter_context(zmq_client("DEALER", lib_url(gw.front)))
            client.send_multipart([b"", b"held %d" % i])
        wait_until(lambda: len(server.received) == 6, what="the requests at the server")
        assert gw.proc is not None
        gw.proc.send_signal(signal.SIGTERM)
        gw.wait_event("workers.stopping")
        t0 = time.monotonic()
        gw.proc.send_signal(signal.SIGTERM)
        rc = gw.proc.wait(25)
        assert time.monotonic() - t0 < 10, "not forced: the workers drained for the grace"
        assert rc == 0
        gw.wait_event("workers.forced")


def test_signals_after_the_drain_do_not_kill_the_process() -> None:
    """The review: a signal that landed after the drain, before the exit, killed the process
    by the signal (rc -2). Signals sent without a pause until it exits: exit 0 each time."""
    for _ in range(3):
        with Gateway("bridge", f"@sp+tcp://{LOCAL}:0", f">zmq+tcp://{LOCAL}:{free_port()}",
                     "--log-format", "json") as gw:
            assert gw.proc is not None
            deadline = time.monotonic() + 20
            while gw.proc.poll() is None:
                assert time.monotonic() < deadline, "no exit"
                with contextlib.suppress(ProcessLookupError):
                    gw.proc.send_signal(signal.SIGINT)
                time.sleep(0.001)
            assert gw.proc.returncode == 0, gw.stderr[-2000:]
            assert "Traceback" not in gw.stderr
