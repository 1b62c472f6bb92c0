"""The review of issue 39's change, through the real process: a reload that cannot end the
gateway, ``[gateway] unknown_peers`` applied on reload, signals while stopping."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.procs import LOCAL, free_port

pytestmark = pytest.mark.timeout(90)


def _readyz(gw: Gateway) -> int:
    try:
        with urllib.request.urlopen(f"http://{LOCAL}:{gw.metrics_port}/readyz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def _wait(predicate, timeout: float = 10.0, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.02)


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
        _wait(lambda: _readyz(gw) == 200, what="/readyz 200 once unknown_peers is ready")
        assert "Traceback" not in gw.stderr
