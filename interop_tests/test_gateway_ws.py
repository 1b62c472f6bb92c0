"""SP over WebSocket through the gateway (``sp+ws://``, ``sp+wss://``) with real nng peers
(pynng): subprotocols as nng names them, one SP message per binary WebSocket message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pynng
import pytest

from gateway.tools.harness.certs import make_certs
from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, zmq_client
from gateway.tools.harness.procs import LOCAL, free_port, lib_url

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("wss"))


def _lib(url: str) -> str:
    """``sp+ws://h:p/path`` -> nng's ``ws://h:p/path``."""
    return url.partition("+")[2]


@pytest.mark.parametrize("secure", [False, True], ids=["ws", "wss"])
def test_nng_req_over_websocket_to_a_zeromq_rep(secure: bool, certs: Path) -> None:
    front = f"@sp+{'wss' if secure else 'ws'}://{LOCAL}:0/orders"
    if secure:
        front += f"?tls_cert={certs / 'server.pem'}&tls_key={certs / 'server.key'}"
    with ZmqServer("REP") as server, Gateway(
            "bridge", front, f">zmq+tcp://{LOCAL}:{server.port}", metrics=True) as gw:
        assert gw.front.endswith("/orders")
        with pynng.Req0(recv_timeout=5000, send_timeout=5000) as req:
            if secure:
                req.tls_config = pynng.TLSConfig(pynng.TLSConfig.MODE_CLIENT,
                                                 ca_string=(certs / "ca.pem").read_text(),
                                                 server_name="localhost")
            req.dial(_lib(gw.front), block=False)
            for i in range(5):
                req.send(b"m%d" % i)
                assert req.recv() == b"re:m%d" % i
            big = bytes(range(256)) * 1024  # 256 KiB: nng fragments above 64 KiB frames
            req.send(big)
            assert req.recv() == b"re:" + big
        assert gw.metric("gateway_forwarded_messages_total", direction="request") == 6


@pytest.fixture
def nng_ws_rep() -> Iterator[str]:
    url = f"ws://{LOCAL}:{free_port()}/svc"
    with NngServer(address=url):
        yield url


def test_zeromq_req_to_an_nng_rep_listening_on_websocket(nng_ws_rep: str) -> None:
    with Gateway("bridge", f"@zmq+tcp://{LOCAL}:0", ">sp+" + nng_ws_rep) as gw, \
            zmq_client("REQ", lib_url(gw.front)) as req:
        for i in range(5):
            req.send(b"x%d" % i)
            assert req.recv() == b"re:x%d" % i


def test_a_client_for_another_path_is_refused_and_counted_others_served() -> None:
    with ZmqServer("REP") as server, Gateway(
            "bridge", f"@sp+ws://{LOCAL}:0/orders", f">zmq+tcp://{LOCAL}:{server.port}",
            "--log-format", "json", "--name", "web", metrics=True) as gw:
        hostport = gw.front.split("://")[1].split("/")[0]
        with pynng.Req0(send_timeout=300) as lost:
            lost.dial(f"ws://{hostport}/elsewhere", block=False)
            failed = gw.wait_event("handshake.failed", timeout=10, socket="web/front",
                                   reason="sp-protocol")
            assert "no SP listener at '/elsewhere'" in failed["detail"]
            assert gw.metric("gateway_handshake_failures_total", socket="web/front",
                             reason="sp-protocol") >= 1
            with pynng.Req0(recv_timeout=5000, send_timeout=5000) as req:
                req.dial(_lib(gw.front), block=False)
                req.send(b"ok")
                assert req.recv() == b"re:ok"
            with pytest.raises(pynng.Timeout):
                lost.send(b"never")


def test_curve_on_a_zeromq_websocket_endpoint_is_refused() -> None:
    """ZWS 2.0 (RFC 45) has NULL and PLAIN: CURVE on zmq+ws is a config error (exit 2)."""
    from gateway.tools.harness.procs import run_cli

    done = run_cli("bridge", f"@zmq+ws://{LOCAL}:0/x?curve_server=1&curve_cert=/nonexistent",
                   f">sp+tcp://{LOCAL}:1")
    assert done.returncode == 2 and "ZWS 2.0 (RFC 45) has NULL and PLAIN" in done.stderr
    assert "Traceback" not in done.stderr
