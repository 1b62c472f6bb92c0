"""The native engine's PUB/SUB/XPUB/XSUB, PUSH/PULL and PAIR against libzmq 4.3.x (pyzmq),
both bind directions, on 127.0.0.1.

libzmq >= 4.3.3 greets ZMTP 3.1 and subscribes with RFC 37 SUBSCRIBE/CANCEL commands; the
3.0 message form is covered byte by byte in tests/test_engine_patterns.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import zmq
import zmq.asyncio

import gateway
from interop_tests.helpers import Flood, linked_peer, number_of, pair_busy, pairing_errors, run

BINDERS = ("native", "libzmq")
QUIET = 0.3


@pytest.fixture
def ctx() -> Any:
    c = zmq.asyncio.Context()
    yield c
    c.destroy(linger=0)


def zsock(ctx: zmq.asyncio.Context, kind: int, **opts: int) -> zmq.asyncio.Socket:
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    for name, value in opts.items():
        s.setsockopt(getattr(zmq, name), value)
    return s


def link(native: gateway.Socket, lib: zmq.asyncio.Socket, binder: str) -> str:
    """Connect the two (``binder`` binds); the library's URL of the bound end."""
    if binder == "native":
        url = gateway.url.parse(native.bind("zmq+tcp://127.0.0.1:0")).lib_url
        lib.connect(url)
        return url
    port = lib.bind_to_random_port("tcp://127.0.0.1")
    native.connect(f"zmq+tcp://127.0.0.1:{port}")
    return f"tcp://127.0.0.1:{port}"


def linked(ctx: zmq.asyncio.Context, kind: str, lib_kind: int, binder: str, wait: bool = True,
           native_opts: dict[str, Any] | None = None,
           **lib_opts: int,
           ) -> AbstractAsyncContextManager[tuple[gateway.Socket, zmq.asyncio.Socket]]:
    """A native socket of ``kind`` and a libzmq one of ``lib_kind`` (:func:`linked_peer`)."""
    return linked_peer(kind, native_opts, lambda: zsock(ctx, lib_kind, **lib_opts), link, binder,
                       wait)


async def until(pred: Callable[[], bool], timeout: float = 5.0,
                lib: zmq.asyncio.Socket | None = None) -> None:
    """Poll ``pred``; ``lib``: a libzmq socket to poll meanwhile (libzmq processes a new pipe's
    attach, and sends a SUB's subscriptions on it, only when the application calls in)."""
    async with asyncio.timeout(timeout):
        while not pred():
            if lib is not None:
                await lib.poll(10)
            else:
                await asyncio.sleep(0.01)


async def zrecv(sock: zmq.asyncio.Socket, timeout: float = 5.0) -> bytes:
    async with asyncio.timeout(timeout):
        return bytes(await sock.recv())


async def znothing(sock: zmq.asyncio.Socket) -> None:
    assert not await sock.poll(int(QUIET * 1000))


def holders(pub: gateway.Socket) -> dict[bytes, int]:
    return pub.pattern.holders  # type: ignore[attr-defined,no-any-return]


# -- pub/sub ------------------------------------------------------------------------------------


@pytest.mark.parametrize("binder", BINDERS)
def test_libzmq_sub_and_native_pub(ctx: Any, binder: str) -> None:
    """Subscribed, not subscribed, a prefix of another, unsubscribe, counted, empty."""

    async def main() -> None:
        async with linked(ctx, "PUB", zmq.SUB, binder, wait=False) as (pub, sub):
            sub.subscribe(b"a.")
            sub.subscribe(b"b.")
            await until(lambda: holders(pub) == {b"a.": 1, b"b.": 1}, lib=sub)  # 3.1 commands
            for m in (b"a.1", b"b.1", b"c.1", b"a", b"a.2"):
                await pub.send(m)
            assert [await zrecv(sub) for _ in range(3)] == [b"a.1", b"b.1", b"a.2"]
            await znothing(sub)
            sub.unsubscribe(b"b.")
            await until(lambda: holders(pub) == {b"a.": 1}, lib=sub)
            await pub.send(b"b.2")
            await pub.send(b"a.3")
            assert await zrecv(sub) == b"a.3"
            sub.subscribe(b"a.")  # counted at libzmq's SUB: one unsubscribe leaves one
            sub.unsubscribe(b"a.")
            await pub.send(b"a.4")
            assert await zrecv(sub) == b"a.4"
            sub.subscribe(b"")  # the empty subscription: everything
            await until(lambda: b"" in holders(pub), lib=sub)
            await pub.send_multipart([b"zz", b"body"])
            assert await sub.recv_multipart() == [b"zz", b"body"]

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_native_sub_and_libzmq_xpub(ctx: Any, binder: str) -> None:
    """libzmq's XPUB sees the native SUB's subscriptions (commands, counted on our side)."""

    async def main() -> None:
        async with linked(ctx, "SUB", zmq.XPUB, binder) as (sub, xpub):
            sub.subscribe(b"a.")
            assert await zrecv(xpub) == b"\x01a."
            sub.subscribe(b"a.")  # a second count: libzmq's XPUB holds the pipe once
            sub.subscribe(b"a")  # a prefix of a.
            assert await zrecv(xpub) == b"\x01a"
            for m in (b"a.1", b"b.1", b"ab"):
                await xpub.send(m)
            async with asyncio.timeout(5):
                assert [await sub.recv() for _ in range(2)] == [b"a.1", b"ab"]
            sub.unsubscribe(b"a.")  # one of two counts
            await znothing(xpub)
            sub.unsubscribe(b"a.")
            sub.unsubscribe(b"a")
            assert {await zrecv(xpub), await zrecv(xpub)} == {b"\x00a.", b"\x00a"}

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_native_sub_and_libzmq_pub_late_joiner(ctx: Any, binder: str) -> None:
    async def main() -> None:
        async with linked(ctx, "SUB", zmq.PUB, binder, wait=False,
                          native_opts={"subscribe": [b"t."]}) as (sub, pub):
            got: list[bytes] = []

            async def pump() -> None:  # libzmq drops until the subscription arrived
                for i in range(500):
                    await pub.send(b"x.%d" % i)
                    await pub.send(b"t.%d" % i)
                    await asyncio.sleep(0.005)

            task = asyncio.ensure_future(pump())
            async with asyncio.timeout(10):
                while len(got) < 5:
                    got.append(await sub.recv())
            task.cancel()
            assert all(m.startswith(b"t.") for m in got)
            nums = [int(m[2:]) for m in got]
            assert nums == sorted(nums)  # in order per publisher

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_native_xpub_and_libzmq_xsub(ctx: Any, binder: str) -> None:
    async def main() -> None:
        async with linked(ctx, "XPUB", zmq.XSUB, binder) as (xpub, xsub):
            await xsub.send(b"\x01k")
            async with asyncio.timeout(5):
                assert await xpub.recv() == b"\x01k"
                await xsub.send(b"upstream")  # libzmq's XSUB sends other messages upstream
                assert await xpub.recv() == b"upstream"
            await xpub.send(b"k1")
            await xpub.send(b"j1")
            assert await zrecv(xsub) == b"k1"
            await znothing(xsub)
            xsub.close()  # the departing subscriber's prefix is cancelled
            async with asyncio.timeout(5):
                assert await xpub.recv() == b"\x00k"

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_native_xsub_and_libzmq_pub(ctx: Any, binder: str) -> None:
    async def main() -> None:
        async with linked(ctx, "XSUB", zmq.XPUB, binder) as (xsub, xpub):
            await xsub.send(b"\x01")  # the empty subscription, as a device sets it
            assert await zrecv(xpub) == b"\x01"
            await xpub.send_multipart([b"any", b"thing"])
            async with asyncio.timeout(5):
                assert await xsub.recv_multipart() == [b"any", b"thing"]

    run(main())


# -- pipeline -----------------------------------------------------------------------------------

N = 1000


@pytest.mark.parametrize("binder", BINDERS)
def test_native_push_to_libzmq_pull(ctx: Any, binder: str) -> None:
    async def main() -> None:
        async with linked(ctx, "PUSH", zmq.PULL, binder, wait=False) as (push, pull):
            for i in range(N):
                await push.send_multipart([b"%d" % i, b""])  # frames as they are
            got = [await pull.recv_multipart() for _ in range(N)]
            assert got == [[b"%d" % i, b""] for i in range(N)]

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_libzmq_push_to_native_pull(ctx: Any, binder: str) -> None:
    async def main() -> None:
        async with linked(ctx, "PULL", zmq.PUSH, binder, wait=False) as (pull, push):
            for i in range(N):
                await push.send(b"%d" % i)
            async with asyncio.timeout(10):
                got = [await pull.recv() for _ in range(N)]
            assert got == [b"%d" % i for i in range(N)]

    run(main())


def test_native_push_back_pressure_from_a_slow_libzmq_pull(ctx: Any) -> None:
    """A PULL that does not read: the native PUSH's sends wait (bounded: its write buffer,
    the kernel's, libzmq's RCVHWM); nothing is dropped; all arrive once it reads."""
    total, size = 400, 64 * 1024

    async def main() -> None:
        async with linked(ctx, "PUSH", zmq.PULL, "native", native_opts={"hwm": 4},
                          RCVHWM=4) as (push, pull):
            flood = Flood(push.send, total, size)
            await flood.assert_held(still=0.5)  # waiting, not dropping
            async with asyncio.timeout(30):
                got = [number_of(await pull.recv()) for _ in range(total)]
            await flood.task
            assert got == list(range(total))

    run(main(), timeout=60)


def test_libzmq_push_back_pressure_from_a_slow_native_pull(ctx: Any) -> None:
    total, size = 400, 64 * 1024

    async def main() -> None:
        async with linked(ctx, "PULL", zmq.PUSH, "native", native_opts={"hwm": 4},
                          SNDHWM=4) as (pull, push):
            flood = Flood(push.send, total, size)
            await flood.assert_held()
            assert pull.inbox_size <= 4  # the native inbox stays bounded
            async with asyncio.timeout(30):
                got = [number_of(await pull.recv()) for _ in range(total)]
            await flood.task
            assert got == list(range(total))

    run(main(), timeout=60)


# -- pair ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("binder", BINDERS)
def test_native_pair_and_libzmq_pair_with_reconnect(ctx: Any, binder: str) -> None:
    async def main() -> None:
        async with gateway.Socket("PAIR", reconnect_ivl=0.05) as pair:
            lib = zsock(ctx, zmq.PAIR)
            url = link(pair, lib, binder)
            await pair.wait_peers(1)
            await lib.send_multipart([b"a", b"b"])
            async with asyncio.timeout(5):
                assert await pair.recv_multipart() == [b"a", b"b"]
            await pair.send(b"back")
            assert await zrecv(lib) == b"back"
            lib.close()  # the library side goes; a new one comes (binding or connecting)
            await until(lambda: pair.peers == 0)
            lib = zsock(ctx, zmq.PAIR)
            if binder == "native":
                lib.connect(url)
            else:
                lib.bind(url)  # the native PAIR redials
            await pair.wait_peers(1)
            await pair.send(b"again")
            assert await zrecv(lib) == b"again"
            await lib.send(b"and back")
            async with asyncio.timeout(5):
                assert await pair.recv() == b"and back"
            lib.close()

    run(main())


def test_native_pair_refuses_a_second_libzmq_pair(ctx: Any) -> None:
    async def main() -> None:
        async with gateway.Socket("PAIR") as pair:
            url = gateway.url.parse(pair.bind("zmq+tcp://127.0.0.1:0")).lib_url
            first = zsock(ctx, zmq.PAIR)
            first.connect(url)
            await pair.wait_peers(1)
            before = pair_busy()
            second = zsock(ctx, zmq.PAIR)
            second.connect(url)
            await until(lambda: pair_busy() > before)
            await pair.send(b"to the first")
            assert await zrecv(first) == b"to the first"
            await znothing(second)
            first.close()
            second.close()

    run(main())


@pytest.mark.parametrize(("native", "lib"), [("PUB", zmq.PULL), ("PAIR", zmq.SUB),
                                             ("PUSH", zmq.PAIR), ("SUB", zmq.SUB),
                                             ("XPUB", zmq.PUB), ("PULL", zmq.PULL)])
def test_illegal_pairings_refused(ctx: Any, native: str, lib: int) -> None:
    async def main() -> None:
        before = pairing_errors()
        async with linked(ctx, native, lib, "native", wait=False) as (sock, _):
            await until(lambda: pairing_errors() > before)
            assert sock.peers == 0

    run(main())


def test_curve_libzmq_sub_and_native_xpub(ctx: Any) -> None:
    """Under CURVE a libzmq 4.3.5 SUB's SUBSCRIBE/CANCEL travel sealed in MESSAGE boxes (RFC 26);
    the native XPUB opens them, and its published messages are sealed toward the SUB."""
    from zmq.utils import z85

    from gateway.security import Security

    server_pub, server_sec = zmq.curve_keypair()
    client_pub, client_sec = zmq.curve_keypair()

    async def main() -> None:
        sec = Security("CURVE", True, z85.decode(server_pub), z85.decode(server_sec))
        async with gateway.Socket("XPUB", security=sec) as xpub:
            url = gateway.url.parse(xpub.bind("zmq+tcp://127.0.0.1:0")).lib_url
            sub = zsock(ctx, zmq.SUB)
            sub.curve_serverkey, sub.curve_publickey, sub.curve_secretkey = (
                server_pub, client_pub, client_sec)
            sub.connect(url)
            sub.subscribe(b"s.")
            async with asyncio.timeout(5):
                while True:  # libzmq sends its subscription once the pipe is attached
                    await sub.poll(10)
                    if xpub.inbox_size:
                        break
                assert await xpub.recv() == b"\x01s."
            await xpub.send(b"x.no")
            await xpub.send(b"s.yes")
            assert await zrecv(sub) == b"s.yes"
            sub.unsubscribe(b"s.")
            async with asyncio.timeout(5):
                while not xpub.inbox_size:
                    await sub.poll(10)
                assert await xpub.recv() == b"\x00s."
            sub.close()

    run(main())
