"""One native socket with pipes over both wires at once: a libzmq peer (ZMTP) and an nng peer
(SP), on 127.0.0.1. The pattern works on Messages; each pipe's codec maps them to its wire."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pynng
import pytest
import zmq
import zmq.asyncio

import gateway
from gateway import Message
from interop_tests.helpers import run

N = 100


class Servers:
    """A libzmq REP and an nng REP that answer ``<origin>:<request>`` until stopped."""

    def __init__(self, zmq_kind: int = zmq.REP) -> None:
        self.ctx = zmq.asyncio.Context()
        self.zsock = self.ctx.socket(zmq_kind)
        self.zsock.setsockopt(zmq.LINGER, 0)
        self.zport = self.zsock.bind_to_random_port("tcp://127.0.0.1")
        self.nsock = pynng.Rep0(recv_timeout=15000, send_timeout=5000)
        self.naddr = str(self.nsock.listen("tcp://127.0.0.1:0").local_address)
        self.seen: dict[str, list[bytes]] = {"zmq": [], "nng": []}
        self.task: asyncio.Task[None] | None = None
        # nng is served from a thread with blocking calls: cancelling a pending pynng
        # ``arecv`` can hang the event loop (pynng 0.9.0); closing the socket ends the thread.
        self.thread = threading.Thread(target=self._nng, daemon=True)

    def start(self) -> None:
        self.task = asyncio.create_task(self._zmq())
        self.thread.start()

    async def _zmq(self) -> None:
        while True:
            frames = await self.zsock.recv_multipart()
            self.seen["zmq"].append(frames[-1])
            await self.zsock.send_multipart([*frames[:-1], b"zmq:" + frames[-1]])

    def _nng(self) -> None:
        while True:
            try:
                body = self.nsock.recv()
                self.seen["nng"].append(body)
                self.nsock.send(b"nng:" + body)
            except pynng.Timeout:
                continue  # idle: keep serving until the socket closes
            except pynng.Closed:
                return

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        self.zsock.close(linger=0)
        self.ctx.destroy(linger=0)
        self.nsock.close()
        await asyncio.to_thread(self.thread.join, 5)


@contextlib.asynccontextmanager
async def on_both_wires(kind: str, sp_scheme: str = "sp",
                        **options: Any) -> AsyncIterator[tuple[Servers, Any]]:
    """Both servers running, and a native ``kind`` socket with one pipe to each (the nng one
    dialled as ``<sp_scheme>+tcp``); everything stopped when the block ends."""
    servers = Servers()
    servers.start()
    try:
        async with gateway.Socket(kind, **options) as sock:
            sock.connect(f"zmq+tcp://127.0.0.1:{servers.zport}")
            sock.connect(f"{sp_scheme}+tcp://{servers.naddr}")
            await sock.wait_peers(2)
            yield servers, sock
    finally:
        await servers.stop()


@pytest.mark.parametrize("relaxed", [False, True], ids=["strict", "relaxed"])
def test_native_req_load_balances_over_libzmq_and_nng(relaxed: bool) -> None:
    async def main() -> None:
        async with on_both_wires("REQ", sp_scheme="nng", relaxed=relaxed) as (servers, req):
            origins = []
            for i in range(N):
                await req.send(b"q%03d" % i)
                reply = await req.recv()
                origin, _, echoed = reply.partition(b":")
                assert echoed == b"q%03d" % i  # the reply to this very request
                origins.append(origin)
            counts = Counter(origins)
            assert counts == {b"zmq": N // 2, b"nng": N // 2}  # round-robin: strictly alternating
            assert all(a != b for a, b in zip(origins, origins[1:], strict=False))
            # every request reached exactly one server, none twice
            both = sorted(servers.seen["zmq"] + servers.seen["nng"])
            assert both == [b"q%03d" % i for i in range(N)]

    run(main())


def test_native_req_keeps_working_when_one_wire_goes_away() -> None:
    async def main() -> None:
        async with on_both_wires("REQ") as (servers, req):
            servers.nsock.close()  # nng server gone: everything goes to libzmq
            async with asyncio.timeout(5):
                while req.peers != 1:
                    await asyncio.sleep(0.01)
            for i in range(10):
                await req.send(b"q%d" % i)
                assert await req.recv() == b"zmq:q%d" % i

    run(main())


def test_native_dealer_over_both_wires() -> None:
    """A DEALER's hops go on the wire untouched: (rid, b"") is an SP request id (the empty hop
    adds no bytes) and, on ZMTP, an app envelope frame plus the delimiter a REP needs."""

    async def main() -> None:
        async with on_both_wires("DEALER") as (servers, dealer):
            for i in range(N):
                rid = (0x80000000 | i).to_bytes(4, "big")
                await dealer.send_msg(Message((rid, b""), (b"d%03d" % i,)))
            replies = [await dealer.recv_msg() for _ in range(N)]
            by_rid = {}
            for msg in replies:
                origin, _, body = msg.body[0].partition(b":")
                if origin == b"zmq":
                    assert msg.hops[1:] == (b"",)  # REP backtrace: the frame + delimiter
                else:
                    assert origin == b"nng" and len(msg.hops) == 1  # the rid, moved back
                by_rid[msg.hops[0]] = (origin, body)
            assert sorted(by_rid) == sorted((0x80000000 | i).to_bytes(4, "big") for i in range(N))
            for rid, (_, body) in by_rid.items():
                assert body == b"d%03d" % (int.from_bytes(rid, "big") & 0x7FFFFFFF)
            assert Counter(origin for origin, _ in by_rid.values()) == {b"zmq": N // 2,
                                                                        b"nng": N // 2}

    run(main())


def test_native_rep_serves_libzmq_and_nng_clients() -> None:
    async def main() -> None:
        ctx = zmq.asyncio.Context()
        zreq = ctx.socket(zmq.REQ)
        zreq.setsockopt(zmq.LINGER, 0)
        nreq = pynng.Req0(recv_timeout=5000)
        try:
            async with gateway.Socket("REP") as rep:
                zreq.connect(gateway.url.parse(rep.bind("zmq+tcp://127.0.0.1:0")).lib_url)
                nreq.dial(gateway.url.parse(rep.bind("sp+tcp://127.0.0.1:0")).lib_url, block=False)
                await rep.wait_peers(2)
                for i in range(20):
                    await zreq.send(b"z%d" % i)
                    await asyncio.to_thread(nreq.send, b"n%d" % i)
                    for _ in range(2):
                        body = await rep.recv()
                        await rep.send(body.upper())
                    assert await zreq.recv() == b"Z%d" % i
                    assert await asyncio.to_thread(nreq.recv) == b"N%d" % i
        finally:
            zreq.close(linger=0)
            ctx.destroy(linger=0)
            nreq.close()

    run(main())


# -- one port, both wires (any+) -----------------------------------------------------------------

def test_one_any_port_takes_libzmq_and_nng_clients() -> None:
    """A native ROUTER bound once on ``any+tcp://``: a libzmq DEALER and an nng REQ on that
    same port, each answered on its own wire (the first byte chose the pipe's codec)."""

    async def main() -> None:
        ctx = zmq.asyncio.Context()
        async with gateway.Socket("ROUTER") as router:
            port = router.bind("any+tcp://127.0.0.1:0").rsplit(":", 1)[1]
            dealer = ctx.socket(zmq.DEALER)
            dealer.linger = 0
            dealer.connect(f"tcp://127.0.0.1:{port}")
            nreq = pynng.Req0(recv_timeout=5000, send_timeout=5000)
            nreq.dial(f"tcp://127.0.0.1:{port}", block=False)
            try:
                await router.wait_peers(2)
                async with asyncio.timeout(10):
                    for i in range(N):
                        await dealer.send_multipart([b"", b"z%d" % i])
                        await asyncio.to_thread(nreq.send, b"n%d" % i)
                        for _ in range(2):
                            msg = await router.recv_msg()
                            family = router.family_of(msg.hops[0])
                            assert family == ("sp" if msg.body[0][:1] == b"n" else "zmtp")
                            await router.send_msg(Message(msg.hops, (b"re:" + msg.body[0],)))
                        assert await dealer.recv_multipart() == [b"", b"re:z%d" % i]
                        assert await asyncio.to_thread(nreq.recv) == b"re:n%d" % i
            finally:
                dealer.close(0)
                nreq.close()
                ctx.destroy(0)

    run(main())
