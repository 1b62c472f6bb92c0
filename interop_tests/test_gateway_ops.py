"""Operating the gateway: SIGHUP reloads a config without touching the unchanged bridges,
refuses a broken one, and systemd hears READY, RELOADING, STOPPING and STATUS."""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from pathlib import Path

import pytest
import zmq

from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.servers import NngServer, zmq_client
from gateway.tools.harness.procs import LOCAL, free_port, lib_url

pytestmark = pytest.mark.timeout(90)


def _config(path: Path, server_port: int, bridges: dict[str, int], extra: str = "") -> None:
    text = ""
    for name, port in bridges.items():
        text += (f'[[bridge]]\nname = "{name}"\nfront = "@zmq+tcp://{LOCAL}:{port}"\n'
                 f'back = ">sp+tcp://{LOCAL}:{server_port}"\n')
    path.write_text(text + extra)


def _next_ready(gw: Gateway, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = gw.stdout.get(timeout=max(0.01, deadline - time.monotonic()))
        if line and line.startswith("READY "):
            return line.strip()
    raise AssertionError("no READY line")


def test_sighup_adds_and_removes_bridges_and_the_kept_one_loses_nothing(tmp_path: Path) -> None:
    def slow(body: bytes) -> bytes:
        time.sleep(0.005)  # keeps requests in flight across the reload
        return b"re:" + body

    keep, gone, new = free_port(), free_port(), free_port()
    cfg = tmp_path / "g.toml"
    n = 200
    with NngServer(slow) as server:
        _config(cfg, server.port, {"keep": keep, "gone": gone})
        with Gateway("run", str(cfg), "--log-format", "json", bridges=2) as gw:
            with zmq_client("DEALER", f"tcp://{LOCAL}:{keep}", timeout_ms=10_000,
                            SNDHWM=0, RCVHWM=0) as dealer:
                for i in range(n):
                    dealer.send_multipart([b"", b"k%d" % i])
                time.sleep(0.1)  # some are answered, most still in flight
                _config(cfg, server.port, {"keep": keep, "new": new})
                gw.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
                replies = [dealer.recv_multipart() for _ in range(n)]
            assert sorted(r[1] for r in replies) == sorted(b"re:k%d" % i for i in range(n))
            ready = _next_ready(gw)
            assert f":{new}" in ready and "name=new" in ready
            ev = gw.wait_event("config.reloaded")
            assert ev["added"] == ["new"] and ev["removed"] == ["gone"] and ev["kept"] == ["keep"]
            with zmq_client("REQ", f"tcp://{LOCAL}:{new}") as req:
                req.send(b"hello")
                assert req.recv() == b"re:hello"
            with zmq_client("REQ", f"tcp://{LOCAL}:{gone}", timeout_ms=500) as req:
                req.send(b"anyone?")
                with pytest.raises(zmq.Again):
                    req.recv()
            assert gw.alive()


def test_sighup_with_a_broken_config_keeps_the_old_bridges(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "g.toml"
    with NngServer() as server:
        _config(cfg, server.port, {"only": port})
        with Gateway("run", str(cfg), "--log-format", "json") as gw:
            cfg.write_text('[[bridge]]\nname = "only"\nfront = "zmq+tcp://127.0.0.1"\n'
                           '[limits]\nhop_limit = 99\n')
            gw.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
            ev = gw.wait_event("config.reload_failed")
            assert "g.toml" in ev["error"]
            assert gw.wait_event("config.reload")["result"].startswith("refused")
            with zmq_client("REQ", lib_url(gw.front)) as req:
                req.send(b"still there")
                assert req.recv() == b"re:still there"
            assert gw.alive()


def test_gateway_bridge_survives_sighup() -> None:
    with NngServer() as server, Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{server.port}",
            "--log-format", "json") as gw:
        gw.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
        assert "nothing to reload" in gw.wait_event("config.reload")["result"]
        with zmq_client("REQ", lib_url(gw.front)) as req:
            req.send(b"x")
            assert req.recv() == b"re:x"
        assert gw.terminate() == 0


def test_systemd_notifications(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    listener.settimeout(10)
    cfg = tmp_path / "g.toml"
    try:
        with NngServer() as server:
            _config(cfg, server.port, {"orders": free_port()})
            with Gateway("run", str(cfg), "--log-format", "json",
                         extra_env={"NOTIFY_SOCKET": path}) as gw:
                got = [listener.recv(4096).decode() for _ in range(2)]
                assert got[0] == "READY=1" and got[1].startswith("STATUS=orders front=0 back=")
                gw.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
                seen = []
                while "READY=1" not in seen:
                    seen.append(listener.recv(4096).decode())
                assert seen[0] == "RELOADING=1"
                listener.settimeout(2)  # one STATUS= per reload, not two
                after = [listener.recv(4096).decode()]
                with contextlib.suppress(TimeoutError):
                    listener.settimeout(0.5)
                    after.append(listener.recv(4096).decode())
                assert [m for m in after if m.startswith("STATUS=")] == [after[0]], after
                listener.settimeout(10)
                assert gw.terminate() == 0
                rest = []
                with pytest.raises(TimeoutError):
                    listener.settimeout(1)
                    while True:
                        rest.append(listener.recv(4096).decode())
                assert "STOPPING=1" in rest
    finally:
        listener.close()


def test_connection_lines_name_the_bridge_and_the_peer() -> None:
    with NngServer() as server, Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{server.port}",
            "--log-format", "json", "--name", "orders") as gw:
        with zmq_client("REQ", lib_url(gw.front)) as req:
            req.send(b"x")
            assert req.recv() == b"re:x"
            up = gw.wait_event("pipe.up", socket="orders/front")
        assert up["peer"].startswith(f"{LOCAL}:") and up["peer_type"] == "REQ"
        back = gw.wait_event("pipe.up", socket="orders/back")
        assert back["peer"] == f"{LOCAL}:{server.port}"


@pytest.mark.parametrize("backend", ["native", "pyzmq"])
def test_handshake_ivl_setting_closes_a_silent_client_early(backend: str) -> None:
    """``?handshake_ivl=300`` on the front: a client that connects and never greets is gone
    after about 0.3 s (the default would keep it 10 s, libzmq's 30 s)."""
    with NngServer() as server, Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0?backend={backend}&handshake_ivl=300",
            f">sp+tcp://{LOCAL}:{server.port}") as gw:
        port = int(lib_url(gw.front).rpartition(":")[2])
        with socket.create_connection((LOCAL, port), timeout=8) as silent:
            started = time.monotonic()
            with contextlib.suppress(ConnectionResetError):
                while silent.recv(4096):  # the gateway's greeting, then its close
                    pass
            assert time.monotonic() - started < 5
        with zmq_client("REQ", lib_url(gw.front)) as req:  # a greeting client is served
            req.send(b"x")
            assert req.recv() == b"re:x"
