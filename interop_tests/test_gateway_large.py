"""Large messages through a bridge (issue 36): 64 KiB and 1 MiB bodies, several in flight, on
every route, with real peers (libzmq DEALER clients and ROUTER servers, nng req0 clients and
rep0 servers). The compiled kernel writes a large body as a view of the read it came in and
waits for the rest of a message split across reads; every reply must come back whole and in
its own request's bytes, and none may be dropped at the mark (a message larger than
``hwm * 1 KiB`` no longer fills it: the mark counts messages, as libzmq's hwm does)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pynng
import pytest

from gateway.tools.bench.runner import size_args
from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, zmq_client
from gateway.tools.harness.procs import LOCAL, lib_url

pytestmark = pytest.mark.timeout(120)

IN_FLIGHT = 16
TIMEOUT_MS = 20_000


def _body(i: int, size: int) -> bytes:
    """The ``i``-th request's body: its number, then one byte value all the way."""
    return b"%04d" % i + bytes([65 + i % 26]) * (size - 4)


@contextmanager
def _server(family: str) -> Iterator[str]:
    """An echo server (``re:`` + the body) on an ephemeral port: its URL for the bridge."""
    if family == "zmq":
        with ZmqServer("ROUTER") as server:
            yield f">zmq+tcp://{LOCAL}:{server.port}"
    else:
        with NngServer() as server:
            server.sock.recv_max_size = 0  # (nng's own limit is 1 MiB: no limit here)
            yield f">sp+tcp://{LOCAL}:{server.port}"


def _zmq_round(url: str, size: int) -> list[bytes]:
    """IN_FLIGHT requests from one libzmq DEALER, all sent before any reply is read, and the
    replies read late, one at a time (RCVHWM 1): they wait in the bridge's write buffer (at
    1 MiB, more than its ``hwm * 1 KiB``, where they were dropped before the mark counted
    messages)."""
    with zmq_client("DEALER", url, timeout_ms=TIMEOUT_MS, rcvhwm=1) as dealer:
        for i in range(IN_FLIGHT):
            dealer.send_multipart([b"", _body(i, size)])
        time.sleep(0.5)  # (a slow reader: nothing to wait for, the test is that none is lost)
        replies = []
        for _ in range(IN_FLIGHT):
            delimiter, reply = dealer.recv_multipart()
            assert delimiter == b""
            replies.append(reply)
        return replies


def _sp_round(url: str, size: int) -> list[bytes]:
    """IN_FLIGHT requests from nng req0 contexts of one socket, one each, at once."""
    replies: list[Any] = [None] * IN_FLIGHT
    with pynng.Req0(dial=url, recv_timeout=TIMEOUT_MS, send_timeout=TIMEOUT_MS) as req:
        req.recv_max_size = 0

        def ask(i: int) -> None:
            with req.new_context() as ctx:
                ctx.send(_body(i, size))
                replies[i] = ctx.recv()

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(IN_FLIGHT)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT_MS / 1000 + 5)
    return list(replies)


@pytest.mark.parametrize("size", [65536, 1 << 20], ids=["64KiB", "1MiB"])
@pytest.mark.parametrize(("front", "back"), [("zmq", "zmq"), ("zmq", "sp"), ("sp", "zmq"),
                                             ("sp", "sp")])
def test_large_bodies_come_back_whole_on_every_route(front: str, back: str, size: int) -> None:
    with _server(back) as server, Gateway(
            "bridge", *size_args(size), f"@{front}+tcp://{LOCAL}:0", server,
            metrics=True) as gw:
        url = lib_url(gw.front)
        for _ in range(2):  # the second round: the mark raised by the first
            replies = (_zmq_round if front == "zmq" else _sp_round)(url, size)
            assert sorted(replies) == sorted(b"re:" + _body(i, size) for i in range(IN_FLIGHT))
        assert gw.metric("gateway_dropped_messages_total") == 0
        assert gw.metric("gateway_socket_dropped_messages_total") == 0


@pytest.mark.parametrize(("front", "back"), [("zmq", "sp"), ("sp", "zmq")])
def test_a_body_past_two_mib_comes_back_whole_at_the_default_hwm(front: str, back: str) -> None:
    """At the default hwm (1000) the mark of a 4 MiB message (hwm times its size, 4 GiB) is
    past what uvloop's set_write_buffer_limits takes (a C int): the mark is the pipe's own
    (the transport's limits are 0/0), the message goes through and nothing raises."""
    size = 4 << 20
    with _server(back) as server, Gateway(
            "bridge", *size_args(size), f"@{front}+tcp://{LOCAL}:0", server,
            metrics=True) as gw:
        url = lib_url(gw.front)
        if front == "zmq":
            with zmq_client("DEALER", url, timeout_ms=TIMEOUT_MS) as dealer:
                dealer.send_multipart([b"", _body(1, size)])
                assert dealer.recv_multipart() == [b"", b"re:" + _body(1, size)]
        else:
            with pynng.Req0(dial=url, recv_timeout=TIMEOUT_MS, send_timeout=TIMEOUT_MS) as req:
                req.recv_max_size = 0
                req.send(_body(1, size))
                assert req.recv() == b"re:" + _body(1, size)
        assert "Traceback" not in gw.stderr
        assert gw.metric("gateway_dropped_messages_total") == 0


def test_an_hwm_whose_byte_mark_passes_two_gib_serves() -> None:
    """?hwm=3000000 on both sides: a pipe's first mark (hwm * 1 KiB, about 3 GB) was past
    uvloop's C int at every connection_made (OverflowError: no client served); now a
    libzmq client's request is answered by the nng server (the mark is the pipe's own:
    the transport's limits are 0/0)."""
    with _server("sp") as server, Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0?hwm=3000000", f"{server}?hwm=3000000") as gw:
        with zmq_client("DEALER", lib_url(gw.front), timeout_ms=TIMEOUT_MS) as dealer:
            dealer.send_multipart([b"", b"hello"])
            assert dealer.recv_multipart() == [b"", b"re:hello"]
        assert "Traceback" not in gw.stderr


@pytest.mark.parametrize(("front", "back"), [("zmq", "sp"), ("sp", "zmq")])
def test_bodies_come_back_whole_through_the_smallest_kernel_buffers(front: str, back: str) -> None:
    """``?sndbuf=4k`` on both sides (the kernel's least: each write of a 1 MiB body is cut in
    many, and the pipe's writes pause and resume all along): every reply comes back whole, in
    its own request's bytes (sha256), none dropped, none late past the peers' timeouts."""
    import hashlib
    import os

    size, count = 1 << 20, 2
    bodies = [os.urandom(size) for _ in range(count)]
    with _server(back) as server, Gateway(
            "bridge", *size_args(size + 64), f"@{front}+tcp://{LOCAL}:0?sndbuf=4k",
            f"{server}?sndbuf=4k", metrics=True) as gw:
        url = lib_url(gw.front)
        if front == "zmq":
            with zmq_client("DEALER", url, timeout_ms=TIMEOUT_MS) as dealer:
                for body in bodies:
                    dealer.send_multipart([b"", body])
                replies = [dealer.recv_multipart()[1] for _ in bodies]
        else:
            with pynng.Req0(dial=url, recv_timeout=TIMEOUT_MS, send_timeout=TIMEOUT_MS) as req:
                req.recv_max_size = 0
                replies = []
                for body in bodies:
                    req.send(body)
                    replies.append(req.recv())
        digest = [hashlib.sha256(b"re:" + body).hexdigest() for body in bodies]
        assert [hashlib.sha256(r).hexdigest() for r in replies] == digest
        assert gw.metric("gateway_dropped_messages_total") == 0
        assert "Traceback" not in gw.stderr
