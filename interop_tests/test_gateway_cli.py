"""The CLI contract of DESIGN section 8, on the real process.

* SIGTERM and SIGINT: drain, exit 0 within 5 s (a reply in flight still crosses);
* bad input (a bad URL, an unknown scheme, a port in use, a bad or unreadable config): exactly
  one line on stderr, exit code 2, no traceback;
* ``gateway run CONFIG.toml`` with two bridges, and the shipped ``examples/gateway.toml``;
* ``--metrics`` serves Prometheus text.
"""

from __future__ import annotations

import re
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from gateway.tools.harness.gateway import Gateway, local_bridge, url
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, nng_req, zmq_client
from gateway.tools.harness.procs import ANY, LOCAL, free_port, lib_url, run_cli
from gateway.tools.harness.procs import SOURCE_ROOT as REPO
from gateway.tools.harness.prometheus import parse as parse_prometheus
from interop_tests.helpers import backends

pytestmark = pytest.mark.timeout(60)


# ---------------------------------------------------------------------------------------------
# signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@backends
def test_signal_exits_0_within_5s(sig: int, front_be: str, back_be: str) -> None:
    with NngServer() as server, local_bridge(
            "zmq", "sp", server.port, front_be=front_be, back_be=back_be) as gw:
        with zmq_client("REQ", lib_url(gw.front)) as req:  # it has really been working
            req.send(b"x")
            assert req.recv() == b"re:x"
        t0 = time.monotonic()
        assert gw.terminate(sig, timeout=5) == 0
        assert time.monotonic() - t0 < 5
        assert "Traceback" not in gw.stderr
        assert gw.wait_event("bridge.down", timeout=0)


@pytest.mark.parametrize(("front_be", "back_be"), [("lib", "lib"), ("native", "native")])
def test_sigterm_drains_the_reply_in_flight(front_be: str, back_be: str) -> None:
    """SIGTERM while the server is still working: the reply still reaches the client."""
    got_it, release = threading.Event(), threading.Event()

    def handler(frames: list[bytes]) -> list[bytes]:
        got_it.set()
        release.wait(5)  # answered only after the SIGTERM
        return [b"re:" + frames[-1]]

    with ZmqServer("REP", handler) as server, local_bridge(
            "sp", "zmq", server.port, "--grace", "3", front_be=front_be, back_be=back_be,
            metrics=True) as gw:
        with nng_req(lib_url(gw.front)) as req:
            req.send(b"in flight")
            assert got_it.wait(5)
            # the poller thread counts a request in flight just after its send
            gw.wait_metric("gateway_in_flight_requests", 1)
            assert gw.proc is not None
            gw.proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)  # the gateway is draining now, with the reply still to come
            release.set()
            assert req.recv() == b"re:in flight"
        assert gw.proc.wait(5) == 0


def test_idle_sigterm_with_hung_server_bounded_by_grace() -> None:
    """A request that will never be answered holds the drain for --grace at most."""
    with NngServer(lambda body: None) as server, local_bridge(
            "zmq", "sp", server.port, "--grace", "1") as gw:
        with zmq_client("DEALER", lib_url(gw.front)) as dealer:
            dealer.send_multipart([b"", b"never answered"])
            server.wait_received(1)
            t0 = time.monotonic()
            assert gw.terminate(signal.SIGTERM, timeout=5) == 0
            assert time.monotonic() - t0 < 4
        assert gw.wait_event("bridge.drain", timeout=0)["unanswered"] == 1


# ---------------------------------------------------------------------------------------------
# bad input: one line, exit 2, no traceback


_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z \[(info|debug)")


def _one_line_exit_2(*args: str, contains: str = "", logs_before: bool = False) -> str:
    r = run_cli(*args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    if logs_before:  # what happened before the failure was logged (console format)
        assert all(_LOG_LINE.match(line) for line in lines[:-1]), r.stderr
        lines = lines[-1:]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("gateway: error: "), lines[0]
    assert contains.lower() in lines[0].lower(), lines[0]
    assert "READY" not in r.stdout
    return lines[0]


@pytest.mark.parametrize(("front", "back", "contains"), [
    ("zmq+tcp://127.0.0.1", "sp+tcp://127.0.0.1:1", "host:port"),
    ("zmq+tcp://127.0.0.1:99999", "sp+tcp://127.0.0.1:1", "bad port"),
    ("zmq+tcp://127.0.0.1:abc", "sp+tcp://127.0.0.1:1", "bad port"),
    ("tcp://127.0.0.1:5555", "sp+tcp://127.0.0.1:1", "wire"),
    ("zmq+tcp://", "sp+tcp://127.0.0.1:1", "address"),
    ("no-scheme-at-all", "sp+tcp://127.0.0.1:1", "bad endpoint"),
    ("zmq+tcp://127.0.0.1:0", "sp+tcp://127.0.0.1:1?backend=bogus", "unknown backend"),
    ("zmq+tcp://127.0.0.1:0", "sp+tcp://127.0.0.1:1?color=red", "unknown option"),
    ("zmq+tcp://127.0.0.1:0?backend=pynng", "sp+tcp://127.0.0.1:1", "speaks sp"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None)
def test_bad_url_exit_2_one_line(front: str, back: str, contains: str) -> None:
    _one_line_exit_2("bridge", front, back, contains=contains)


@pytest.mark.parametrize(("front", "contains"), [
    ("foo+tcp://127.0.0.1:0", "unknown wire"),
    ("zmq+udp://127.0.0.1:0", "unknown transport"),
    ("sp+udp://127.0.0.1:0", "unknown transport"),
])
def test_unknown_scheme_exit_2_one_line(front: str, contains: str) -> None:
    _one_line_exit_2("bridge", front, "sp+tcp://127.0.0.1:1", contains=contains)


@pytest.fixture
def busy_port() -> object:
    with socket.socket() as s:
        s.bind((LOCAL, 0))
        s.listen(1)
        yield s.getsockname()[1]


@pytest.mark.parametrize("wire", ["zmq", "sp"])
@pytest.mark.parametrize("backend", ["lib", "native"])
def test_front_port_in_use_exit_2(busy_port: int, wire: str, backend: str) -> None:
    other = "sp" if wire == "zmq" else "zmq"
    line = _one_line_exit_2("bridge", url(wire, f"{LOCAL}:{busy_port}", backend),
                            url(other, f"{LOCAL}:1"), contains=str(busy_port))
    assert "cannot bind" in line or "in use" in line.lower()


@pytest.mark.parametrize(("front_be", "back_be"), [("lib", "lib"), ("native", "native"),
                                                   ("lib", "native")])
def test_back_bind_port_in_use_exit_2(busy_port: int, front_be: str, back_be: str) -> None:
    """``@`` on the back makes it bind: the front is already open and must be closed cleanly.

    The native engine logs its front's ``listening`` line (info) before the back fails: the
    error is still the one ``gateway: error:`` line, last, and nothing else but log lines."""
    line = _one_line_exit_2("bridge", url("zmq", ANY, front_be),
                            url("sp", f"{LOCAL}:{busy_port}", back_be, "@"),
                            contains=str(busy_port), logs_before=front_be == "native")
    assert line.count("cannot bind") == 1, line


def test_metrics_port_in_use_exit_2(busy_port: int) -> None:
    _one_line_exit_2("bridge", url("zmq", ANY), url("sp", f"{LOCAL}:1"),
                     "--metrics", f"{LOCAL}:{busy_port}", contains="metrics")


@pytest.mark.parametrize(("option", "value"), [("--hop-limit", "16"), ("--pending-tokens", "0"),
                                               ("--token-ttl", "-1"), ("--grace", "0")])
def test_bad_limit_exit_2(option: str, value: str) -> None:
    _one_line_exit_2("bridge", url("zmq", ANY), url("sp", f"{LOCAL}:1"), option, value)


@pytest.mark.parametrize(("text", "contains"), [
    (None, "cannot read"),  # no such file
    ("", "cannot read"),  # a directory where the file should be
    ("[[bridge]\nfront = 1", "config.toml"),  # not TOML
    ("[gateway]\nlog_format = 'console'\n", "no [[bridge]]"),  # (json: test_cli_operator)
    ("[[bridge]]\nfront = '@zmq+tcp://127.0.0.1:0'\n", "back: missing"),
    ("[[bridge]]\nfront = 'zmq+tcp://127.0.0.1'\nback = 'sp+tcp://127.0.0.1:1'\n", "host:port"),
    ("[[bridge]]\nfront = 'zmq+udp://127.0.0.1:0'\nback = 'sp+tcp://127.0.0.1:1'\n",
     "unknown transport"),
    ("[limits]\nhop_limit = 99\n[[bridge]]\nfront = 'zmq+tcp://127.0.0.1:0'\n"
     "back = 'sp+tcp://127.0.0.1:1'\n", "hop_limit"),
    ("[nonsense]\n[[bridge]]\nfront = 'zmq+tcp://127.0.0.1:0'\nback = 'sp+tcp://127.0.0.1:1'\n",
     "unknown section"),
], ids=["missing", "directory", "not-toml", "no-bridge", "no-back", "bad-url", "bad-scheme",
        "bad-limit", "unknown-section"])
def test_bad_config_exit_2_one_line(tmp_path: Path, text: str | None, contains: str) -> None:
    path = tmp_path / "config.toml"
    if text == "":
        path.mkdir()
    elif text is not None:
        path.write_text(text)
    _one_line_exit_2("run", str(path), contains=contains)


# ---------------------------------------------------------------------------------------------
# gateway run CONFIG.toml


def test_run_config_with_two_bridges(tmp_path: Path) -> None:
    metrics_port = free_port()
    with NngServer() as nng_server, ZmqServer("ROUTER") as zmq_server:
        config = tmp_path / "gateway.toml"
        config.write_text(f"""
[gateway]
log_format = "json"
metrics = "{LOCAL}:{metrics_port}"

[limits]
pending_tokens = 1000
token_ttl = 5.0
grace = 1.0

[[bridge]]
name = "orders"
front = "@zmq+tcp://{LOCAL}:0"
back = ">sp+tcp://{LOCAL}:{nng_server.port}"

[[bridge]]
name = "legacy"
front = "@sp+tcp://{LOCAL}:0?backend=native"
back = ">zmq+tcp://{LOCAL}:{zmq_server.port}?backend=native"
""")
        with Gateway("run", str(config), bridges=2, metrics_port=metrics_port) as gw:
            by_name = {r["name"]: r for r in gw.readies}
            assert set(by_name) == {"orders", "legacy"}
            with zmq_client("DEALER", lib_url(by_name["orders"]["front"])) as dealer:
                dealer.send_multipart([b"e1", b"", b"to nng"])
                assert dealer.recv_multipart() == [b"e1", b"", b"re:to nng"]
            with nng_req(lib_url(by_name["legacy"]["front"])) as req:
                req.send(b"to zmq")
                assert req.recv() == b"re:to zmq"
            for name in ("orders", "legacy"):
                # the client can have its reply a moment before the counter moves
                assert gw.wait_metric("gateway_forwarded_messages_total", 1, bridge=name,
                                      direction="reply") == 1
            assert {e["bridge"] for e in gw.events() if e.get("event") == "bridge.up"} == {
                "orders", "legacy"}
            assert gw.terminate(signal.SIGTERM) == 0


def test_shipped_example_config_runs(tmp_path: Path) -> None:
    """examples/gateway.toml as shipped, with its fixed ports moved to free ones."""
    text = (REPO / "examples" / "gateway.toml").read_text()
    ports = sorted(set(re.findall(r"127\.0\.0\.1:(\d+)", text)))
    mapping = {p: str(free_port()) for p in ports}
    text = re.sub(r"127\.0\.0\.1:(\d+)", lambda m: f"127.0.0.1:{mapping[m[1]]}", text)
    config = tmp_path / "gateway.toml"
    config.write_text(text)
    nng_port, zmq_port = int(mapping["6000"]), int(mapping["7000"])
    with NngServer(port=nng_port), ZmqServer("REP", address=f"tcp://{LOCAL}:{zmq_port}"), \
            Gateway("run", str(config), bridges=2,
                    metrics_port=int(mapping["9100"])) as gw:
        assert {r["name"] for r in gw.readies} == {"zmq-to-nng", "nng-to-zmq"}
        with zmq_client("REQ", f"tcp://{LOCAL}:{mapping['5555']}") as req:
            req.send(b"a")
            assert req.recv() == b"re:a"
        with nng_req(f"tcp://{LOCAL}:{mapping['6001']}") as nreq:
            nreq.send(b"b")
            assert nreq.recv() == b"re:b"
        assert gw.wait_metric("gateway_forwarded_messages_total", 2, direction="reply") == 2
        assert gw.terminate(signal.SIGINT) == 0


# ---------------------------------------------------------------------------------------------
# metrics


def test_metrics_endpoint_prometheus_text() -> None:
    with NngServer() as server, local_bridge(
            "zmq", "sp", server.port, "--name", "m1", metrics=True) as gw:
        with zmq_client("REQ", lib_url(gw.front)) as req:
            for _ in range(3):
                req.send(b"x")
                req.recv()
        gw.wait_metric("gateway_forwarded_messages_total", 3, direction="reply")  # counted after sending
        text = gw.metrics_text()
        assert "# TYPE gateway_forwarded_messages_total counter" in text
        assert "# TYPE gateway_pending_tokens gauge" in text
        samples = parse_prometheus(text)
        assert samples[("gateway_forwarded_messages_total",
                        frozenset({("bridge", "m1"), ("direction", "request")}))] == 3
        assert samples[("gateway_forwarded_messages_total",
                        frozenset({("bridge", "m1"), ("direction", "reply")}))] == 3
        assert samples[("gateway_pending_tokens", frozenset({("bridge", "m1")}))] == 0


def test_json_logs_one_object_per_line() -> None:
    with NngServer() as server, local_bridge(
            "zmq", "sp", server.port, front_be="native", back_be="native") as gw:
        with zmq_client("REQ", lib_url(gw.front)) as req:
            req.send(b"x")
            assert req.recv() == b"re:x"
        up = gw.wait_event("bridge.up")
        assert up["front"] == gw.front and up["back"] == gw.back and up["mode"] == "zmtp->sp"
        gw.wait_event("pipe.up")  # connects are logged
        assert gw.terminate() == 0
    for line in gw.stderr_lines:
        assert line.startswith("{") and line.rstrip().endswith("}"), line
