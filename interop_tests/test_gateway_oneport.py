"""One port, both wires (issue 9 item 5): a bridge front ``any+tcp://`` takes libzmq clients
(REQ, DEALER with its own envelope frames, pipelined) and nng clients (REQ) on the same port,
tells them apart by their first byte, and translates each request and its reply as the
client's wire needs, to an nng REP back end and to a libzmq REP back end."""

from __future__ import annotations

import socket

import pytest

from gateway.tools.harness.gateway import Gateway, bridge_args
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, nng_req, zmq_client
from gateway.tools.harness.procs import ANY, LOCAL, lib_url, run_cli

pytestmark = pytest.mark.timeout(60)

N = 20  # requests per client


def _clients_on_one_port(front: str, tag: bytes) -> None:
    """A libzmq REQ, a libzmq DEALER (own envelope, pipelined) and an nng REQ, all on ``front``,
    interleaved: each gets exactly its own replies, in order, with its own envelope."""
    address = lib_url(front)
    with zmq_client("REQ", address) as req, zmq_client("DEALER", address) as dealer, \
            nng_req(address) as nreq:
        for i in range(N):  # the DEALER keeps N requests in flight, each with its own envelope
            dealer.send_multipart([b"env-%d" % i, b"", b"d%d" % i])
        for i in range(N):
            req.send(b"z%d" % i)
            assert req.recv() == tag + b"z%d" % i
            nreq.send(b"n%d" % i)
            assert nreq.recv() == tag + b"n%d" % i
        got = [dealer.recv_multipart() for _ in range(N)]
        assert got == [[b"env-%d" % i, b"", tag + b"d%d" % i] for i in range(N)]


def test_one_port_to_an_nng_rep() -> None:
    with NngServer() as server, Gateway(*bridge_args(
            f"any+tcp://{ANY}", f"sp+tcp://{LOCAL}:{server.port}"), metrics=True) as gw:
        _clients_on_one_port(gw.front, b"re:")
        assert gw.metric("gateway_forwarded_messages_total", direction="reply") == 3 * N
        assert gw.metric("gateway_dropped_messages_total") == 0
        assert gw.metric("gateway_pending_tokens") == 0  # every ZeroMQ client's token came back


def test_one_port_to_a_libzmq_rep() -> None:
    with ZmqServer("REP") as server, Gateway(*bridge_args(
            f"any+tcp://{ANY}", f"zmq+tcp://{LOCAL}:{server.port}"), metrics=True) as gw:
        _clients_on_one_port(gw.front, b"re:")
        assert gw.metric("gateway_forwarded_messages_total", direction="reply") == 3 * N
        assert gw.metric("gateway_dropped_messages_total") == 0
        # what the ZeroMQ server saw: the SP client's request as 4-byte words, the ZeroMQ
        # clients' envelopes as they sent them (the REP strips them; the bodies tell)
        bodies = [frames[-1] for frames in server.received]
        assert sorted(bodies) == sorted([b"z%d" % i for i in range(N)] + [b"n%d" % i for i in range(N)]
                                        + [b"d%d" % i for i in range(N)])


def _until_closed(sock: socket.socket) -> bytes:
    heard = b""
    for _ in range(100):  # bounded: the gateway closes within its handshake deadline
        chunk = sock.recv(4096)
        if not chunk:
            return heard
        heard += chunk
    raise AssertionError(f"still open after {heard!r}")


def test_one_port_refuses_garbage_and_times_out_a_silent_peer() -> None:
    """A first byte of neither wire (an HTTP request) is ``garbage``; a peer that says nothing
    meets the handshake deadline; both counted, and the port keeps serving."""
    with NngServer() as server, Gateway(*bridge_args(
            f"any+tcp://{ANY}?handshake_ivl=300", f"sp+tcp://{LOCAL}:{server.port}"),
            metrics=True) as gw:
        host, port = lib_url(gw.front).removeprefix("tcp://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as http:
            http.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            http.settimeout(5)
            # not 0x00: the ZMTP codec takes it (its signature goes out first, as libzmq's
            # does) and refuses the rest; then the connection closes
            heard = _until_closed(http)
            assert heard[:1] in (b"", b"\xff"), heard
        gw.wait_metric("gateway_handshake_failures_total", 1, reason="garbage")
        with socket.create_connection((host, int(port)), timeout=5) as silent:
            silent.settimeout(5)
            assert _until_closed(silent) == b""  # nothing sent to it, closed at the deadline
        gw.wait_metric("gateway_handshake_failures_total", 1, reason="handshake-timeout")
        with nng_req(lib_url(gw.front)) as nreq:
            nreq.send(b"still")
            assert nreq.recv() == b"re:still"


def test_any_is_a_native_request_reply_front() -> None:
    """What any+ cannot be, said at once with exit code 2 (no traceback)."""
    cases = {
        ("zmq+tcp://127.0.0.1:5555", "any+tcp://127.0.0.1:5556"): "any+ is for a front",
        ("any+tcp://127.0.0.1:5555?backend=pyzmq", "sp+tcp://127.0.0.1:5556"): "native engine",
        ("any+tcp://127.0.0.1:5555?pattern=pipeline", "sp+tcp://127.0.0.1:5556"): "request-reply",
        (">any+tcp://127.0.0.1:5555", "sp+tcp://127.0.0.1:5556"): "cannot dial",
    }
    for (front, back), words in cases.items():
        done = run_cli("bridge", front, back, timeout=20)  # refused before anything binds
        assert done.returncode == 2, (front, back, done.stdout, done.stderr)
        assert words in done.stderr and "Traceback" not in done.stderr, done.stderr
