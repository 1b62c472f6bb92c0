"""ZWS 2.0 against jszmq, the JavaScript ZeroMQ, under Node (``.ci/npm-deps.sh`` installs it):
the native engine in both roles jszmq has (it binds a ws server, it connects), and jszmq
through the gateway to a libzmq REP server and an nng REP server, request-reply, DEALER and
pub/sub, over ws and wss (a test CA); a page's Origin refused with 403 and counted."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

import gateway
from gateway.tools.harness.certs import make_certs
from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.jszmq import JszmqProc, missing, node_env
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, zmq_client
from gateway.tools.harness.procs import LOCAL, free_port, lib_url, tcp_listening
from interop_tests.helpers import wait_until

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]


def _ws(url: str) -> str:
    """``zmq+ws://h:p/path`` -> jszmq's ``ws://h:p/path``."""
    return url.partition("+")[2]


def _exchange(client: JszmqProc, frames: list[bytes], want: list[bytes]) -> None:
    client.send(frames)
    assert client.recv(10) == want


@pytest.mark.parametrize("server", ["libzmq", "nng"])
def test_jszmq_req_through_the_gateway_to_a_rep_server(server: str) -> None:
    with (ZmqServer("REP") if server == "libzmq" else NngServer()) as srv:
        back = f">{'zmq' if server == 'libzmq' else 'sp'}+tcp://{LOCAL}:{srv.port}"
        with Gateway("bridge", f"@zmq+ws://{LOCAL}:0/zmq", back, metrics=True) as gw, \
                JszmqProc("REQ", "connect", _ws(gw.front)) as req:
            for i in range(3):
                _exchange(req, [b"m%d" % i], [b"re:m%d" % i])
            assert gw.metric("gateway_forwarded_messages_total", direction="request") == 3


def test_jszmq_dealer_through_the_gateway_keeps_its_envelope() -> None:
    with NngServer() as srv, \
            Gateway("bridge", f"@zmq+ws://{LOCAL}:0/", f">sp+tcp://{LOCAL}:{srv.port}") as gw, \
            JszmqProc("DEALER", "connect", _ws(gw.front)) as dealer:
        _exchange(dealer, [b"app", b"", b"hello"], [b"app", b"", b"re:hello"])


@pytest.fixture
def libzmq_publisher() -> Iterator[int]:
    """A libzmq PUB publishing ``news.<i>`` and ``skip.<i>`` every 20 ms until the test ends."""
    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.PUB)
    port = pub.bind_to_random_port(f"tcp://{LOCAL}")
    stop = threading.Event()

    def publish() -> None:
        i = 0
        while not stop.wait(0.02):
            pub.send(b"skip.%d" % i)
            pub.send(b"news.%d" % i)
            i += 1
        pub.close(0)

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    yield port
    stop.set()
    thread.join(5)


def test_jszmq_sub_through_the_gateway_from_a_libzmq_publisher(libzmq_publisher: int) -> None:
    with Gateway("bridge", f"@zmq+ws://{LOCAL}:0/feed?pattern=pubsub",
                 f">zmq+tcp://{LOCAL}:{libzmq_publisher}") as gw, \
            JszmqProc("SUB", "connect", _ws(gw.front)) as sub:
        sub.subscribe(b"news.")
        got = [sub.recv(10) for _ in range(3)]
        assert all(m is not None and m[0].startswith(b"news.") for m in got), got


def test_native_req_to_a_jszmq_rep_that_binds() -> None:
    """jszmq's listener (the ``ws`` package) takes the client's first subprotocol: the native
    dialer offers ``ZWS2.0`` first, the one jszmq speaks."""
    port = free_port()
    with JszmqProc("REP", "bind", f"ws://{LOCAL}:{port}/svc", serve=True):
        wait_until(lambda: tcp_listening(port), 10, "jszmq listening")

        async def main() -> None:
            async with gateway.Socket("REQ") as req:
                req.connect(f"zmq+ws://{LOCAL}:{port}/svc")
                for body in (b"one", b"two", b"x" * 100_000):
                    await req.send(body)
                    assert await asyncio.wait_for(req.recv(), 10) == b"re:" + body

        asyncio.run(main())


def test_jszmq_req_to_a_native_rep_that_binds() -> None:
    async def main() -> None:
        async with gateway.Socket("REP") as rep:
            url = rep.bind(f"zmq+ws://{LOCAL}:0/svc")
            proc = await asyncio.to_thread(JszmqProc("REQ", "connect", _ws(url)).start)
            try:
                for i in range(3):
                    proc.send([b"q%d" % i])
                    assert await asyncio.wait_for(rep.recv(), 10) == b"q%d" % i
                    await rep.send(b"a%d" % i)
                    assert await asyncio.to_thread(proc.recv, 10) == [b"a%d" % i]
            finally:
                proc.close()

    asyncio.run(main())


def test_a_libzmq_client_through_the_gateway_to_a_jszmq_server_behind_it() -> None:
    """The gateway's back dials ZWS: libzmq REQ -> gateway -> jszmq ROUTER (listening)."""
    port = free_port()
    with JszmqProc("ROUTER", "bind", f"ws://{LOCAL}:{port}/svc", serve=True):
        wait_until(lambda: tcp_listening(port), 10, "jszmq listening")
        with Gateway("bridge", f"@zmq+tcp://{LOCAL}:0", f">zmq+ws://{LOCAL}:{port}/svc") as gw, \
                zmq_client("REQ", lib_url(gw.front)) as req:
            for i in range(3):
                req.send(b"r%d" % i)
                assert req.recv() == b"re:r%d" % i


ORIGIN_PROBE = """
const WebSocket = require("ws");
const [url, origin] = process.argv.slice(1);
const ws = new WebSocket(url, ["ZWS2.0"], origin ? { origin } : {});
ws.on("unexpected-response", (req, res) => { console.log("STATUS " + res.statusCode); process.exit(0); });
ws.on("open", () => { console.log("STATUS 101 " + ws.protocol); process.exit(0); });
ws.on("error", (e) => { console.log("ERROR " + e.message); process.exit(0); });
"""


def _probe(url: str, origin: str = "") -> str:
    return subprocess.run(["node", "-e", ORIGIN_PROBE, url, origin], capture_output=True,
                          text=True, timeout=20, env=node_env()).stdout.strip()


@pytest.mark.parametrize("wire", ["zmq", "sp"])
def test_a_page_from_another_origin_is_refused_and_counted(wire: str) -> None:
    with ZmqServer("REP") as srv, Gateway(
            "bridge", f"@{wire}+ws://{LOCAL}:0/app?origin=https://app.example.com",
            f">zmq+tcp://{LOCAL}:{srv.port}", "--log-format", "json", "--name", "web",
            metrics=True) as gw:
        url = _ws(gw.front)
        assert _probe(url, "https://evil.example") == "STATUS 403"
        line = gw.wait_event("connection.refused", timeout=10, reason="origin")
        assert line["socket"] == "web/front" and "https://evil.example" in line["detail"]
        assert gw.metric("gateway_refused_connections_total", socket="web/front",
                         reason="origin") == 1
        if wire == "zmq":  # the allowed page, and a client without Origin (not a browser)
            assert _probe(url, "https://app.example.com") == "STATUS 101 ZWS2.0"
            assert _probe(url) == "STATUS 101 ZWS2.0"
            with JszmqProc("REQ", "connect", url) as req:
                _exchange(req, [b"hi"], [b"re:hi"])
        assert gw.metric("gateway_refused_connections_total", socket="web/front",
                         reason="origin") == 1


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("zwss"))


def test_jszmq_over_wss_with_a_test_ca(certs: Path) -> None:
    front = (f"@zmq+wss://{LOCAL}:0/secure?tls_cert={certs / 'server.pem'}"
             f"&tls_key={certs / 'server.key'}")
    with NngServer() as srv, Gateway("bridge", front, f">sp+tcp://{LOCAL}:{srv.port}") as gw:
        port = gw.front.split(":")[2].split("/")[0]
        url = f"wss://localhost:{port}/secure"
        with JszmqProc("REQ", "connect", url,
                       env={"NODE_EXTRA_CA_CERTS": str(certs / "ca.pem")}) as req:
            start = time.monotonic()
            _exchange(req, [b"over tls"], [b"re:over tls"])
            assert time.monotonic() - start < 10
        # a client that does not trust the server's CA gets no connection, nothing else
        assert _probe(url).startswith("ERROR")
