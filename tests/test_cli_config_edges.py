"""The command line and the config at their edges, in-process: config types, ``--version``
into a closed pipe, "did you mean", the name of a runtime failure's event."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main


@pytest.fixture(autouse=True)
def _no_log_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.logging.configure", lambda *a, **k: None)


@pytest.mark.parametrize("value", ['["ready"]', "1", "{ a = 1 }"])
def test_a_wrong_typed_unknown_peers_is_an_error_naming_file_and_key(
        tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The review: `unknown_peers = ["ready"]` raised TypeError (a traceback, exit 1)."""
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'[gateway]\nunknown_peers = {value}\n[[bridge]]\nname = "x"\n'
                   'front = "@zmq+tcp://127.0.0.1:0"\nback = ">sp+tcp://127.0.0.1:1"\n')
    assert main(["check", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith(f"gateway: error: {cfg}: [gateway] unknown_peers: must be waiting or "
                           "ready, not ")


def test_version_into_a_closed_pipe_is_quiet() -> None:
    """The review: `gateway --version | head -1` sometimes printed a BrokenPipeError
    traceback. The reader is gone before the write here, every time."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "gateway", "--version"], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=60,
                              cwd=Path(__file__).resolve().parents[1])
    finally:
        os.close(write)
    assert done.stderr == ""
    assert done.returncode == 0


def test_did_you_mean_curve_cert_for_curve_secret(capsys: pytest.CaptureFixture[str]) -> None:
    """The review: `curve_secret=` got "did you mean 'curve_server'?"."""
    rc = main(["bridge", "@sp+tcp://127.0.0.1:0", ">zmq+tcp://127.0.0.1:1?curve_secret=abc"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "did you mean 'curve_cert'?" in err and "abc" not in err


def test_a_bridge_that_stops_on_its_own_is_not_a_startup_failure(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The review: "bridge x stopped on its own" (the supervisor, at run time) was reported
    as the JSON event startup.failed."""
    import json

    from gateway.errors import BridgeStopped

    def stopped(args: object) -> int:
        raise BridgeStopped("bridge x stopped on its own")

    monkeypatch.setattr("gateway.cli._cmd_bridge", stopped)
    assert main(["bridge", "@sp+tcp://127.0.0.1:0", ">zmq+tcp://127.0.0.1:1",
                 "--log-format", "json"]) == 2
    (event,) = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert event["event"] == "runtime.failed" and "stopped on its own" in event["error"]
