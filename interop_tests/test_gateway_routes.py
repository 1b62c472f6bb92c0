"""End-to-end routes through the real ``gateway`` CLI with real peers (DESIGN sections 6 and 8).

Every route runs with the library adapter and the native engine on each side (front x back).
Cross-family: ZeroMQ REQ/DEALER clients -> nng/nngcat REP servers, nng/nanocat REQ clients ->
ZeroMQ REP/ROUTER servers. Same family: compared with ``zmq.proxy`` and nng's raw device.
A chain: zmq -> gateway A (zmq->sp) -> gateway B (sp->zmq) -> zmq.
"""

from __future__ import annotations

import shutil
import signal
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import zmq

from gateway.testing.pytest_plugin import PATHS
from gateway.tools.bench.procs import Proc as BenchProc
from gateway.tools.harness.gateway import local_bridge
from gateway.tools.harness.peers.nng import nng_raw_recv, nng_raw_send, open_raw
from gateway.tools.harness.peers.servers import (
    NngRawServer,
    NngServer,
    ZmqServer,
    nng_req,
    zmq_client,
)
from gateway.tools.harness.procs import LOCAL, free_port, lib_url, port_of, proc
from interop_tests.helpers import backends

pytestmark = pytest.mark.timeout(60)


def _is_sp_rid(word: bytes) -> bool:
    return len(word) == 4 and bool(word[0] & 0x80)


def _is_sp_pipe(word: bytes) -> bool:
    return len(word) == 4 and not word[0] & 0x80


def _is_zmq_id(frame: bytes) -> bool:
    """libzmq's (and the native engine's) generated routing id: 00 + uint32."""
    return len(frame) == 5 and frame[0] == 0


# ---------------------------------------------------------------------------------------------
# ZeroMQ clients -> SP servers


@pytest.mark.parametrize("engine_path", PATHS, indirect=True)
def test_a_native_bridge_forwards_on_the_path_it_names(engine_path: str) -> None:
    """libzmq REQ -> gateway (native both sides) -> nng REP, 1,000 requests: where the kernel
    is built the bridge says it forwards through it (``bridge.up kernel=true``), and on the
    pure path (GATEWAY_NO_EXTENSIONS=1, which the fixture sets for the gateway it starts) that
    it does not; both answer every request (CI runs this on every Python the package claims)."""
    with NngServer() as server, local_bridge("zmq", "sp", server.port, front_be="native",
                                             back_be="native", prefix="@") as gw:
        assert gw.wait_event("bridge.up")["kernel"] is (engine_path == "compiled")
        with zmq_client("REQ", lib_url(gw.front)) as req:
            for i in range(1000):
                req.send(b"%d" % i)
                assert req.recv_multipart() == [b"re:%d" % i]
        assert len(server.received) == 1000


@backends
def test_zmq_req_to_nng_rep(front_be: str, back_be: str) -> None:
    with NngServer() as server, local_bridge(
            "zmq", "sp", server.port, front_be=front_be, back_be=back_be, prefix="@") as gw:
        assert gw.front.startswith("zmq+tcp://127.0.0.1:") and not gw.front.endswith(":0")
        assert gw.back == f"sp+tcp://{LOCAL}:{server.port}"
        with zmq_client("REQ", lib_url(gw.front)) as req:
            for i in range(3):
                req.send(b"hello %d" % i)
                assert req.recv_multipart() == [b"re:hello %d" % i]
        assert server.received == [b"hello 0", b"hello 1", b"hello 2"]


@backends
def test_zmq_dealer_app_envelopes_50_pipelined_to_nng_rep(front_be: str, back_be: str) -> None:
    with NngServer() as server, local_bridge(
            "zmq", "sp", server.port, front_be=front_be, back_be=back_be) as gw:
        with zmq_client("DEALER", lib_url(gw.front)) as dealer:
            sent = {}
            for i in range(50):  # all in flight before the first reply is read
                envelope = [b"app1", b"app2-%d" % i, b""]
                sent[b"body %d" % i] = envelope
                dealer.send_multipart([*envelope, b"body %d" % i])
            replies = [dealer.recv_multipart() for _ in range(50)]
            for frames in replies:  # each reply carries its own envelope back
                *envelope, body = frames
                assert body.startswith(b"re:")
                assert envelope == sent.pop(body[3:])
            assert not sent
            # a DEALER that sends no delimiter: its frame is the body, and comes back bare
            dealer.send_multipart([b"bare"])
            assert dealer.recv_multipart() == [b"re:bare"]
        assert len(server.received) == 51


@backends
def test_sp_server_sees_one_token_hop(front_be: str, back_be: str) -> None:
    """On SP the ZeroMQ envelope is one minted token (top bit set), nothing else."""
    with NngRawServer() as server, local_bridge(
            "zmq", "sp", server.port, front_be=front_be, back_be=back_be) as gw:
        with zmq_client("DEALER", lib_url(gw.front)) as dealer:
            dealer.send_multipart([b"a-very-long-application-envelope-frame" * 3, b"", b"x"])
            assert dealer.recv_multipart()[-1] == b"re:x"
        (words, body), = server.received
        assert body == b"x"
        assert len(words) == 2 and _is_sp_pipe(words[0]) and _is_sp_rid(words[1])


@backends
def test_zmq_req_to_nngcat_rep(front_be: str, back_be: str) -> None:
    nngcat = shutil.which("nngcat")
    if nngcat is None:
        pytest.skip("nngcat (Debian nng-utils) not installed")
    port = free_port()
    with proc(nngcat, "--rep", "--listen", f"tcp://{LOCAL}:{port}", "--data", "from-nngcat",
              "--raw") as cat, local_bridge(
                      "zmq", "sp", port, front_be=front_be, back_be=back_be) as gw:
        with zmq_client("REQ", lib_url(gw.front)) as req:
            for i in range(2):
                req.send(b"ping%d" % i)
                assert req.recv() == b"from-nngcat"
        cat.kill()
        out, _ = cat.communicate(timeout=5)
        assert out == b"ping0ping1"


# ---------------------------------------------------------------------------------------------
# SP clients -> ZeroMQ servers


@backends
def test_nng_req_to_zmq_rep(front_be: str, back_be: str) -> None:
    with ZmqServer("REP") as server, local_bridge(
            "sp", "zmq", server.port, front_be=front_be, back_be=back_be) as gw:
        assert gw.front.startswith("sp+tcp://127.0.0.1:")
        with nng_req(lib_url(gw.front)) as req:
            for i in range(3):
                req.send(b"hello %d" % i)
                assert req.recv() == b"re:hello %d" % i
        assert server.received == [[b"hello 0"], [b"hello 1"], [b"hello 2"]]


@backends
def test_nng_req_to_zmq_router_server(front_be: str, back_be: str) -> None:
    with ZmqServer("ROUTER") as server, local_bridge(
            "sp", "zmq", server.port, front_be=front_be, back_be=back_be) as gw:
        with nng_req(lib_url(gw.front)) as req:
            req.send(b"question")
            assert req.recv() == b"re:question"
        (frames,) = server.received
        # [gateway's identity at the server][pipe id][request id]["" delimiter][body]
        ident, pipe, rid, delimiter, body = frames
        assert _is_zmq_id(ident)
        assert _is_sp_pipe(pipe) and _is_sp_rid(rid)
        assert delimiter == b"" and body == b"question"


@backends
def test_nanocat_req_to_zmq_rep(front_be: str, back_be: str) -> None:
    nanocat = shutil.which("nanocat")
    if nanocat is None:
        pytest.skip("nanocat (Debian nanomsg-utils) not installed")
    with ZmqServer("REP") as server, local_bridge(
            "sp", "zmq", server.port, front_be=front_be, back_be=back_be) as gw:
        with proc(nanocat, "--req", "--connect", lib_url(gw.front), "--data", "from-nanocat",
                  "--raw", "--recv-timeout", "5") as cat:
            out, err = cat.communicate(timeout=10)
            assert cat.returncode == 0, err
        assert out == b"re:from-nanocat"
        assert server.received == [[b"from-nanocat"]]


# ---------------------------------------------------------------------------------------------
# same family, compared with the libraries' own devices


def _proxy_thread(front_port: list[int], server_url: str, ctl: str,
                  ctx: zmq.Context[zmq.Socket[bytes]], started: threading.Event) -> None:
    front, back, control = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER), ctx.socket(zmq.PAIR)
    try:
        front_port.append(front.bind_to_random_port(f"tcp://{LOCAL}"))
        back.connect(server_url)
        control.bind(ctl)
        started.set()
        zmq.proxy_steerable(front, back, None, control)
    finally:
        for s in (front, back, control):
            s.close(0)


def _zmq_exchange(front: str) -> list[list[bytes]]:
    replies = []
    with zmq_client("REQ", front) as req:
        req.send(b"req-body")
        replies.append(req.recv_multipart())
    with zmq_client("DEALER", front) as dealer:
        dealer.send_multipart([b"app1", b"app2", b"", b"dealer-body"])
        replies.append(dealer.recv_multipart())
    return replies


@backends
def test_zmq_to_zmq_same_as_zmq_proxy(front_be: str, back_be: str) -> None:
    with ZmqServer("ROUTER") as server:
        # the reference: libzmq's own proxy (ROUTER/DEALER) in a thread, stopped by TERMINATE
        ctx = zmq.Context.instance()
        ctl = f"inproc://ctl-{uuid.uuid4().hex}"
        port: list[int] = []
        started = threading.Event()
        t = threading.Thread(target=_proxy_thread, args=(port, server.url, ctl, ctx, started),
                             daemon=True)
        t.start()
        assert started.wait(5)
        try:
            expected = _zmq_exchange(f"tcp://{LOCAL}:{port[0]}")
        finally:
            control = ctx.socket(zmq.PAIR)
            control.connect(ctl)
            control.send(b"TERMINATE")
            t.join(5)  # close the control socket only then: closing at once can lose it
            control.close(0)
            assert not t.is_alive(), "zmq.proxy did not terminate"
        via_proxy, got, via_gateway = _then_the_gateway(server, "zmq", front_be, back_be, _zmq_exchange)

    assert got == expected == [[b"re:req-body"], [b"app1", b"app2", b"", b"re:dealer-body"]]
    # the server sees the same envelopes: [proxy's id][client's id] + what the client sent
    assert len(via_gateway) == len(via_proxy) == 2
    for g, p in zip(via_gateway, via_proxy, strict=True):
        assert len(g) == len(p)
        assert all(_is_zmq_id(f) for f in g[:2] + p[:2])
        assert g[2:] == p[2:]


def _then_the_gateway(server: Any, wire: str, front_be: str, back_be: str,
                      exchange: Callable[[str], Any]) -> tuple[list[Any], Any, list[Any]]:
    """What ``server`` received from the reference route (taken out of it), then ``exchange``
    through a ``wire``->``wire`` gateway: (via the reference, what the client got, via the
    gateway)."""
    via_reference, server.received[:] = list(server.received), []
    with local_bridge(wire, wire, server.port, front_be=front_be, back_be=back_be) as gw:
        got = exchange(lib_url(gw.front))
    return via_reference, got, server.received


def _sp_exchange(front: str) -> list[bytes]:
    with nng_req(front) as req:
        out = []
        for body in (b"one", b"two"):
            req.send(body)
            out.append(req.recv())
        return out


@backends
def test_sp_to_sp_same_as_nng_device(front_be: str, back_be: str) -> None:
    with NngRawServer() as server:
        # the reference: nng_device over a raw rep0 / raw req0 pair (what nng's devices do), in
        # a process of its own (the bench's peer): nng_close of a socket nng_device forwards on
        # hung once in a 3.13 CI run; a process is killed, never closed
        device = BenchProc.peer("nng-device", "nng-device", server=server.url, lifetime=120)
        try:
            expected = _sp_exchange(device.wait_ready(30)["url"])
        finally:
            device.stop(grace=1.0, sig=signal.SIGKILL)
        via_device, got, via_gateway = _then_the_gateway(server, "sp", front_be, back_be, _sp_exchange)

    assert got == expected == [b"re:one", b"re:two"]
    assert [b for _, b in via_gateway] == [b for _, b in via_device] == [b"one", b"two"]
    for (g, _), (d, _) in zip(via_gateway, via_device, strict=True):
        # [server's pipe][device's pipe][client's request id]: one hop pushed by the device
        assert len(g) == len(d) == 3
        assert all(_is_sp_pipe(w) for w in g[:2] + d[:2])
        assert _is_sp_rid(g[2]) and _is_sp_rid(d[2])


# ---------------------------------------------------------------------------------------------
# chains


@backends
def test_chain_zmq_to_sp_to_zmq(front_be: str, back_be: str) -> None:
    with ZmqServer("ROUTER") as server, local_bridge(
            "sp", "zmq", server.port, "--name", "B", front_be=front_be, back_be=back_be,
    ) as gw_b, local_bridge(  # A's back is B's front
            "zmq", "sp", port_of(gw_b.front), "--name", "A", front_be=front_be, back_be=back_be,
    ) as gw_a:
        with zmq_client("REQ", lib_url(gw_a.front)) as req:
            req.send(b"through two gateways")
            assert req.recv_multipart() == [b"re:through two gateways"]
        with zmq_client("DEALER", lib_url(gw_a.front)) as dealer:
            for i in range(5):
                dealer.send_multipart([b"app", b"%d" % i, b"", b"d%d" % i])
            got = sorted(dealer.recv_multipart() for _ in range(5))
            assert got == [[b"app", b"%d" % i, b"", b"re:d%d" % i] for i in range(5)]
        # at the server: [B's id][B's pipe to A][A's token]["" delimiter][body]
        ident, pipe, token, delimiter, body = server.received[0]
        assert _is_zmq_id(ident) and _is_sp_pipe(pipe) and _is_sp_rid(token)
        assert delimiter == b"" and body == b"through two gateways"


def test_raw_nng_client_backtrace_survives() -> None:
    """A raw nng REQ (a device in front of the gateway) keeps its own hops through sp->zmq."""
    with ZmqServer("REP") as server, local_bridge("sp", "zmq", server.port) as gw:
        client = open_raw("REQ", 5000)
        try:
            client.dial(lib_url(gw.front), block=True)
            hops = [b"\x00\x00\x00\x07", b"\x00\x00\x00\x09", b"\x80\x00\x12\x34"]
            nng_raw_send(client, hops, b"deep")
            assert nng_raw_recv(client) == (hops, b"re:deep")
        finally:
            client.close()
