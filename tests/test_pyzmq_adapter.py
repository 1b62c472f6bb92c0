"""gateway_plugins.pyzmq_adapter against real libzmq peers on 127.0.0.1 (ephemeral ports)."""

from __future__ import annotations

import asyncio

import gateway_plugins.pyzmq_adapter as pyzmq_adapter
import pynng
import pytest
import zmq
import zmq.asyncio
from _adapter_checks import check_bind_returns_real_port, registered_adapters, relay, run
from gateway_plugins.pynng_adapter import PynngRawSocket
from gateway_plugins.pyzmq_adapter import PyzmqRawSocket

from gateway.envelope import sp_to_zmtp, zmtp_to_sp_reply
from gateway.errors import Closed, ConfigError
from gateway.message import Message

T = 5  # seconds: every await on the network is bounded


@pytest.fixture
def ctx():  # type: ignore[no-untyped-def]
    c = zmq.asyncio.Context()
    yield c
    c.destroy(linger=0)


def test_registers_through_pluggy() -> None:
    got = registered_adapters(pyzmq_adapter, "pyzmq")
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
    check_bind_returns_real_port(lambda: PyzmqRawSocket("ROUTER", context=ctx))


def test_router_with_req_client(ctx) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        s = PyzmqRawSocket("ROUTER", context=ctx)
        url = s.bind("tcp://127.0.0.1:0")
        c = ctx.socket(zmq.REQ)
        c.connect(url)
        await c.send(b"hi")
        msg = await asyncio.wait_for(s.recv_msg(), T)
        ident = msg.hops[0]
        assert msg == Message((ident, b""), (b"hi",))
        assert len(ident) == 5 and ident[0] == 0  # libzmq generated identity
        await asyncio.wait_for(s.send_msg(Message(msg.hops, (b"ho",))), T)
        assert await asyncio.wait_for(c.recv_multipart(), T) == [b"ho"]
        c.close(0)
        s.close()

    run(main())


def test_router_with_dealer_clients(ctx) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        s = PyzmqRawSocket("ROUTER", context=ctx)
        url = s.bind("tcp://127.0.0.1:0")
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.IDENTITY, b"client-A")
        d.connect(url)
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

    run(main())


def test_dealer_adapter_with_rep_server(ctx) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        rep = ctx.socket(zmq.REP)
        port = rep.bind_to_random_port("tcp://127.0.0.1")
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

    run(main())


def test_close_wakes_a_pending_recv(ctx) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
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

    run(main())


def test_cancelled_recv_stays_cancelled(ctx) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
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

    run(main())


def test_device_preview_sp_clients_to_zmq_rep(ctx) -> None:  # type: ignore[no-untyped-def]
    """nng Req0 clients -> pynng raw REP (front) -> envelope -> pyzmq DEALER (back) -> zmq REP."""

    async def main() -> None:
        rep = ctx.socket(zmq.REP)
        port = rep.bind_to_random_port("tcp://127.0.0.1")
        front = PynngRawSocket("REP")
        back = PyzmqRawSocket("DEALER", context=ctx)
        furl = front.bind("tcp://127.0.0.1:0")
        back.connect(f"tcp://127.0.0.1:{port}")
        drops: list[str] = []

        async def server() -> None:
            while True:
                body = await rep.recv()
                await rep.send(b"re:" + body)

        tasks = [asyncio.create_task(c) for c in (relay(front, back, sp_to_zmtp, drops),
                                                  relay(back, front, zmtp_to_sp_reply, drops),
                                                  server())]

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

    run(main())
