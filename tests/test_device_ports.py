"""gateway.device.ports: what ``run`` would refuse at bind time, found by ``check`` first
(real sockets on 127.0.0.1; the test-bind never keeps the port)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.config import BridgeSpec
from gateway.device.ports import clashes, in_use


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_bridges_on_one_port_clash_naming_both() -> None:
    specs = [BridgeSpec("a", "@zmq+tcp://127.0.0.1:5680", ">sp+tcp://127.0.0.1:6000"),
             BridgeSpec("b", "@sp+tcp://0.0.0.0:5680", ">zmq+tcp://127.0.0.1:6001")]
    (line,) = clashes(specs, "g.toml")
    assert line.startswith("g.toml: bridge 'b' front:") and "bridge 'a' front" in line


@pytest.mark.parametrize("other", ["@zmq+tcp://127.0.0.2:5680", "@zmq+tcp://127.0.0.1:0",
                                   ">zmq+tcp://127.0.0.1:5680", "@zmq+ipc:///tmp/x"])
def test_no_clash(other: str) -> None:
    specs = [BridgeSpec("a", "@zmq+tcp://127.0.0.1:5680", ">sp+tcp://127.0.0.1:6000"),
             BridgeSpec("b", other, ">zmq+tcp://127.0.0.1:6001"),
             BridgeSpec("c", "@zmq+tcp://127.0.0.1:0", ">zmq+tcp://127.0.0.1:6001")]
    assert clashes(specs) == []


def test_a_bound_back_clashes_with_a_front() -> None:
    specs = [BridgeSpec("a", "@zmq+ipc:///tmp/gw-x", ">sp+tcp://127.0.0.1:6000"),
             BridgeSpec("b", "@sp+tcp://127.0.0.1:7001", "@zmq+ipc:///tmp/gw-x")]
    (line,) = clashes(specs)
    assert "bridge 'b' back" in line and "bridge 'a' front" in line


def test_in_use_names_the_bridge_and_releases_a_free_port(busy_port: int) -> None:
    free = _free_port()
    specs = [BridgeSpec("busy", f"@zmq+tcp://127.0.0.1:{busy_port}", ">sp+tcp://127.0.0.1:1"),
             BridgeSpec("free", f"@zmq+tcp://127.0.0.1:{free}", ">sp+tcp://127.0.0.1:1")]
    (line,) = in_use(specs, "g.toml")
    assert line.startswith("g.toml: bridge 'busy' front: cannot bind")
    assert "in use" in line
    with socket.socket() as s:  # the check let the free port go
        s.bind(("127.0.0.1", free))
        s.listen(1)


def test_in_use_ipc_and_metrics(tmp_path: Path, busy_port: int) -> None:
    path = tmp_path / "held.sock"
    with socket.socket(socket.AF_UNIX) as held:
        held.bind(str(path))
        held.listen(1)
        specs = [BridgeSpec("i", f"@zmq+ipc://{path}", ">sp+tcp://127.0.0.1:1")]
        lines = in_use(specs, metrics=f"127.0.0.1:{busy_port}")
    assert len(lines) == 2
    assert "bridge 'i' front" in lines[0] and "[gateway] metrics" in lines[1]
    assert in_use(specs) == []  # nobody listens any more: a stale file is the engine's to replace


def _config(tmp_path: Path, port_a: int, port_b: int) -> str:
    path = tmp_path / "g.toml"
    path.write_text(f'''
[[bridge]]
name = "one"
front = "@zmq+tcp://127.0.0.1:{port_a}"
back = ">sp+tcp://127.0.0.1:6000"

[[bridge]]
name = "two"
front = "@zmq+tcp://127.0.0.1:{port_b}"
back = ">sp+tcp://127.0.0.1:6001"
''')
    return str(path)


def test_check_refuses_a_duplicate_and_run_says_so_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    config = _config(tmp_path, port, port)
    assert main(["check", config]) == 2
    err = capsys.readouterr().err
    assert "bridge 'two' front" in err and "bridge 'one' front" in err and "Traceback" not in err
    assert main(["run", config]) == 2  # the same rule, before anything binds
    assert "bridge 'two' front" in capsys.readouterr().err


def test_check_ports_refuses_a_port_in_use(tmp_path: Path, busy_port: int,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, _free_port(), busy_port)
    assert main(["check", "--ports", config]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "bridge 'two' front: cannot bind" in line and "in use" in line


def test_check_passes_free_ports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, _free_port(), _free_port())
    assert main(["check", config]) == 0
    assert "ok, 2 bridge(s)" in capsys.readouterr().out


def test_check_without_ports_passes_against_the_running_gateway(
        tmp_path: Path, busy_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    """The review: `check` test-bound every address, so it failed against the gateway running
    on the file (the edit, check, reload workflow); the port test is `--ports` now."""
    config = _config(tmp_path, _free_port(), busy_port)
    assert main(["check", config]) == 0
    assert "ok, 2 bridge(s)" in capsys.readouterr().out


def _two(a: str, b: str, **kw: str) -> list[str]:
    return clashes([BridgeSpec("a", a, ">sp+tcp://127.0.0.1:1"),
                    BridgeSpec("b", b, ">sp+tcp://127.0.0.1:1")], **kw)


@pytest.mark.parametrize(("a", "b", "clash"), [
    ("@zmq+tcp://[::1]:5683", "@zmq+tcp://0.0.0.0:5683", False),  # Linux binds both
    ("@zmq+tcp://127.0.0.1:5683", "@zmq+tcp://0.0.0.0:5683", True),
    ("@zmq+tcp://[::1]:5683", "@sp+tcp://[::]:5683", True),  # dual-stack
    ("@zmq+tcp://127.0.0.1:5683", "@sp+tcp://[::]:5683", True),
    ("@zmq+tcp://127.0.0.1:5683", "@zmq+tcp://localhost:5683", True),  # resolved
    ("@sp+ws://127.0.0.1:5683/x", "@zmq+tcp://127.0.0.1:5683", True),  # ws is a TCP port
    ("@sp+ws://127.0.0.1:5683/x", "@sp+ws://127.0.0.1:5683/y", True),  # native: one a port
    ("@sp+ws://127.0.0.1:5683/x?backend=pynng", "@sp+ws://127.0.0.1:5683/y?backend=pynng",
     False),  # nng shares the port among paths
    ("@sp+ws://127.0.0.1:5683/x?backend=pynng", "@sp+ws://127.0.0.1:5683/x?backend=pynng",
     True),
    ("@zmq+ipc:///tmp/gw-r39/x.sock", "@sp+ipc:///tmp/gw-r39//x.sock", True),  # normalised
    ("@zmq+ipc:///tmp/gw-r39/x.sock", "@sp+ipc:///tmp/gw-r39/./y/../x.sock", True),
])
def test_clashes_as_the_system_binds(a: str, b: str, clash: bool) -> None:
    """The review: 0.0.0.0 clashed with IPv6 hosts; localhost, ws and ipc spellings did not
    clash where `run` fails."""
    assert bool(_two(a, b)) == clash


def test_the_metrics_address_clashes_with_a_bridge() -> None:
    (line,) = _two("@zmq+tcp://127.0.0.1:5684", "@zmq+tcp://127.0.0.1:5685",
                   metrics="localhost:5684")
    assert line.startswith("[gateway] metrics: ") and "bridge 'a' front" in line


def test_check_finds_ipc_paths_that_cannot_be_bound(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.sock"
    plain.write_text("")
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'[[bridge]]\nname = "nodir"\nfront = "@zmq+ipc://{tmp_path}/no/x.sock"\n'
                   'back = ">sp+tcp://127.0.0.1:1"\n'
                   f'[[bridge]]\nname = "file"\nfront = "@zmq+ipc://{plain}"\n'
                   'back = ">sp+tcp://127.0.0.1:1"\n')
    assert main(["check", str(cfg)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert "bridge 'nodir' front" in lines[0] and "no directory" in lines[0]
    assert "bridge 'file' front" in lines[1] and "not a socket" in lines[1]


def test_check_ports_leaves_an_interface_name_to_the_engine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """libzmq binds `tcp://lo:PORT`; the test-bind could not resolve it and failed it."""
    if "lo" not in {name for _, name in socket.if_nameindex()}:
        pytest.skip("no interface lo")
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'[[bridge]]\nname = "lo"\nfront = "@zmq+tcp://lo:{_free_port()}?backend=pyzmq"\n'
                   'back = ">sp+tcp://127.0.0.1:1"\n')
    assert main(["check", "--ports", str(cfg)]) == 0, capsys.readouterr().err
