"""gateway.device: the Bridge's translation, drops, token-table bounds and the body-codec hook.

Two layers: the Bridge's translation step on Messages without any socket (``_request`` /
``_reply`` with an explicit clock), then live bridges inside one asyncio loop between real
libzmq (pyzmq asyncio) clients and nng (pynng asyncio) servers, with the library adapters and
the native engine on each side.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import ModuleType

import pynng
import pytest
import zmq
import zmq.asyncio

from gateway.config import Limits
from gateway.device import Bridge
from gateway.envelope import EnvelopeError, TableFull
from gateway.errors import ConfigError
from gateway.message import Message
from gateway.metrics import METRICS
from gateway.plugins import manager
from gateway.transport import KeepAlive

pytestmark = pytest.mark.timeout(30)

REPO = Path(__file__).resolve().parents[1]
PIPE = b"\x00\x00\x00\x2a"
RID = b"\x80\x00\x00\x07"


def _name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _dropped(bridge: Bridge, reason: str) -> int:
    return METRICS.get("gateway_dropped_messages_total", reason=reason, bridge=bridge.name)


def _expire(bridge: Bridge, now: float) -> None:
    bridge.ledger.expired(bridge.translator.expire(now))


def _load_body_codec_plugin() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "body_codec_plugin", REPO / "examples" / "body_codec_plugin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BODY_CODEC = _load_body_codec_plugin()


@pytest.fixture
def body_codec() -> Iterator[ModuleType]:
    """The example body-codec plugin, registered for one test only."""
    pm = manager()
    pm.register(BODY_CODEC, name="test-body-codec")
    try:
        yield BODY_CODEC
    finally:
        pm.unregister(name="test-body-codec")


# ---------------------------------------------------------------------------------------------
# construction


@pytest.mark.parametrize(("front", "back", "mode", "front_mode", "back_mode"), [
    ("zmq+tcp://127.0.0.1:5555", "sp+tcp://127.0.0.1:6000", "zmtp->sp", "bind", "connect"),
    ("sp+tcp://127.0.0.1:6001", "zmq+tcp://127.0.0.1:7000", "sp->zmtp", "bind", "connect"),
    ("nng+tcp://127.0.0.1:6001", "zmtp+tcp://127.0.0.1:7000", "sp->zmtp", "bind", "connect"),
    ("zmq+tcp://127.0.0.1:5555", "zmq+tcp://127.0.0.1:5556", "zmtp->zmtp", "bind", "connect"),
    ("nanomsg+tcp://127.0.0.1:1", "sp+ipc:///tmp/x.sock", "sp->sp", "bind", "connect"),
    (">zmq+tcp://127.0.0.1:5555", "@sp+tcp://127.0.0.1:6000", "zmtp->sp", "connect", "bind"),
    ("@zmq+tcp://127.0.0.1:5555?backend=native", ">sp+tcp://127.0.0.1:6000?backend=pynng",
     "zmtp->sp", "bind", "connect"),
    ("inproc://front", "sp+tcp://127.0.0.1:6000", "zmtp->sp", "bind", "connect"),
])
def test_mode_and_default_directions(front: str, back: str, mode: str, front_mode: str,
                                     back_mode: str) -> None:
    bridge = Bridge(front, back, name=_name())
    assert bridge.mode == mode
    assert bridge._front_ep.mode == front_mode
    assert bridge._back_ep.mode == back_mode
    assert bridge._front is None and bridge._back is None  # sockets only in run()/open()


@pytest.mark.parametrize(("front", "back", "message"), [
    ("zmq+udp://127.0.0.1:1", "sp+tcp://127.0.0.1:1", "unknown transport 'udp'"),
    ("foo+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:1", "unknown wire 'foo'"),
    ("zmq+tcp://127.0.0.1", "sp+tcp://127.0.0.1:1", "needs host:port"),
    ("zmq+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:1?backend=bogus", "unknown backend"),
    ("tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:1", "say which wire"),
])
def test_bad_endpoints(front: str, back: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Bridge(front, back, name=_name())


# ---------------------------------------------------------------------------------------------
# translation on Messages (no sockets, explicit clock)


def test_zmtp_to_sp_envelope_parked_under_a_token() -> None:
    bridge = Bridge("zmq+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:2", name=_name())
    hops = (b"\x00\x11\x22\x33\x44", b"app1", b"app2", b"")
    out = bridge.translator.request(Message(hops, (b"body",)), now=10.0)
    (token,) = out.hops
    assert len(token) == 4 and token[0] & 0x80 and out.body == (b"body",)
    assert len(bridge.table) == 1
    back = bridge.translator.reply(Message((token,), (b"reply",)), now=11.0)
    assert back == Message(hops, (b"reply",))
    assert len(bridge.table) == 0
    with pytest.raises(EnvelopeError) as err:  # the same token twice
        bridge.translator.reply(Message((token,), (b"again",)), now=11.0)
    assert err.value.reason == "unknown-token"


def test_dealer_without_delimiter_keeps_its_frames_as_body() -> None:
    bridge = Bridge("zmq+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:2", name=_name())
    ident = b"\x00\x00\x00\x00\x01"
    out = bridge.translator.request(Message((ident,), (b"bare",)), now=0.0)
    assert bridge.translator.reply(Message(out.hops, (b"r",)), now=0.0) == Message((ident,), (b"r",))


def test_sp_to_zmtp_backtrace_as_4_byte_frames() -> None:
    bridge = Bridge("sp+tcp://127.0.0.1:1", "zmq+tcp://127.0.0.1:2", name=_name())
    out = bridge.translator.request(Message((PIPE, RID), (b"q",)), now=0.0)
    assert out == Message((PIPE, RID, b""), (b"q",))
    assert bridge.translator.reply(Message((PIPE, RID, b""), (b"a",)), now=0.0) == Message((PIPE, RID),
                                                                                   (b"a",))
    assert len(bridge.table) == 0  # stateless


@pytest.mark.parametrize(("hops", "body", "reason"), [
    ((b"xyz", PIPE, RID, b""), (b"a",), "not-4-bytes"),  # a server prepended a 3-byte frame
    ((PIPE, RID), (b"a",), "no-delimiter"),
    ((b"",), (b"a",), "no-request-id"),
    ((PIPE, b"\x00\x00\x00\x07", b""), (b"a",), "no-request-id"),  # top bit cleared
    ((RID, RID, b""), (b"a",), "bad-backtrace"),  # top bit set before the end
    ((PIPE, RID, b""), (b"a", b"b"), "multi-frame-body"),
    ((PIPE, RID, b""), (), "no-body"),
])
def test_sp_to_zmtp_bad_reply_envelopes(hops: tuple[bytes, ...], body: tuple[bytes, ...],
                                        reason: str) -> None:
    bridge = Bridge("sp+tcp://127.0.0.1:1", "zmq+tcp://127.0.0.1:2", name=_name())
    with pytest.raises(EnvelopeError) as err:
        bridge.translator.reply(Message(hops, body), now=0.0)
    assert err.value.reason == reason


@pytest.mark.parametrize(("front", "back"), [
    ("zmq+tcp://127.0.0.1:1", "zmq+tcp://127.0.0.1:2"),
    ("sp+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:2"),
])
def test_same_family_untouched(front: str, back: str) -> None:
    bridge = Bridge(front, back, name=_name())
    msg = Message((b"anything", b"goes", b""), (b"x", b"y"))
    assert bridge.translator.request(msg, 0.0) is msg
    assert bridge.translator.reply(msg, 0.0) is msg


@pytest.mark.parametrize(("body", "reason"), [((b"a", b"b"), "multi-frame-body"),
                                              ((), "probe")])
def test_zmtp_to_sp_body_refused_by_default(body: tuple[bytes, ...], reason: str) -> None:
    bridge = Bridge("zmq+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:2", name=_name())
    with pytest.raises(EnvelopeError) as err:
        bridge.translator.request(Message((b"id", b""), body), now=0.0)
    assert err.value.reason == reason
    assert len(bridge.table) == 0  # nothing parked for a refused request


def _two_token_bridge(ttl: float) -> tuple[Bridge, Message]:
    """A zmq->sp bridge whose token table holds two requests for ``ttl`` seconds, and a
    request to fill it with."""
    bridge = Bridge("zmq+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:2", name=_name(),
                    limits=Limits(pending_tokens=2, token_ttl=ttl))
    return bridge, Message((b"id", b""), (b"x",))


def test_token_table_full_and_expired_counted() -> None:
    bridge, msg = _two_token_bridge(5.0)
    bridge.translator.request(msg, now=0.0)
    bridge.translator.request(msg, now=1.0)
    with pytest.raises(TableFull) as err:  # our limit (a drop), not the peer's EnvelopeError
        bridge.translator.request(msg, now=2.0)
    assert err.value.reason == "table-full"
    _expire(bridge, 4.9)
    assert _dropped(bridge, "token-expired") == 0
    _expire(bridge, 5.0)  # the first one's deadline
    assert _dropped(bridge, "token-expired") == 1 and len(bridge.table) == 1
    bridge.translator.request(msg, now=5.5)  # room again
    assert len(bridge.table) == 2


def test_expiry_made_by_mint_to_make_room_is_counted_too() -> None:
    """A full table expires old entries itself when a new request comes: still counted."""
    bridge, msg = _two_token_bridge(1.0)
    bridge.translator.request(msg, now=0.0)
    bridge.translator.request(msg, now=0.0)
    bridge.translator.request(msg, now=3.0)  # both expired, evicted to make room, before any sweep
    assert len(bridge.table) == 1
    _expire(bridge, 3.0)  # the periodic sweep reports what the table dropped meanwhile
    assert _dropped(bridge, "token-expired") == 2


def test_late_reply_for_expired_token() -> None:
    bridge = Bridge("zmq+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:2", name=_name(),
                    limits=Limits(token_ttl=1.0))
    token = bridge.translator.request(Message((b"id", b""), (b"x",)), now=0.0).hops[0]
    with pytest.raises(EnvelopeError) as err:  # still held, but past its deadline
        bridge.translator.reply(Message((token,), (b"late",)), now=1.5)
    assert err.value.reason == "expired-token"


# ---------------------------------------------------------------------------------------------
# the body-codec hook (examples/body_codec_plugin.py)


def test_body_codec_example_roundtrip() -> None:
    frames = (b"", b"a", b"\x00" * 300, b"last")
    packed = BODY_CODEC.pack(frames)
    assert packed.startswith(BODY_CODEC.MAGIC)
    assert BODY_CODEC.unpack(packed) == frames
    assert BODY_CODEC.unpack(b"plain") is None
    assert BODY_CODEC.unpack(packed[:-1]) is None  # truncated
    assert BODY_CODEC.unpack(packed + b"x") is None  # trailing garbage


def test_body_codec_hook_packs_requests_and_unpacks_replies(body_codec: ModuleType) -> None:
    bridge = Bridge("zmq+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:2", name=_name())
    assert bridge.translator.body_codec is not None  # the plugin was registered before the bridge was made
    out = bridge.translator.request(Message((b"id", b""), (b"f1", b"f2")), now=0.0)
    assert out.body == (body_codec.pack((b"f1", b"f2")),)
    back = bridge.translator.reply(Message(out.hops, (body_codec.pack((b"r1", b"r2", b"r3")),)), 0.0)
    assert back == Message((b"id", b""), (b"r1", b"r2", b"r3"))
    plain = bridge.translator.request(Message((b"id", b""), (b"one",)), now=0.0)
    assert bridge.translator.reply(Message(plain.hops, (b"not packed",)), 0.0).body == (b"not packed",)


def test_body_codec_hook_works_the_other_way_too(body_codec: ModuleType) -> None:
    """sp -> zmq: a packed SP request unpacks into frames; a multi-frame reply packs."""
    bridge = Bridge("sp+tcp://127.0.0.1:1", "zmq+tcp://127.0.0.1:2", name=_name())
    pipe, rid = b"\x00\x00\x00\x07", b"\x80\x00\x00\x01"
    out = bridge.translator.request(Message((pipe, rid), (body_codec.pack((b"a", b"b")),)), now=0.0)
    assert out == Message((pipe, rid, b""), (b"a", b"b"))
    back = bridge.translator.reply(Message((pipe, rid, b""), (b"x", b"y")), 0.0)
    assert back == Message((pipe, rid), (body_codec.pack((b"x", b"y")),))


def test_body_codec_plugin_is_opt_in() -> None:
    """Never loaded by default; the fixture registers it for one test and takes it out again."""
    pm = manager()
    assert pm.get_plugin("test-body-codec") is None
    assert BODY_CODEC not in pm.get_plugins()
    assert all(getattr(p, "__name__", "") != "body_codec_plugin" for p in pm.get_plugins())


# ---------------------------------------------------------------------------------------------
# live bridges in one asyncio loop: pyzmq clients, pynng servers, native or library sides

SIDES = [("pyzmq", "pynng"), ("pyzmq", "native"), ("native", "pynng"), ("native", "native")]
SIDE_IDS = [f"front_{f}-back_{b}" for f, b in SIDES]


async def _live(front: str, back: str, body: Callable[[Bridge], Awaitable[None]],
                **limits: float) -> Bridge:
    ready = asyncio.Event()
    bridge = Bridge(front, back, name=_name(), limits=Limits(grace=0.3, **limits),  # type: ignore[arg-type]
                    on_ready=lambda b: ready.set())
    stop = asyncio.Event()
    task = asyncio.create_task(bridge.run(stop))
    try:
        await asyncio.wait_for(ready.wait(), 5)
        await body(bridge)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    return bridge


def _lib(url: str) -> str:
    return url.split("+", 1)[1].split("?", 1)[0]


class _NngEcho:
    """A pynng rep0 server on the test's loop: answers ``handler(body)``."""

    def __init__(self, handler: Callable[[bytes], bytes | None] | None = None) -> None:
        self.sock = pynng.Rep0()
        self.port = int(str(self.sock.listen("tcp://127.0.0.1:0").local_address).rsplit(":")[1])
        self.handler = handler or (lambda b: b"re:" + b)
        self.received: list[bytes] = []
        self.task = asyncio.create_task(self._serve())

    async def _serve(self) -> None:
        with contextlib.suppress(pynng.Closed):
            while True:
                body = await self.sock.arecv()
                self.received.append(body)
                reply = self.handler(body)
                if reply is not None:
                    await self.sock.asend(reply)

    async def close(self) -> None:
        # close first: cancelling a pending pynng arecv() can wait forever for its nng aio
        self.sock.close()
        await asyncio.wait_for(asyncio.gather(self.task, return_exceptions=True), 5)


def _dealer(ctx: zmq.asyncio.Context, url: str) -> zmq.asyncio.Socket:
    s = ctx.socket(zmq.DEALER)
    s.linger = 0
    s.connect(url)
    return s


async def _live_dealer_to_nng(front_be: str, back_be: str, server: _NngEcho,
                              exchange: Callable[[Bridge, zmq.asyncio.Socket], Awaitable[None]],
                              **limits: float) -> Bridge:
    """A live zmq -> sp bridge (``front_be``/``back_be``) to ``server``, and
    ``exchange(bridge, dealer)`` with a pyzmq DEALER on its front; ``server`` is closed after."""
    ctx = zmq.asyncio.Context()

    async def body(bridge: Bridge) -> None:
        dealer = _dealer(ctx, _lib(bridge.front_url))
        try:
            await exchange(bridge, dealer)
        finally:
            dealer.close(0)

    try:
        return await _live(f"zmq+tcp://127.0.0.1:0?backend={front_be}",
                           f"sp+tcp://127.0.0.1:{server.port}?backend={back_be}", body,
                           **limits)
    finally:
        await server.close()
        ctx.term()


@pytest.mark.parametrize(("front_be", "back_be"), SIDES, ids=SIDE_IDS)
def test_live_multi_frame_body_with_and_without_codec(front_be: str, back_be: str,
                                                      body_codec: ModuleType) -> None:
    """With the example plugin registered, a 3-frame ZeroMQ body crosses packed and the packed
    reply comes back as frames; the plain request next to it is untouched."""

    async def main() -> None:
        def handler(body: bytes) -> bytes:  # an SP server that speaks the packing
            frames = body_codec.unpack(body)
            if frames is None:
                return b"re:" + body
            return body_codec.pack([b"re:" + f for f in frames])

        async def exchange(bridge: Bridge, dealer: zmq.asyncio.Socket) -> None:
            await dealer.send_multipart([b"app", b"", b"f1", b"f2", b"f3"])
            got = await asyncio.wait_for(dealer.recv_multipart(), 5)
            assert got == [b"app", b"", b"re:f1", b"re:f2", b"re:f3"]
            await dealer.send_multipart([b"", b"single"])
            assert await asyncio.wait_for(dealer.recv_multipart(), 5) == [b"", b"re:single"]

        server = _NngEcho(handler)
        bridge = await _live_dealer_to_nng(front_be, back_be, server, exchange)
        assert server.received[0] == body_codec.pack((b"f1", b"f2", b"f3"))
        assert _dropped(bridge, "multi-frame-body") == 0

    asyncio.run(main())


@pytest.mark.parametrize(("front_be", "back_be"), SIDES, ids=SIDE_IDS)
def test_live_multi_frame_refused_without_codec(front_be: str, back_be: str) -> None:
    async def main() -> None:
        async def exchange(bridge: Bridge, dealer: zmq.asyncio.Socket) -> None:
            await dealer.send_multipart([b"", b"f1", b"f2"])
            await dealer.send_multipart([b"", b"ok"])
            assert await asyncio.wait_for(dealer.recv_multipart(), 5) == [b"", b"re:ok"]
            assert _dropped(bridge, "multi-frame-body") == 1

        server = _NngEcho()
        await _live_dealer_to_nng(front_be, back_be, server, exchange)
        assert server.received == [b"ok"]

    asyncio.run(main())


@pytest.mark.parametrize(("front_be", "back_be"), SIDES, ids=SIDE_IDS)
def test_live_token_table_bounds(front_be: str, back_be: str) -> None:
    async def main() -> None:
        async def exchange(bridge: Bridge, dealer: zmq.asyncio.Socket) -> None:
            for i in range(3):
                await dealer.send_multipart([b"", b"hang%d" % i])
            for _ in range(200):
                if _dropped(bridge, "table-full") and _dropped(bridge, "token-expired") >= 2:
                    break
                await asyncio.sleep(0.025)
            assert _dropped(bridge, "table-full") == 1
            assert _dropped(bridge, "token-expired") == 2
            assert len(bridge.table) == 0
            await dealer.send_multipart([b"", b"ping"])
            assert await asyncio.wait_for(dealer.recv_multipart(), 5) == [b"", b"re:ping"]

        server = _NngEcho(lambda b: None if b.startswith(b"hang") else b"re:" + b)
        await _live_dealer_to_nng(front_be, back_be, server, exchange,
                                  pending_tokens=2, token_ttl=0.4)

    asyncio.run(main())


@pytest.mark.parametrize(("front_be", "back_be"), SIDES, ids=SIDE_IDS)
def test_live_stop_drains_the_reply_in_flight(front_be: str, back_be: str) -> None:
    """Stop is set while the server is still working: its reply crosses during the grace."""

    async def main() -> None:
        server = _NngEcho()
        ctx = zmq.asyncio.Context()
        ready = asyncio.Event()
        stop = asyncio.Event()
        bridge = Bridge(f"zmq+tcp://127.0.0.1:0?backend={front_be}",
                        f"sp+tcp://127.0.0.1:{server.port}?backend={back_be}", name=_name(),
                        limits=Limits(grace=3.0), on_ready=lambda b: ready.set())
        slow = asyncio.Event()

        def handler(body: bytes) -> None:
            slow.set()
            return None

        server.handler = handler
        task = asyncio.create_task(bridge.run(stop))
        dealer = None
        try:
            await asyncio.wait_for(ready.wait(), 5)
            dealer = _dealer(ctx, _lib(bridge.front_url))
            await dealer.send_multipart([b"", b"late"])
            await asyncio.wait_for(slow.wait(), 5)
            # the poller thread counts it just after the send (awaited: a loop that went on
            # after 1 s without it would stop a bridge with nothing in flight)
            await _until(lambda: bool(bridge.in_flight))
            assert bridge.in_flight == 1
            stop.set()  # a request is in flight: the bridge waits for its reply
            await asyncio.sleep(0.3)
            assert not task.done()
            await server.sock.asend(b"re:late")
            assert await asyncio.wait_for(dealer.recv_multipart(), 5) == [b"", b"re:late"]
            await asyncio.wait_for(task, 5)
        finally:
            stop.set()
            if dealer is not None:
                dealer.close(0)
            await asyncio.gather(asyncio.wait_for(task, 10), return_exceptions=True)
            await server.close()
            ctx.term()

    asyncio.run(main())


def test_live_sp_to_zmtp_bad_reply_envelope_dropped_then_served() -> None:
    async def main() -> None:
        ctx = zmq.asyncio.Context()
        router = ctx.socket(zmq.ROUTER)
        router.linger = 0
        port = router.bind_to_random_port("tcp://127.0.0.1")

        async def serve() -> None:
            while True:
                frames = await router.recv_multipart()
                if frames[-1] == b"bad":  # a 3-byte frame where 4-byte hops belong
                    await router.send_multipart([frames[0], b"xyz", *frames[1:-1], b"re:bad"])
                else:
                    await router.send_multipart([*frames[:-1], b"re:" + frames[-1]])

        server = asyncio.create_task(serve())

        async def exchange(bridge: Bridge) -> None:
            with pynng.Req0(recv_timeout=400) as req:
                req.dial(_lib(bridge.front_url), block=False)
                await req.asend(b"bad")
                with pytest.raises(pynng.Timeout):
                    await req.arecv()
                await _until(lambda: _dropped(bridge, "not-4-bytes") >= 1)
                assert _dropped(bridge, "not-4-bytes") == 1
                req.recv_timeout = 5000
                await req.asend(b"good")
                assert await req.arecv() == b"re:good"

        try:
            await _live("sp+tcp://127.0.0.1:0?backend=native",
                        f"zmq+tcp://127.0.0.1:{port}?backend=pyzmq", exchange)
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)
            router.close(0)
            ctx.term()

    asyncio.run(main())


def test_same_family_reply_without_routing_hop_is_dropped_not_fatal() -> None:
    from gateway.envelope import EnvelopeError

    bridge = Bridge("zmq+tcp://127.0.0.1:1", "zmq+tcp://127.0.0.1:2", name=_name())
    with pytest.raises(EnvelopeError) as info:
        bridge.translator.reply(Message((), (b"reply",)), 0.0)
    assert info.value.reason == "no-envelope"
    ok = Message((b"\x00\x00\x00\x00\x01", b""), (b"reply",))
    assert bridge.translator.reply(ok, 0.0) is ok


# ---------------------------------------------------------------------------------------------
# every route records the same series: forwarded, hop latency, drops (one test per route)


class _ThreadServer:
    """A REP-like echo server on its own thread (libzmq ROUTER or nng raw-free Rep0): answers
    ``re:<body>``, after ``delay`` seconds for bodies starting with ``slow`` (``got_slow`` is
    set when one arrives)."""

    def __init__(self, wire: str, delay: float = 1.0) -> None:
        import threading

        self.wire, self.delay = wire, delay
        self.stopped = threading.Event()
        self.got_slow = threading.Event()
        if wire == "zmq":
            self.ctx = zmq.Context()
            self.sock = self.ctx.socket(zmq.ROUTER)
            self.sock.linger = 0
            self.sock.rcvtimeo = 100
            self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        else:
            self.sock = pynng.Rep0(recv_timeout=100)
            self.port = int(str(self.sock.listen("tcp://127.0.0.1:0").local_address).rsplit(":")[1])
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import time

        while not self.stopped.is_set():
            try:
                if self.wire == "zmq":
                    frames = self.sock.recv_multipart()
                    if frames[-1].startswith(b"slow"):
                        self.got_slow.set()
                        time.sleep(self.delay)
                    self.sock.send_multipart([*frames[:-1], b"re:" + frames[-1]])
                else:
                    body = self.sock.recv()
                    if body.startswith(b"slow"):
                        self.got_slow.set()
                        time.sleep(self.delay)
                    self.sock.send(b"re:" + body)
            except (zmq.Again, pynng.Timeout):
                continue
            except (zmq.ZMQError, pynng.NNGException):
                return

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()
        if self.wire == "zmq":
            self.ctx.term()


async def _until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)


#: front wire, its backend, back wire, its backend, forwarder
ROUTE_CASES = [tuple(case.split()) for case in (
    "zmq native sp native asyncio",  # the callback path
    "zmq pyzmq  sp native asyncio",
    "zmq native sp pynng  asyncio",
    "zmq pyzmq  sp pynng  poller",
    "sp  native zmq native asyncio",
    "sp  native zmq pyzmq  asyncio",
    "sp  pynng  zmq pyzmq  poller",
    "zmq pyzmq  zmq pyzmq  poller",  # the zmq->zmq default
    "zmq native zmq native asyncio",
    "sp  native sp  native asyncio",
    "sp  pynng  sp  pynng  poller",
)]


@pytest.mark.parametrize("case", ROUTE_CASES, ids=["-".join(c) for c in ROUTE_CASES])
def test_every_route_records_forwarded_latency_and_drops(case: tuple[str, ...]) -> None:
    front_wire, front_be, back_wire, back_be, forwarder = case
    n = 20
    server = _ThreadServer(back_wire)

    async def exchange(bridge: Bridge) -> None:
        assert bridge.implementation == forwarder
        url = _lib(bridge.front_url)
        if front_wire == "zmq":
            ctx = zmq.asyncio.Context()
            dealer = _dealer(ctx, url)
            try:
                for i in range(n):
                    await dealer.send_multipart([b"", b"m%d" % i])
                got = [await asyncio.wait_for(dealer.recv_multipart(), 5) for _ in range(n)]
                assert sorted(got) == sorted([b"", b"re:m%d" % i] for i in range(n))
                # a client that leaves before its reply: the reply cannot be delivered
                gone = _dealer(ctx, url)
                await gone.send_multipart([b"", b"slow"])
                # it leaves once its request is forwarded (not while it is still connecting)
                assert await asyncio.to_thread(server.got_slow.wait, 5)
                gone.close(0)
                await _until(lambda: _dropped(bridge, "client-gone") >= 1)
            finally:
                dealer.close(0)
                ctx.term()
        else:
            with pynng.Req0(recv_timeout=5000) as req:
                req.dial(url, block=False)
                for i in range(n):
                    await req.asend(b"m%d" % i)
                    assert await req.arecv() == b"re:m%d" % i
            if front_be != "pynng":  # nng drops a reply for a departed pipe and cannot tell
                with pynng.Req0() as gone:
                    gone.dial(url, block=False)
                    await gone.asend(b"slow")
                    assert await asyncio.to_thread(server.got_slow.wait, 5)
                await _until(lambda: _dropped(bridge, "client-gone") >= 1)

    try:
        bridge = asyncio.run(_live(f"{front_wire}+tcp://127.0.0.1:0?backend={front_be}",
                                   f"{back_wire}+tcp://127.0.0.1:{server.port}?backend={back_be}",
                                   exchange))
    finally:
        server.close()
    ledger = bridge.ledger
    assert ledger.forwarded("request") == n + (front_be != "pynng")
    assert ledger.forwarded("reply") == n
    assert ledger.latency_count("request") == ledger.forwarded("request")
    assert ledger.latency_count("reply") == ledger.forwarded("reply")
    if front_be != "pynng":
        assert _dropped(bridge, "client-gone") == 1
    # the same series, on the scrape, under the bridge's own label
    text = METRICS.render()
    assert (f'gateway_forwarded_messages_total{{bridge="{bridge.name}",direction="reply"}} '
            f'{float(n)}') in text
    assert f'gateway_hop_latency_seconds_count{{bridge="{bridge.name}",direction="reply"}}' in text


def test_proxy_route_counts_frames_and_stops() -> None:
    """forwarder=proxy: libzmq forwards; frames (not messages) and in-flight come from
    STATISTICS; the stop ends the proxy."""
    server = _ThreadServer("zmq")

    async def exchange(bridge: Bridge) -> None:
        assert bridge.implementation == "pyzmq proxy"
        ctx = zmq.asyncio.Context()
        dealer = _dealer(ctx, _lib(bridge.front_url))
        try:
            for i in range(5):
                await dealer.send_multipart([b"", b"p%d" % i])
                assert await asyncio.wait_for(dealer.recv_multipart(), 5) == [b"", b"re:p%d" % i]
            await asyncio.sleep(1.3)  # one statistics read
        finally:
            dealer.close(0)
            ctx.term()

    async def main() -> Bridge:
        ready = asyncio.Event()
        bridge = Bridge("zmq+tcp://127.0.0.1:0?backend=pyzmq",
                        f"zmq+tcp://127.0.0.1:{server.port}?backend=pyzmq", name=_name(),
                        limits=Limits(grace=0.3), forwarder="proxy",
                        on_ready=lambda b: ready.set())
        stop = asyncio.Event()
        task = asyncio.create_task(bridge.run(stop))
        await asyncio.wait_for(ready.wait(), 5)
        await exchange(bridge)
        stop.set()
        await asyncio.wait_for(task, 10)
        return bridge

    try:
        bridge = asyncio.run(main())
    finally:
        server.close()
    frames = METRICS.get("gateway_proxy_forwarded_frames_total", bridge=bridge.name,
                         direction="request")
    assert frames == 5 * 3  # identity, delimiter, body per request, as libzmq counts them


def test_proxy_forwarder_needs_one_proxy_capable_adapter_on_both_sides() -> None:
    with pytest.raises(ConfigError, match="forwarder=proxy"):
        Bridge("zmq+tcp://127.0.0.1:1?backend=pyzmq", "sp+tcp://127.0.0.1:2", name=_name(),
               forwarder="proxy")


def test_endpoint_settings_reach_each_side() -> None:
    """URL settings and the TOML tables' reach the engine's sockets and libzmq's options."""

    async def scenario() -> None:
        bridge = Bridge("@zmq+tcp://127.0.0.1:0?hwm=7&handshake_ivl=1500&linger=0",
                        ">zmq+tcp://127.0.0.1:1?backend=pyzmq", name=_name(),
                        front_options={"reconnect_ivl": 0.05},
                        back_options={"reconnect_ivl": 0.25, "reconnect_ivl_max": 4.0,
                                      "handshake_timeout": 3.0})
        bridge.open()
        try:
            opts = bridge._front.socket.options
            assert (opts.hwm, opts.handshake_timeout, opts.linger, opts.reconnect_ivl) == (
                7, 1.5, 0.0, 0.05)
            lib = bridge._back._sock
            assert (lib.getsockopt(zmq.RECONNECT_IVL), lib.getsockopt(zmq.RECONNECT_IVL_MAX),
                    lib.getsockopt(zmq.HANDSHAKE_IVL)) == (250, 4000, 3000)
        finally:
            bridge.close()

    asyncio.run(scenario())


def test_liveness_settings_reach_each_side() -> None:
    """The front takes the heartbeat settings and hands routing ids over only when asked
    (libzmq's default; issue 20, finding 7); the back (a DEALER) has no handover; keepalive
    reaches both."""

    async def scenario() -> None:
        bridge = Bridge("@zmq+tcp://127.0.0.1:0?heartbeat=200&heartbeat_ttl=1s",
                        ">zmq+tcp://127.0.0.1:1", name=_name(),
                        back_options={"tcp_keepalive_idle": 30, "heartbeat_timeout": 0.5})
        bridge.open()
        try:
            front, back = bridge._front.socket, bridge._back.socket
            assert front.options.keepalive is not None and back.options.keepalive is not None
            assert (front.options.router_handover, front.options.heartbeat_ivl, front.options.heartbeat_ttl) == (
                False, 0.2, 1.0)
            assert front.options.keepalive == KeepAlive(60, 10, 6)
            assert (back.options.router_handover, back.options.heartbeat_timeout) == (False, 0.5)
            assert back.options.keepalive == KeepAlive(30, 10, 6)
        finally:
            bridge.close()
        on = Bridge("@zmq+tcp://127.0.0.1:0?router_handover=1&tcp_keepalive=0",
                    ">sp+tcp://127.0.0.1:1", name=_name())
        on.open()
        try:
            assert on._front.socket.options.router_handover is True
            assert on._front.socket.options.keepalive is None
        finally:
            on.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(("front", "back", "back_table", "message"), [
    ("@sp+tcp://127.0.0.1:0?heartbeat_ivl=1s", ">zmq+tcp://127.0.0.1:1", {},
     "bridge 'b' front: heartbeat_ivl: not on SP"),
    ("@zmq+tcp://127.0.0.1:0", ">sp+tcp://127.0.0.1:1", {"heartbeat_ttl": 1.0},
     "bridge 'b' back: heartbeat_ttl: not on SP"),
    ("@zmq+tcp://127.0.0.1:0", ">zmq+tcp://127.0.0.1:1", {"router_handover": True},
     "bridge 'b' back: router_handover applies to the front"),
    ("@zmq+tcp://127.0.0.1:0", ">sp+tcp://127.0.0.1:1?backend=pynng",
     {"tcp_keepalive_idle": 30.0}, "backend pynng does not support tcp_keepalive_idle"),
])
def test_liveness_settings_where_they_cannot_apply_are_refused(
        front: str, back: str, back_table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Bridge(front, back, name="b", back_options=back_table)


@pytest.mark.parametrize(("back", "table", "message"), [
    (">sp+tcp://127.0.0.1:1?backend=pynng&handshake_ivl=100", {},
     "bridge 'b' back: backend pynng does not support handshake_ivl"),
    (">sp+tcp://127.0.0.1:1?backend=pynng", {"linger": 0.1, "backlog": 3},
     "does not support backlog, linger"),
    (">sp+tcp://127.0.0.1:1?hwm=3", {"hwm": 4}, "bridge 'b' back: hwm set both"),
])
def test_settings_an_adapter_would_ignore_are_refused(back: str, table: dict[str, object],
                                                     message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Bridge("@zmq+tcp://127.0.0.1:0", back, name="b", back_options=table)


# ---------------------------------------------------------------------------------------------
# pub/sub, pipeline, pair: the pattern notion (docs/patterns.md)


@pytest.mark.parametrize(("front", "back", "pattern", "kinds"), [
    ("zmq+tcp://127.0.0.1:5555?pattern=pubsub", "sp+tcp://127.0.0.1:6000", "pubsub",
     ("XPUB", "XSUB")),
    ("sp+tcp://127.0.0.1:6001", "zmq+tcp://127.0.0.1:7000?pattern=pipeline", "pipeline",
     ("PULL", "PUSH")),
    ("zmq+tcp://127.0.0.1:5556?pattern=pair", "sp+tcp://127.0.0.1:6002?pattern=pair", "pair",
     ("PAIR", "PAIR")),
    ("zmq+tcp://127.0.0.1:5557", "sp+tcp://127.0.0.1:6003?pattern=pair1", "pair",
     ("PAIR", "PAIR1")),
    ("zmq+tcp://127.0.0.1:5558", "sp+tcp://127.0.0.1:6004", "reqrep", ("REP", "REQ")),
])
def test_pattern_from_either_endpoint(front: str, back: str, pattern: str,
                                      kinds: tuple[str, str]) -> None:
    b = Bridge(front, back, name=_name())
    assert (b.pattern, b.kinds) == (pattern, kinds)
    assert b.translator.pairs_replies == (pattern == "reqrep")
    assert b.plan.front.adapter is None and b.plan.back.adapter is None  # native by default


def test_pattern_from_the_toml_tables() -> None:
    b = Bridge("sp+tcp://127.0.0.1:6005", "zmq+tcp://127.0.0.1:7001", name=_name(),
               front_options={"pattern": "pubsub", "subscribe": (b"a.", b"b.")})
    assert b.pattern == "pubsub"
    assert b.translator.initial() == [Message((), (b"\x01a.",)), Message((), (b"\x01b.",))]


@pytest.mark.parametrize(("front", "back", "front_options", "message"), [
    ("zmq+tcp://127.0.0.1:1?pattern=pubsub", "sp+tcp://127.0.0.1:2?pattern=pipeline", {},
     "say one"),
    ("zmq+tcp://127.0.0.1:1?pattern=pair1", "sp+tcp://127.0.0.1:2", {}, "SP's pair1"),
    ("zmq+tcp://127.0.0.1:1?subscribe=a.", "sp+tcp://127.0.0.1:2", {}, "pubsub setting"),
    ("zmq+tcp://127.0.0.1:1?pattern=pipeline", "sp+tcp://127.0.0.1:2",
     {"subscribe": (b"a",)}, "pubsub setting"),
    ("zmq+tcp://127.0.0.1:1?pattern=pubsub", "sp+tcp://127.0.0.1:2?pattern=bus", {},
     "pattern"),
])
def test_pattern_mistakes(front: str, back: str, front_options: dict[str, object],
                          message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Bridge(front, back, name=_name(), front_options=front_options)
    assert message in str(info.value)


def test_proxy_forwarder_is_reqrep_only() -> None:
    with pytest.raises(ConfigError, match="reqrep only"):
        Bridge("zmq+tcp://127.0.0.1:1?pattern=pubsub&backend=pyzmq",
               "zmq+tcp://127.0.0.1:2?backend=pyzmq", name=_name(), forwarder="proxy")


async def _eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not await check():
        assert loop.time() < end, "never happened"


def test_async_forwarder_pubsub_union_and_pipeline() -> None:
    """The asyncio forwarder (the one the native engine uses) with the library faces: a
    ZeroMQ subscriber's prefixes reach nng's sub0 as a counted union; pipeline relays in order."""
    from gateway_plugins.pynng_adapter import PynngRawSocket
    from gateway_plugins.pyzmq_adapter import PyzmqRawSocket

    from gateway.device.forward_async import AsyncForwarder
    from gateway.device.ledger import Ledger
    from gateway.envelope import PatternTranslator

    async def pubsub() -> None:
        ctx = zmq.asyncio.Context()
        pub = pynng.Pub0()
        port = pub.listen("tcp://127.0.0.1:0").local_address.port
        front = PyzmqRawSocket("XPUB", context=ctx)
        back = PynngRawSocket("XSUB")
        furl = front.bind("tcp://127.0.0.1:0")
        back.connect(f"tcp://127.0.0.1:{__import__('socket').ntohs(port)}")
        t = PatternTranslator("pubsub", "zmtp", "sp")
        ledger = Ledger(_name())
        fwd = AsyncForwarder(front, back, t, ledger)
        fwd.start()
        subs = []
        try:
            for _ in range(2):
                s = ctx.socket(zmq.SUB)
                s.connect(furl)
                s.subscribe(b"a.")
                subs.append(s)

            async def crossed() -> bool:
                pub.send(b"a.probe")
                pub.send(b"z.no")
                return await subs[0].poll(100) != 0

            await _eventually(crossed)
            assert t.subscriptions is not None and t.subscriptions.counts == {b"a.": 2}
            for s in subs:
                s.close(0)

            async def gone() -> bool:
                await asyncio.sleep(0.05)
                return t.subscriptions is not None and not t.subscriptions.counts

            await _eventually(gone)  # libzmq's cancels for departed subscribers, counted down
            assert ledger.in_flight == 0
        finally:
            await fwd.close()
            front.close()
            back.close()
            pub.close()
            ctx.term()

    async def pipeline() -> None:
        pull = pynng.Pull0()
        port = __import__("socket").ntohs(pull.listen("tcp://127.0.0.1:0").local_address.port)
        front = PyzmqRawSocket("PULL")
        back = PynngRawSocket("PUSH")
        furl = front.bind("tcp://127.0.0.1:0")
        back.connect(f"tcp://127.0.0.1:{port}")
        fwd = AsyncForwarder(front, back, PatternTranslator("pipeline", "zmtp", "sp"),
                             Ledger(_name()))
        fwd.start()
        ctx = zmq.asyncio.Context()
        push = ctx.socket(zmq.PUSH)
        push.connect(furl)
        try:
            for i in range(200):
                await push.send(b"%d" % i)
            got = [int(await asyncio.wait_for(pull.arecv(), 5)) for _ in range(200)]
            assert got == list(range(200))
            assert fwd.ledger.forwarded("request") == 200 and fwd.ledger.in_flight == 0
        finally:
            push.close(0)
            await fwd.close()
            front.close()
            back.close()
            pull.close()
            ctx.term()

    asyncio.run(pubsub())
    asyncio.run(pipeline())


@pytest.mark.parametrize("backend", ["native", "pyzmq"])
def test_a_bridge_that_fails_to_open_leaves_no_cells_or_gauges(backend: str) -> None:
    """A front whose port is taken: open fails, and the bridge's ledger is released (a reload
    that keeps failing must not grow the registry by three cells each time)."""
    import socket

    name = _name()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        async def main() -> None:
            for _ in range(3):
                bridge = Bridge(f"zmq+tcp://127.0.0.1:{port}?backend={backend}",
                                "sp+tcp://127.0.0.1:1", name=name)
                with pytest.raises(Exception, match="(?i)in use|address"):
                    bridge.open()

        asyncio.run(main())
    mine = [k for k in (*METRICS.cells, *METRICS.gauges) if ("bridge", name) in k[1]]
    assert mine == []
