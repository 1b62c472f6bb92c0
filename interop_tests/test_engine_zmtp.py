"""The native engine against libzmq (pyzmq) over ZMTP on 127.0.0.1.

Every ordered pair of socket types (native type x libzmq type, so both "native is the client"
and "libzmq is the client"), both bind directions: legal pairs (``pairing.zmtp_legal``) exchange
100 messages with every envelope frame checked; illegal pairs are refused at the handshake within
1.5 s and no message crosses. Then targeted envelope checks: delimiters, REP backtraces with app
envelope frames, generated and peer-chosen identities, ROUTER to ROUTER.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import zmq
import zmq.asyncio

import gateway
from gateway import Message
from gateway.metrics import METRICS
from gateway.patterns.pairing import SOCKET_TYPES, zmtp_legal
from interop_tests.helpers import pairing_errors, run

N = 100
#: a refused type is closed at READY: within half the 10 s handshake timeout, so a refusal
#: left to that timeout still fails (1.5 s left a loaded machine little room)
REFUSE_WITHIN = 5.0
QUIET = 0.3  # how long "nothing crosses" is watched
ZTYPE = {"REQ": zmq.REQ, "REP": zmq.REP, "DEALER": zmq.DEALER, "ROUTER": zmq.ROUTER}

# Identities: ROUTERs always name themselves (ROUTER-ROUTER needs it); a libzmq DEALER picks
# its own identity (the native ROUTER must use it); native DEALERs and all REQs do not (the
# other side generates 00 + uint32).
LIB_IDENTITY = {"DEALER": b"lib-dealer", "ROUTER": b"lib-router"}
NATIVE_IDENTITY = {"ROUTER": b"native-router"}


def is_generated_id(rid: bytes) -> bool:
    return len(rid) == 5 and rid[0] == 0


class End:
    """One side of a cell: a native socket or a libzmq socket, with the same calls."""

    def __init__(self, kind: str, native: bool, ctx: zmq.asyncio.Context) -> None:
        self.kind = kind
        self.native = native
        if native:
            self.identity = NATIVE_IDENTITY.get(kind, b"")
            self.sock: Any = gateway.Socket(kind, identity=self.identity, router_mandatory=True)
        else:
            self.identity = LIB_IDENTITY.get(kind, b"")
            self.sock = ctx.socket(ZTYPE[kind])
            self.sock.setsockopt(zmq.LINGER, 0)
            if self.identity:
                self.sock.setsockopt(zmq.ROUTING_ID, self.identity)
            if kind == "ROUTER":
                self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)

    def bind(self) -> str:
        if self.native:
            return gateway.url.parse(self.sock.bind("zmq+tcp://127.0.0.1:0")).lib_url
        return f"tcp://127.0.0.1:{self.sock.bind_to_random_port('tcp://127.0.0.1')}"

    def connect(self, lib_url: str) -> None:
        self.sock.connect("zmq+" + lib_url if self.native else lib_url)

    async def send(self, frames: list[bytes]) -> None:
        if self.native or self.kind != "ROUTER":
            await self.sock.send_multipart(frames)
            return
        while True:  # ROUTER_MANDATORY: the peer may not have finished its handshake yet
            try:
                await self.sock.send_multipart(frames)
                return
            except zmq.ZMQError as exc:
                if exc.errno != zmq.EHOSTUNREACH:
                    raise
                await asyncio.sleep(0.01)

    async def recv(self) -> list[bytes]:
        return list(await self.sock.recv_multipart())

    def close(self) -> None:
        self.sock.close(linger=0) if not self.native else self.sock.close()


def request_frames(client: str, server: str, i: int, server_id: bytes) -> list[bytes]:
    body = b"req-%03d" % i + (b"." * 300 if i % 10 == 0 else b"")  # some long frames too
    if client == "REQ":
        return [body]
    if client == "ROUTER":
        return [server_id, body]
    if server == "REP":
        return [b"", body]  # a DEALER talking to a REP supplies the delimiter itself
    if server == "DEALER":
        return [b"part-%d" % i, body]  # multi-frame, no envelope at all
    return [body]  # DEALER -> ROUTER without a delimiter: lossless


def expected_at_server(client: str, server: str, sent: list[bytes], client_rid: bytes) -> list[bytes]:
    if server == "REP":
        return [sent[-1]]
    if server == "DEALER":
        return sent
    # ROUTER: the client's routing id first, then exactly what the client's pattern put on the wire
    if client == "REQ":
        return [client_rid, b"", *sent]
    if client == "ROUTER":
        return [client_rid, *sent[1:]]
    return [client_rid, *sent]


def reply_to(server: str, got: list[bytes]) -> list[bytes]:
    if server == "REP":
        return [b"re:" + got[-1]]
    return [*got[:-1], b"re:" + got[-1]]  # ROUTER/DEALER: return the envelope it got


def expected_at_client(client: str, server: str, sent: list[bytes], server_id: bytes) -> list[bytes]:
    reply = b"re:" + sent[-1]
    if client == "REQ":
        return [reply]
    if client == "ROUTER":
        return [server_id, reply]
    return [*sent[:-1], reply]


def initiators(native: str, lib: str) -> list[str]:
    """Which side starts the conversation: the REQ, else the DEALER facing a REP/ROUTER;
    DEALER-DEALER and ROUTER-ROUTER are run both ways."""
    if native == lib:
        return ["native", "libzmq"]
    for starter in ("REQ", "DEALER"):
        if starter in (native, lib):
            return ["native" if native == starter else "libzmq"]
    raise AssertionError(f"no legal pair {native}-{lib} without REQ or DEALER")


def legal_cells() -> Iterator[Any]:
    for native in SOCKET_TYPES:
        for lib in SOCKET_TYPES:
            if not zmtp_legal(native, lib):
                continue
            for binder in ("native", "libzmq"):
                for starter in initiators(native, lib):
                    yield pytest.param(native, lib, binder, starter,
                                       id=f"native{native}-libzmq{lib}-{binder}Binds-{starter}Sends")


def illegal_cells() -> Iterator[Any]:
    for native in SOCKET_TYPES:
        for lib in SOCKET_TYPES:
            if zmtp_legal(native, lib):
                continue
            for binder in ("native", "libzmq"):
                yield pytest.param(native, lib, binder, id=f"native{native}-libzmq{lib}-{binder}Binds")


def test_cell_counts() -> None:
    assert len(list(legal_cells())) == 2 * (8 + 2 * 2)  # 10 legal pairs, 2 of them run both ways
    assert len(list(illegal_cells())) == 2 * 6


@pytest.mark.parametrize(("native_kind", "lib_kind", "binder", "starter"), list(legal_cells()))
def test_legal_pair_exchanges(native_kind: str, lib_kind: str, binder: str, starter: str) -> None:
    async def main() -> None:
        ctx = zmq.asyncio.Context()
        native = End(native_kind, True, ctx)
        lib = End(lib_kind, False, ctx)
        try:
            if binder == "native":
                lib.connect(native.bind())
            else:
                native.connect(lib.bind())
            await native.sock.wait_peers(1, timeout=5)
            client, server = (native, lib) if starter == "native" else (lib, native)
            client_rid = None
            for i in range(N):
                sent = request_frames(client.kind, server.kind, i, server.identity)
                await client.send(sent)
                got = await server.recv()
                if server.kind == "ROUTER":
                    rid = got[0]
                    if client.identity:
                        assert rid == client.identity  # a peer-chosen identity is the routing id
                    elif server.native:
                        assert rid[:1] == b"\x00" and len(rid) == 5  # engine: 00 + uint32
                    else:
                        assert is_generated_id(rid)  # libzmq: 00 + uint32
                    assert client_rid in (None, rid)  # stable for the connection
                    client_rid = rid
                assert got == expected_at_server(client.kind, server.kind, sent, client_rid or b"")
                await server.send(reply_to(server.kind, got))
                back = await client.recv()
                assert back == expected_at_client(client.kind, server.kind, sent, server.identity)
            assert native.sock.peers == 1
        finally:
            native.close()
            lib.close()
            ctx.destroy(linger=0)

    run(main())


@pytest.mark.parametrize(("native_kind", "lib_kind", "binder"), list(illegal_cells()))
def test_illegal_pair_refused(native_kind: str, lib_kind: str, binder: str) -> None:
    async def main() -> None:
        ctx = zmq.asyncio.Context()
        native = End(native_kind, True, ctx)
        lib = End(lib_kind, False, ctx)
        before = pairing_errors()
        try:
            if binder == "native":
                lib.connect(native.bind())
            else:
                native.connect(lib.bind())
            # refused at READY, within the bound: the native side counts a PairingError close
            async with asyncio.timeout(REFUSE_WITHIN):
                while pairing_errors() == before:
                    await asyncio.sleep(0.01)
            assert native.sock.peers == 0

            # and no message crosses, whichever side tries
            if lib_kind in ("REQ", "DEALER"):
                try:
                    lib.sock.send_multipart([b"", b"from libzmq"] if lib_kind == "DEALER"
                                            else [b"from libzmq"], flags=zmq.NOBLOCK)
                except zmq.Again:
                    pass  # no pipe at all: that is refusal too

            async def native_side() -> None:
                if native_kind in ("REQ", "DEALER"):
                    with pytest.raises(TimeoutError):  # no pipe ever becomes ready
                        await asyncio.wait_for(native.sock.send(b"from native"), QUIET)
                if native_kind == "REQ":
                    assert not native.sock.inbox_size
                else:
                    with pytest.raises(TimeoutError):
                        await asyncio.wait_for(native.sock.recv(), QUIET)

            async def lib_side() -> None:
                assert await lib.sock.poll(int(QUIET * 1000), zmq.POLLIN) == 0

            await asyncio.gather(native_side(), lib_side())
            assert native.sock.peers == 0
        finally:
            native.close()
            lib.close()
            ctx.destroy(linger=0)

    run(main())


# -- targeted envelope checks --------------------------------------------------------------------


class Pair:
    """A native socket and a libzmq socket, the native one bound."""

    def __init__(self, native_kind: str, lib_kind: int, *, raw: bool = False,
                 lib_identity: bytes = b"", **native_opts: Any) -> None:
        self.ctx = zmq.asyncio.Context()
        self.native = gateway.Socket(native_kind, raw=raw, **native_opts)
        self.lib = self.ctx.socket(lib_kind)
        self.lib.setsockopt(zmq.LINGER, 0)
        if lib_identity:
            self.lib.setsockopt(zmq.ROUTING_ID, lib_identity)

    async def __aenter__(self) -> Pair:
        url = self.native.bind("zmq+tcp://127.0.0.1:0")
        self.lib.connect(gateway.url.parse(url).lib_url)
        await self.native.wait_peers(1, timeout=5)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.native.close()
        self.lib.close(linger=0)
        self.ctx.destroy(linger=0)


def test_native_router_sees_generated_id_and_delimiter_from_libzmq_req() -> None:
    async def main() -> None:
        async with Pair("ROUTER", zmq.REQ) as p:
            await p.lib.send(b"hello")
            msg = await p.native.recv_msg()
            rid = msg.hops[0]
            assert msg == Message((rid, b""), (b"hello",))
            assert rid[:1] == b"\x00" and len(rid) == 5
            await p.native.send_msg(Message((rid, b""), (b"world",)))
            assert await p.lib.recv_multipart() == [b"world"]

    run(main())


@pytest.mark.parametrize("lib_kind", [zmq.REQ, zmq.DEALER], ids=["REQ", "DEALER"])
def test_peer_chosen_identity_is_the_native_routing_id(lib_kind: int) -> None:
    async def main() -> None:
        async with Pair("ROUTER", lib_kind, lib_identity=b"chosen-by-peer") as p:
            await p.lib.send_multipart([b"", b"hi"] if lib_kind == zmq.DEALER else [b"hi"])
            msg = await p.native.recv_msg()
            assert msg == Message((b"chosen-by-peer", b""), (b"hi",))
            await p.native.send_multipart([b"chosen-by-peer", b"", b"ho"])
            got = await p.lib.recv_multipart()
            assert got == ([b"", b"ho"] if lib_kind == zmq.DEALER else [b"ho"])

    run(main())


def test_libzmq_router_sees_native_req_envelope() -> None:
    async def main() -> None:
        ctx = zmq.asyncio.Context()
        router = ctx.socket(zmq.ROUTER)
        port = router.bind_to_random_port("tcp://127.0.0.1")
        try:
            async with gateway.Socket("REQ") as req, gateway.Socket("DEALER", identity=b"nd") as dealer:
                req.connect(f"zmq+tcp://127.0.0.1:{port}")
                dealer.connect(f"zmq+tcp://127.0.0.1:{port}")
                await req.send_multipart([b"a", b"b"])
                rid, *rest = await router.recv_multipart()
                assert len(rid) == 5 and rid[0] == 0 and rest == [b"", b"a", b"b"]
                await router.send_multipart([rid, b"", b"c", b"d"])
                assert await req.recv_multipart() == [b"c", b"d"]
                await dealer.send_multipart([b"no", b"delimiter"])
                assert await router.recv_multipart() == [b"nd", b"no", b"delimiter"]
                await router.send_multipart([b"nd", b"x", b"", b"y"])
                assert await dealer.recv_msg() == Message((b"x", b""), (b"y",))
        finally:
            router.close(linger=0)
            ctx.destroy(linger=0)

    run(main())


def test_native_rep_keeps_app_envelope_frames_from_libzmq_dealer() -> None:
    async def main() -> None:
        async with Pair("REP", zmq.DEALER, lib_identity=b"d1") as p:
            await p.lib.send_multipart([b"env1", b"env2", b"", b"q1", b"q2"])
            assert await p.native.recv_multipart() == [b"q1", b"q2"]
            assert p.native.pattern.backtrace == (b"d1", b"env1", b"env2", b"")
            await p.native.send_multipart([b"r1", b"r2"])
            assert await p.lib.recv_multipart() == [b"env1", b"env2", b"", b"r1", b"r2"]
            # without a delimiter libzmq's REP drops the message; so does ours
            before = METRICS.get("gateway_socket_dropped_messages_total", reason="no-delimiter")
            await p.lib.send_multipart([b"no-delimiter"])
            await p.lib.send_multipart([b"", b"ok"])
            assert await p.native.recv() == b"ok"
            assert METRICS.get("gateway_socket_dropped_messages_total", reason="no-delimiter") == before + 1

    run(main())


def test_native_raw_rep_is_a_router_on_zmtp() -> None:
    async def main() -> None:
        async with Pair("REP", zmq.REQ, raw=True) as p:
            await p.lib.send(b"q")
            msg = await p.native.recv_msg()
            assert msg.hops[1:] == (b"",) and msg.body == (b"q",)
            await p.native.send_msg(Message(msg.hops, (b"r",)))
            assert await p.lib.recv() == b"r"

    run(main())


def test_native_dealer_to_libzmq_rep() -> None:
    async def main() -> None:
        async with Pair("DEALER", zmq.REP) as p:
            await p.native.send_multipart([b"", b"q"])
            assert await p.lib.recv_multipart() == [b"q"]
            await p.lib.send(b"r")
            assert await p.native.recv_msg() == Message((b"",), (b"r",))

    run(main())


@pytest.mark.parametrize("binder", ["native", "libzmq"])
def test_router_to_router_by_identity(binder: str) -> None:
    async def main() -> None:
        ctx = zmq.asyncio.Context()
        lib = ctx.socket(zmq.ROUTER)
        lib.setsockopt(zmq.LINGER, 0)
        lib.setsockopt(zmq.ROUTING_ID, b"lib")
        lib.setsockopt(zmq.ROUTER_MANDATORY, 1)
        try:
            async with gateway.Socket("ROUTER", identity=b"nat", router_mandatory=True) as nat:
                if binder == "native":
                    lib.connect(gateway.url.parse(nat.bind("zmq+tcp://127.0.0.1:0")).lib_url)
                else:
                    nat.connect(f"zmq+tcp://127.0.0.1:{lib.bind_to_random_port('tcp://127.0.0.1')}")
                await nat.wait_peers(1)
                assert set(nat.routing.routes) == {b"lib"}
                await nat.send_multipart([b"lib", b"hello"])
                assert await lib.recv_multipart() == [b"nat", b"hello"]
                await lib.send_multipart([b"nat", b"", b"world"])
                assert await nat.recv_msg() == Message((b"lib", b""), (b"world",))
        finally:
            lib.close(linger=0)
            ctx.destroy(linger=0)

    run(main())


def test_large_and_empty_frames() -> None:
    async def main() -> None:
        async with Pair("REP", zmq.REQ) as p:
            for body in ([b""], [b"x" * 255], [b"y" * 256], [b"z" * 200_000], [b"", b"", b"a"]):
                await p.lib.send_multipart(body)
                assert await p.native.recv_multipart() == body
                await p.native.send_multipart(body[::-1])
                assert await p.lib.recv_multipart() == body[::-1]

    run(main())


def test_libzmq_reconnects_after_native_rebinds() -> None:
    async def main() -> None:
        ctx = zmq.asyncio.Context()
        req = ctx.socket(zmq.REQ)
        req.setsockopt(zmq.LINGER, 0)
        try:
            rep = gateway.Socket("REP")
            url = rep.bind("zmq+tcp://127.0.0.1:0")
            req.connect(gateway.url.parse(url).lib_url)
            await req.send(b"1")
            assert await rep.recv() == b"1"
            await rep.send(b"one")
            assert await req.recv() == b"one"
            rep.close()
            await asyncio.sleep(0.2)
            rep = gateway.Socket("REP")
            rep.bind(url)
            await req.send(b"2")
            assert await rep.recv() == b"2"
            await rep.send(b"two")
            assert await req.recv() == b"two"
            rep.close()
        finally:
            req.close(linger=0)
            ctx.destroy(linger=0)

    run(main())
