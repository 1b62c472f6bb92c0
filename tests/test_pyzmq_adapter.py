"""gateway_plugins.pyzmq_adapter against real libzmq peers on 127.0.0.1 (ephemeral ports)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import gateway_plugins.pyzmq_adapter as pyzmq_adapter
import pynng
import pytest
import zmq
import zmq.asyncio
from _aio import bounded
from gateway_plugins.pynng_adapter import PynngRawSocket
from gateway_plugins.pyzmq_adapter import PyzmqRawSocket

from gateway.adapter import SideOptions
from gateway.envelope import sp_to_zmtp, zmtp_to_sp_reply
from gateway.errors import Closed, ConfigError
from gateway.message import Message
from gateway.testing import adapter_checks as checks

T = 5  # seconds: every await on the network is bounded
timed = bounded(20.0)  # each test as a whole


@pytest.fixture
def ctx():  # type: ignore[no-untyped-def]
    c = zmq.asyncio.Context()
    yield c
    c.destroy(linger=0)


def test_registers_through_pluggy() -> None:
    got = checks.registered_adapters(pyzmq_adapter, "pyzmq")
    assert got == [(("pyzmq", "zmtp", pyzmq_adapter.open_async),
                    dict(polled=pyzmq_adapter.open_polled, proxy=pyzmq_adapter.open_proxy,
                         options=pyzmq_adapter.HONOURED))]


def test_kinds(ctx) -> None:  # type: ignore[no-untyped-def]
    for kind, expect in [
        ("ROUTER", "ROUTER"),
        ("DEALER", "DEALER"),
        ("REP", "ROUTER"),
        ("REQ", "DEALER"),
        ("router", "ROUTER"),
    ]:
        s = PyzmqRawSocket(kind, context=ctx)
        assert (s.kind, s.family) == (expect, "zmtp")
        s.close()
    for bad in ("PUB", "STREAM"):
        with pytest.raises(ConfigError):
            PyzmqRawSocket(bad, context=ctx)
    with pytest.raises(ConfigError):
        PyzmqRawSocket("REP", raw=False, context=ctx)


def test_bind_returns_real_port(ctx) -> None:  # type: ignore[no-untyped-def]
    checks.check_bind_returns_real_port(lambda: PyzmqRawSocket("ROUTER", context=ctx))


def test_liveness_options_reach_libzmq() -> None:
    opts = SideOptions(heartbeat_ivl=0.2, heartbeat_ttl=1.0, heartbeat_timeout=0.6,
                       router_handover=True, tcp_keepalive_idle=30, tcp_keepalive_intvl=5,
                       tcp_keepalive_cnt=3)
    s = pyzmq_adapter.open_async("REP", opts)
    try:
        get = s._sock.getsockopt
        assert (get(zmq.HEARTBEAT_IVL), get(zmq.HEARTBEAT_TTL), get(zmq.HEARTBEAT_TIMEOUT)) == (
            200, 1000, 600)
        assert (get(zmq.TCP_KEEPALIVE), get(zmq.TCP_KEEPALIVE_IDLE),
                get(zmq.TCP_KEEPALIVE_INTVL), get(zmq.TCP_KEEPALIVE_CNT)) == (1, 30, 5, 3)
    finally:
        s.close()
    # ROUTER_HANDOVER cannot be read back from libzmq: the option table says it
    assert pyzmq_adapter.libzmq_options("REP", opts)[zmq.ROUTER_HANDOVER] == 1
    assert zmq.ROUTER_HANDOVER not in pyzmq_adapter.libzmq_options("REQ", opts)
    assert zmq.ROUTER_HANDOVER not in pyzmq_adapter.libzmq_options("REP", SideOptions())
    off = pyzmq_adapter.libzmq_options("REP", SideOptions(tcp_keepalive=False))
    assert off[zmq.TCP_KEEPALIVE] == 0 and zmq.HEARTBEAT_IVL not in off


def test_immediate_reaches_libzmq() -> None:
    """?immediate=1: libzmq's ZMQ_IMMEDIATE on the real socket (queue only on completed
    connections); a DEALER connected to nobody then has no room to send."""
    s = pyzmq_adapter.open_async("DEALER", SideOptions(immediate=True))
    try:
        assert s._sock.getsockopt(zmq.IMMEDIATE) == 1
        s._sock.connect("tcp://127.0.0.1:1")  # nobody there: the connection never completes
        assert not s._sock.getsockopt(zmq.EVENTS) & zmq.POLLOUT
    finally:
        s.close()
    s = pyzmq_adapter.open_async("DEALER", SideOptions())
    try:
        assert s._sock.getsockopt(zmq.IMMEDIATE) == 0
        s._sock.connect("tcp://127.0.0.1:1")  # libzmq's default: queued for a connection
        assert s._sock.getsockopt(zmq.EVENTS) & zmq.POLLOUT
    finally:
        s.close()


@timed
async def test_accepted_connections_keep_alive() -> None:
    s = pyzmq_adapter.open_async("REP", SideOptions(tcp_keepalive_idle=30))
    url = s.bind("tcp://127.0.0.1:0")
    c = zmq.Context.instance().socket(zmq.DEALER)
    c.linger = 0
    c.connect(url)
    try:
        # a message through: libzmq has accepted the connection and set its options (the
        # kernel shows it established before that; on a loaded machine `ss` saw no timer yet)
        c.send(b"ping")
        assert (await asyncio.wait_for(s.recv_msg(), T)).body == (b"ping",)
        (timer,) = checks.keepalive_timers(int(url.rsplit(":", 1)[1]))
        # the kernel's countdown from 30 s: a loaded box may run `ss` seconds later
        idle = re.match(r"keepalive,(\d+)sec", timer)
        assert idle is not None and 15 <= int(idle[1]) <= 30, timer
    finally:
        c.close(0)
        s.close()


@timed
async def test_router_handover_on_the_adapter_front(ctx) -> None:  # type: ignore[no-untyped-def]
    """libzmq's own ROUTER_HANDOVER: the second DEALER named "alice" takes the id over."""
    s = pyzmq_adapter.open_async("REP", SideOptions(router_handover=True))
    url = s.bind("tcp://127.0.0.1:0")
    first, second = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER)
    for c in (first, second):
        c.linger = 0
        c.setsockopt(zmq.ROUTING_ID, b"alice")
    first.connect(url)
    await first.send(b"from the first")
    assert (await asyncio.wait_for(s.recv_msg(), T)).body == (b"from the first",)
    second.connect(url)
    await second.send(b"from the second")
    msg = await asyncio.wait_for(s.recv_msg(), T)
    assert msg == Message((b"alice",), (b"from the second",))
    await asyncio.wait_for(s.send_msg(Message((b"alice",), (b"reply",))), T)
    assert await asyncio.wait_for(second.recv(), T) == b"reply"
    for c in (first, second):
        c.close(0)
    s.close()


def _router_and_client(ctx, kind: int, identity: bytes = b"") -> tuple[PyzmqRawSocket, Any]:  # type: ignore[no-untyped-def]
    """The adapter's ROUTER on an ephemeral port and a libzmq ``kind`` client connected to
    it (with ``identity`` when given)."""
    s = PyzmqRawSocket("ROUTER", context=ctx)
    url = s.bind("tcp://127.0.0.1:0")
    c = ctx.socket(kind)
    if identity:
        c.setsockopt(zmq.IDENTITY, identity)
    c.connect(url)
    return s, c


@timed
async def test_router_with_req_client(ctx) -> None:  # type: ignore[no-untyped-def]
    s, c = _router_and_client(ctx, zmq.REQ)
    await c.send(b"hi")
    msg = await asyncio.wait_for(s.recv_msg(), T)
    ident = msg.hops[0]
    assert msg == Message((ident, b""), (b"hi",))
    assert len(ident) == 5 and ident[0] == 0  # libzmq generated identity
    await asyncio.wait_for(s.send_msg(Message(msg.hops, (b"ho",))), T)
    assert await asyncio.wait_for(c.recv_multipart(), T) == [b"ho"]
    c.close(0)
    s.close()


@timed
async def test_router_with_dealer_clients(ctx) -> None:  # type: ignore[no-untyped-def]
    s, d = _router_and_client(ctx, zmq.DEALER, b"client-A")
    # no delimiter: every frame is body
    await d.send_multipart([b"a", b"b"])
    msg = await asyncio.wait_for(s.recv_msg(), T)
    assert msg == Message((b"client-A",), (b"a", b"b"))
    await s.send_msg(msg)
    assert await asyncio.wait_for(d.recv_multipart(), T) == [b"a", b"b"]
    # app envelope + delimiter: hops up to and including the first empty frame
    await d.send_multipart([b"app", b"", b"x", b"", b"y"])
    msg = await asyncio.wait_for(s.recv_msg(), T)
    assert msg == Message((b"client-A", b"app", b""), (b"x", b"", b"y"))
    assert msg.frames == (b"client-A", b"app", b"", b"x", b"", b"y")
    await s.send_msg(msg)
    assert await asyncio.wait_for(d.recv_multipart(), T) == [b"app", b"", b"x", b"", b"y"]
    # unknown identity: libzmq drops silently, no error
    await s.send_msg(Message((b"nobody", b""), (b"z",)))
    d.close(0)
    s.close()


def _rep_server(ctx) -> tuple[Any, int]:  # type: ignore[no-untyped-def]
    """A libzmq REP bound to an ephemeral port: (socket, port)."""
    rep = ctx.socket(zmq.REP)
    return rep, rep.bind_to_random_port("tcp://127.0.0.1")


@timed
async def test_dealer_adapter_with_rep_server(ctx) -> None:  # type: ignore[no-untyped-def]
    rep, port = _rep_server(ctx)
    s = PyzmqRawSocket("DEALER", context=ctx)
    s.connect(f"tcp://127.0.0.1:{port}")
    await asyncio.wait_for(s.send_msg(Message((b"",), (b"q",))), T)
    assert await asyncio.wait_for(rep.recv_multipart(), T) == [b"q"]
    await rep.send(b"a")
    assert await asyncio.wait_for(s.recv_msg(), T) == Message((b"",), (b"a",))
    # an SP-style envelope survives a ZeroMQ REP (what the gateway relies on)
    env = (b"\x00\x00\x00\x01", b"\x80\x00\x00\x09", b"")
    await s.send_msg(Message(env, (b"q2",)))
    assert await asyncio.wait_for(rep.recv(), T) == b"q2"
    await rep.send(b"a2")
    assert await asyncio.wait_for(s.recv_msg(), T) == Message(env, (b"a2",))
    rep.close(0)
    s.close()


@timed
async def test_close_wakes_a_pending_recv(ctx) -> None:  # type: ignore[no-untyped-def]
    s = PyzmqRawSocket("ROUTER", context=ctx)
    s.bind("tcp://127.0.0.1:0")
    task = asyncio.create_task(s.recv_msg())
    await asyncio.sleep(0.05)
    s.close()
    with pytest.raises(Closed):
        await asyncio.wait_for(task, T)
    with pytest.raises(Closed):
        await s.recv_msg()
    with pytest.raises(Closed):
        await s.send_msg(Message((b"x", b""), (b"y",)))
    s.close()  # idempotent


@timed
async def test_cancelled_recv_stays_cancelled(ctx) -> None:  # type: ignore[no-untyped-def]
    s = PyzmqRawSocket("ROUTER", context=ctx)
    url = s.bind("tcp://127.0.0.1:0")
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(s.recv_msg(), 0.05)
    c = ctx.socket(zmq.REQ)
    c.connect(url)
    await c.send(b"after")
    assert (await asyncio.wait_for(s.recv_msg(), T)).body == (b"after",)
    c.close(0)
    s.close()


@timed
async def test_device_preview_sp_clients_to_zmq_rep(ctx) -> None:  # type: ignore[no-untyped-def]
    """nng Req0 clients -> pynng raw REP (front) -> envelope -> pyzmq DEALER (back) -> zmq REP."""
    rep, port = _rep_server(ctx)
    front = PynngRawSocket("REP")
    back = PyzmqRawSocket("DEALER", context=ctx)
    furl = front.bind("tcp://127.0.0.1:0")
    back.connect(f"tcp://127.0.0.1:{port}")
    drops: list[str] = []

    async def server() -> None:
        while True:
            body = await rep.recv()
            await rep.send(b"re:" + body)

    relays = (checks.relay(front, back, sp_to_zmtp, drops),
              checks.relay(back, front, zmtp_to_sp_reply, drops))
    tasks = [asyncio.create_task(c) for c in (*relays, server())]

    async def client(i: int) -> None:
        with pynng.Req0(dial=furl) as c:
            for j in range(5):
                await c.asend(f"{i}-{j}".encode())
                assert await asyncio.wait_for(c.arecv(), T) == f"re:{i}-{j}".encode()

    await asyncio.wait_for(asyncio.gather(*(client(i) for i in range(4))), 15)
    assert drops == []
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    front.close()
    back.close()
    rep.close(0)


# -- the polled face's monitor: failed handshakes and dials, logged and counted ----------------


def _wait(pred, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    import time

    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"condition not met in time: line {pred.__code__.co_firstlineno} {pred.__defaults__}"
        time.sleep(0.02)


def _failures(name: str, reason: str) -> int:
    from gateway.metrics import METRICS

    return METRICS.get("gateway_handshake_failures_total", socket=name, reason=reason)


def _lines(err: str, event: str) -> list[dict]:  # type: ignore[type-arg]
    import json

    return [json.loads(line) for line in err.splitlines() if f'"{event}"' in line]


def test_polled_front_reports_failed_handshakes(capsys: pytest.CaptureFixture[str]) -> None:
    """CURVE and PLAIN clients (mechanism), a REP client (pairing: libzmq closes silently), a
    raw CURVE greeting (mechanism, every time), raw garbage (no-detail): each counted under the
    socket's name and warned once per reason; a REQ client still gets through."""
    import socket as stdsocket

    from gateway.adapter import SideOptions
    from gateway.logging import configure

    configure("json", "info")
    front = pyzmq_adapter.ZmqPolled("REP", SideOptions())
    front.name = "orders/front"
    url = front.bind("tcp://127.0.0.1:0")
    port = int(url.rsplit(":", 1)[1])
    ctx = zmq.Context()
    try:
        pub, sec = zmq.curve_keypair()
        curve = ctx.socket(zmq.DEALER)
        curve.curve_serverkey, curve.curve_publickey, curve.curve_secretkey = pub, pub, sec
        plain = ctx.socket(zmq.DEALER)
        plain.plain_username, plain.plain_password = b"u", b"p"
        rep = ctx.socket(zmq.REP)
        # one at a time: libzmq's events do not say which connection a handshake event is for.
        # A CURVE, PLAIN or REP client may see the mismatch first and close (libzmq then
        # reports no detail, EPIPE/ECONNRESET): either counts.
        for s, reasons in ((curve, ("mechanism", "no-detail")), (plain, ("mechanism", "no-detail")),
                           (rep, ("pairing", "no-detail"))):
            # the last client's connections are settled (its handshake events seen)
            _wait(lambda: not front._watch._handshaking)
            start = sum(_failures("orders/front", r) for r in reasons)
            s.linger = 0
            s.connect(url)
            _wait(lambda reasons=reasons, start=start:
                  sum(_failures("orders/front", r) for r in reasons) > start)
            s.close(0)
        # a raw peer that asks for CURVE and stays: libzmq names the mismatch every time
        _wait(lambda: not front._watch._handshaking)
        mech = _failures("orders/front", "mechanism")
        with stdsocket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"\xff" + b"\x00" * 7 + b"\x01\x7f\x03")  # signature + major (RFC 37)
            got = b""
            while len(got) < 11:
                got += raw.recv(11 - len(got))
            raw.sendall(b"\x01" + b"CURVE".ljust(20, b"\x00") + b"\x00" * 32)
            _wait(lambda: _failures("orders/front", "mechanism") > mech)
        with stdsocket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            nodetail = _failures("orders/front", "no-detail")
            raw.sendall(b"GET / HTTP/1.1\r\n\r\n")  # libzmq takes it for ZMTP 1.0 and waits
        _wait(lambda: _failures("orders/front", "no-detail") > nodetail)
        req = ctx.socket(zmq.REQ)
        req.linger = 0
        req.connect(url)
        req.send(b"still")
        _wait(lambda: front.sock.poll(0) != 0)
        msg = front.recv_nowait()
        assert msg is not None and msg.body == (b"still",)
        assert front.send_nowait(msg._replace(body=(b"here",)))
        assert req.poll(5000) and req.recv() == b"here"
        req.close(0)
    finally:
        front.close()
        ctx.destroy(linger=0)
    lines = _lines(capsys.readouterr().err, "handshake.failed")
    reasons = [line["reason"] for line in lines]
    assert reasons.count("mechanism") == 1  # one line per endpoint and reason and interval
    assert reasons.count("no-detail") == 1 and reasons.count("pairing") <= 1
    for line in lines:
        assert line["socket"] == "orders/front" and line["level"] == "warning"
        assert line["endpoint"] == url and line["backend"] == "pyzmq"
    [mech] = [line for line in lines if line["reason"] == "mechanism"]
    assert "has not configured" in mech["detail"]


def test_polled_back_reports_failed_dials(capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.adapter import SideOptions
    from gateway.logging import configure
    from gateway.metrics import METRICS
    from gateway.tools.harness.procs import free_port

    configure("json", "info")
    back = pyzmq_adapter.ZmqPolled("REQ", SideOptions())
    before = METRICS.get("gateway_dial_failures_total", reason="retried")
    url = f"tcp://127.0.0.1:{free_port()}"
    try:
        back.connect(url)
        _wait(lambda: METRICS.get("gateway_dial_failures_total", reason="retried") >= before + 2)
    finally:
        back.close()
    [line] = _lines(capsys.readouterr().err, "dial.failed")  # one per interval
    assert line["url"] == url and line["reason"] == "retried" and line["retry_in"] > 0


def test_the_asyncio_face_counts_a_back_ends_peers_and_names_its_lines() -> None:
    """A request-reply back end on the asyncio face counts its peers from libzmq's monitor
    events (/readyz must not guess); a bridge names it, as on the polled face."""
    import time

    from gateway.device.sides import open_async
    from gateway.url import parse

    server = zmq.Context.instance().socket(zmq.ROUTER)
    server.linger = 0
    port = server.bind_to_random_port("tcp://127.0.0.1")
    try:
        sock, _ = open_async(parse(f">zmq+tcp://127.0.0.1:{port}?backend=pyzmq"), "REQ",
                             SideOptions(), "b/back")
        try:
            assert sock.name == "b/back"
            deadline = time.monotonic() + 5
            while sock.peers != 1:
                assert time.monotonic() < deadline, sock.peers
                time.sleep(0.02)
        finally:
            sock.close()
    finally:
        server.close()
    front = pyzmq_adapter.open_async("ROUTER", SideOptions())
    try:
        assert front.peers == -1  # a front is not counted on this face
    finally:
        front.close()
