"""gateway._kernel against the reference (the pure-Python engine): the same byte streams, split
at random offsets and holding every rare case (commands, reserved flags, oversize messages,
multi-frame bodies, envelopes without a delimiter, SP hop limits and broken backtraces, unknown
and expired tokens, departed clients, pipes at their mark), go through one bridge forwarding with
the kernel and one forwarding without; every byte each pipe writes, the token and in-flight
tables and the ledger must be the same.

The bridge is the real one (native sides, the AsyncForwarder, the Translator, the ledger); its
pipes are real engine pipes whose transports record what they are given, and the peers are the
project's own codecs, so that each run sees exactly the same reads. The sanitizer job of CI
runs this module against a build with AddressSanitizer and bounds checks.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway import kernel
from gateway.adapter import SideOptions
from gateway.device.forward_async import AsyncForwarder
from gateway.device.ledger import Ledger
from gateway.device.sides import NativeSide
from gateway.engine import core
from gateway.engine.codecs import sp_role, zmtp_role
from gateway.envelope import PatternTranslator, TokenTable, Translator
from gateway.envelope.tokens import NO_BYTE_BOUND
from gateway.errors import DROP_REASONS
from gateway.metrics import METRICS
from gateway.plugins import registry
from gateway.security import Security
from gateway.testing.bridge_peers import RecordingTransport, deliver, handshake, server_answer
from gateway.testing.pytest_plugin import PATHS
from gateway.wire.sp import SpCodec
from gateway.wire.zmtp import ZmtpCodec
from gateway.wire.zmtp_curve import CurveClient, CurveServer, keypair

needs_kernel = pytest.mark.skipif(
    kernel.compiled is None, reason="the compiled kernel is not built (GATEWAY_NO_EXTENSIONS)")

MAX = 700  # max_message_size: small, so that oversize messages are cheap
#: long-term CURVE key pairs: the gateway's front (a server), its back (a client), the ZeroMQ
#: servers behind it and the clients in front
KEYS = {who: keypair() for who in ("front", "back", "server", "client")}
HWM = METRICS.declare("gateway_socket_dropped_messages_total", reason="hwm")
TTL = 60.0


#: what the peers' pipes write to (gateway.testing.bridge_peers, shared with fuzz/_bridge.py)
Recorder = RecordingTransport


@dataclass
class Peer:
    """One client or server of the bridge: its codec, the engine pipe facing it, what the pipe
    wrote to it."""

    codec: Any
    pipe: Any
    wire: Recorder
    read: int = 0  # bytes of ``wire`` the peer has decoded


#: each pattern's sides (the bridge's raw kinds) and its peers' kinds, ZeroMQ and SP
SIDES = {"reqrep": ("REP", "REQ"), "pipeline": ("PULL", "PUSH"), "pubsub": ("XPUB", "XSUB")}
PEERS = {"reqrep": (("DEALER", "REQ"), ("ROUTER", "REP")),
         "pipeline": (("PUSH", "PUSH"), ("PULL", "PULL")),
         "pubsub": (("SUB", "SUB"), ("PUB", "PUB"))}


@dataclass
class Rig:
    """One bridge with its peers, forwarding with the kernel or without."""

    front_family: str
    back_family: str
    compiled: bool
    pattern: str = "reqrep"
    curve: bool = False  # ZeroMQ sides with CURVE (the front a server, the back a client)
    hwm: int = 2  # the sides' mark (2: 2 KiB a pipe, so that reads reach it now and then)
    max_bytes: int | None = None  # the pending tables' byte budget (pending_bytes)
    max_size: int = MAX  # the sides' max_message_size
    fwd: Any = None
    hwm_before: int = 0
    clients: list[Peer] = field(default_factory=list)
    servers: list[Peer] = field(default_factory=list)

    async def open(self, clients: int, servers: int) -> None:
        # a small mark (hwm 2: 2 KiB a pipe) so that reads reach it now and then
        self.hwm_before = METRICS.value(HWM)
        f_kind, b_kind = SIDES[self.pattern]
        f_sec = b_sec = None
        if self.curve:  # the gateway's front a CURVE server, its back a CURVE client
            f_sec = Security("CURVE", True, *KEYS["front"])
            b_sec = Security("CURVE", False, *KEYS["back"], server_key=KEYS["server"][0])
        opts = SideOptions(max_message_size=self.max_size, router_mandatory=self.pattern == "reqrep",
                           hwm=self.hwm, security=f_sec if self.front_family == "zmtp" else None)
        front = NativeSide(f_kind, opts, "k/front")
        back = NativeSide(b_kind, SideOptions(
            max_message_size=self.max_size, hwm=self.hwm,
            security=b_sec if self.back_family == "zmtp" else None),
            "k/back")
        front.socket._last_zmtp_id = back.socket._last_zmtp_id = 0  # the same ids in both runs
        translator: Any
        if self.pattern == "reqrep":
            bound = NO_BYTE_BOUND if self.max_bytes is None else self.max_bytes
            table = (kernel.token_table(64, TTL, start=7, max_bytes=bound) if self.compiled
                     else TokenTable(64, TTL, start=7, max_bytes=bound))
            translator = Translator(self.front_family, self.back_family, table)
        else:
            translator = PatternTranslator(self.pattern, self.front_family, self.back_family)
        ledger = Ledger(f"k-{uuid.uuid4().hex[:8]}")
        saved = kernel.compiled
        if not self.compiled:  # the reference: as with GATEWAY_NO_EXTENSIONS=1
            kernel.compiled = None
        try:
            self.fwd = AsyncForwarder(front, back, translator, ledger)
        finally:
            kernel.compiled = saved
        assert (self.fwd.kernel is not None) == self.compiled
        self.fwd.start()
        (zc, sc), (zs, ss) = PEERS[self.pattern]
        c_mech = (lambda: CurveClient(*KEYS["client"], KEYS["front"][0])) if self.curve else None
        s_mech = (lambda: CurveServer(*KEYS["server"])) if self.curve else None
        for _ in range(clients):
            self.clients.append(await _connect(front.socket, self.front_family,
                                               zc if self.front_family == "zmtp" else sc, c_mech))
        for _ in range(servers):
            self.servers.append(await _connect(back.socket, self.back_family,
                                               zs if self.back_family == "zmtp" else ss, s_mech))
        for _ in range(3):  # pub/sub: the standing subscription goes out
            await asyncio.sleep(0)

    def state(self) -> dict[str, Any]:
        fwd = self.fwd
        ledger = fwd.ledger
        if self.curve:  # boxes differ from run to run (random keys): what each peer opens
            wires = {"clients": [_opened(p) for p in self.clients],
                     "servers": [_opened(p) for p in self.servers]}
        else:
            wires = {"clients": [bytes(p.wire.data) for p in self.clients],
                     "servers": [bytes(p.wire.data) for p in self.servers]}
        return {
            **wires,
            "closed": [p.pipe.close_reason for p in self.clients + self.servers],
            # whole messages waiting in a pipe's queue (a transport past its mark)
            "queued": [(p.pipe.queued_msgs, len(p.pipe.wbuf) > 0)
                       for p in self.clients + self.servers],
            "tokens": [(t, h) for t, h, _ in fwd.translator.table.entries()],
            "inflight": [(k, p) for k, p, _ in fwd.loss.inflight.items()],
            "held_bytes": (fwd.translator.table.held_bytes, fwd.loss.inflight.held_bytes),
            "forwarded": (ledger.forwarded("request"), ledger.forwarded("reply")),
            # (the compiled tally's cells are C numbers: what the registry reads of them)
            "latencies": (ledger.latency_count("request"), ledger.latency_count("reply")),
            "in_flight": ledger.in_flight,
            "drops": {r: ledger.dropped_count(r) for r in DROP_REASONS
                      if ledger.dropped_count(r)},
            "inbox": (fwd.front.backlog, fwd.back.backlog),
            # subscribers at their mark lose published messages: their pipes count them
            "socket_hwm": METRICS.value(HWM) - self.hwm_before,
            "filtered": getattr(fwd.back.socket.pattern, "filtered", 0),
            # views of a read buffer still held by a write, overwritten by a later read
            "overwritten": [p.wire.overwritten() for p in self.clients + self.servers],
        }

    async def close(self) -> None:
        await self.fwd.close()
        self.fwd.front.close(0)
        self.fwd.back.close(0)


def _opened(peer: Peer) -> list[Any]:
    """What the gateway wrote to ``peer`` since it last read, as its codec reads it (boxes
    opened: a box that does not open, or a nonce out of order, fails here)."""
    peer.codec.receive_data(bytes(peer.wire.data[peer.read:]))
    peer.read = len(peer.wire.data)
    events = []
    while (event := peer.codec.next_event()) is not None:
        events.append(event if isinstance(event, tuple) else type(event).__name__)
    return events


async def _connect(socket: Any, family: str, kind: str, mech: Any = None,
                   over: str = "tcp") -> Peer:
    """A peer's connection to ``socket``, handshaken: a ZeroMQ or SP socket of ``kind``
    (``mech``: makes the ZeroMQ peer's CURVE mechanism) over transport ``over``."""
    reg = registry()
    wire = reg.wire_for(family)
    transport = reg.transport(over)
    pipe = socket.endpoints.new_pipe(wire, transport, f"{family}+{over}://peer", "peer:1")
    recorder = Recorder(kind)
    recorder.protocol = pipe
    peer: Any
    if family == "zmtp":
        peer = (ZmtpCodec(zmtp_role(kind, False), security=mech()) if mech is not None
                else ZmtpCodec(zmtp_role(kind, False)))
    else:
        peer = SpCodec(sp_role(kind), message_prefix=transport.sp_message_prefix)
    assert await handshake(pipe, peer, recorder)
    return Peer(peer, pipe, recorder)


# -- what the peers send ---------------------------------------------------------------------
#: the codec that seals what _zmtp_frames and _ping make (a CURVE peer's), or None: plain
_SEALER: list[Any] = [None]


@pytest.fixture(autouse=True)
def _plain_peers_again() -> Iterator[None]:
    """A CURVE test's sealer ends with it: the next test's peers are plain unless it says."""
    yield
    _SEALER[0] = None


def _ping() -> bytes:
    return PING if _SEALER[0] is None else _SEALER[0].ping(0, b"ctx")


def _zmtp_frames(frames: list[bytes], flags: list[int] | None = None) -> bytes:
    if _SEALER[0] is not None:
        return bytes(_SEALER[0].send_message(tuple(frames)))
    out = bytearray()
    for i, f in enumerate(frames):
        more = 1 if i < len(frames) - 1 else 0
        if flags is not None:
            more = flags[i]
        if len(f) <= 255:
            out += bytes((more, len(f))) + f
        else:
            out += bytes((more | 2,)) + len(f).to_bytes(8, "big") + f
    return bytes(out)


PING = b"\x04\x0a\x04PING\x00\x00ctx"


def _published(r: random.Random, family: str, i: int) -> bytes:
    """One message a publisher sends: a topic (matched or not), now and then several frames,
    a big one, a PING."""
    topic = r.choice([b"A", b"B", b"CC", b"C", b"D", b"Z", b""]) + bytes([48 + i % 10])
    body = bytes([97 + i % 26]) * r.choice((0, 3, 100, 300))
    roll = r.random()
    if family == "sp":
        payload = topic + body if roll < 0.97 else bytes(MAX + 1)
        return len(payload).to_bytes(8, "big") + payload
    if roll < 0.6:
        return _zmtp_frames([topic + body])
    if roll < 0.9:
        return _zmtp_frames([topic, body, b"more"])
    if roll < 0.95:
        return _ping()
    if roll < 0.98:
        return _zmtp_frames([b""] * 40)
    return _zmtp_frames([topic, bytes(MAX)])  # over the limit: the pipe closes


def _client_message(r: random.Random, family: str, i: int, pattern: str = "reqrep") -> bytes:
    """One request (pipeline: message) a client sends, now and then an unusual one."""
    body = bytes([65 + i % 26]) * r.choice((0, 1, 5, 100, 300))
    roll = r.random()
    if pattern == "pipeline":
        if family == "sp":
            payload = body if roll < 0.97 else bytes(MAX + 1)
            return len(payload).to_bytes(8, "big") + payload
        if roll < 0.7:
            return _zmtp_frames([body])
        if roll < 0.85:
            return _zmtp_frames([b"part", body])  # toward SP: refused (one frame)
        if roll < 0.95:
            return _ping()
        return _zmtp_frames([b""] * 40)
    if family == "zmtp":
        if roll < 0.70:
            return _zmtp_frames([b"", body])
        # the ones that close the pipe (big, badflag) rarely: the rest of the stream matters
        choice = r.choices(["env", "nodelim", "multi", "probe", "ping", "long", "many", "big",
                            "badflag"], weights=[10, 10, 10, 5, 10, 10, 5, 1, 1])[0]
        if choice == "env":
            return _zmtp_frames([b"app", b"", body])
        if choice == "nodelim":
            return _zmtp_frames([body or b"x"])
        if choice == "multi":
            return _zmtp_frames([b"", body, b"second"])
        if choice == "probe":
            return _zmtp_frames([b""])
        if choice == "ping":
            return _ping()
        if choice == "long":
            return _zmtp_frames([b"", bytes(300)], flags=[1, 2])  # a LONG flag on a long frame
        if choice == "big":
            return _zmtp_frames([b"", bytes(MAX + 1)])
        if choice == "many":
            return _zmtp_frames([b""] * 40 + [body])
        return bytes((0x08, 1)) + b"x"  # a reserved flag: the pipe closes
    rid = (0x80000000 | r.getrandbits(31)).to_bytes(4, "big")
    if roll < 0.75:
        payload = rid + body
    else:
        choice = r.choices(["hops", "nohop", "ttl", "big"], weights=[20, 1, 10, 1])[0]
        if choice == "hops":
            payload = b"\x00\x00\x00\x09" + rid + body
        elif choice == "nohop":
            payload = b"\x00\x00\x00\x01"[: r.choice((1, 4))]  # no request id: the pipe closes
        elif choice == "ttl":
            payload = b"\x00\x00\x00\x02" * 9 + rid + body  # past the hop limit (8)
        else:
            payload = rid + bytes(MAX)
    return len(payload).to_bytes(8, "big") + payload


def _server_replies(r: random.Random, peer: Peer, family: str, mangle: bool = True) -> bytes:
    """What a server answers to the requests the gateway wrote it: each request's envelope
    echoed (sometimes mangled), in order."""
    codec = peer.codec
    codec.receive_data(bytes(peer.wire.data[peer.read:]))
    peer.read = len(peer.wire.data)
    _SEALER[0] = codec if family == "zmtp" and codec.sealed else None
    out = bytearray()
    while (event := codec.next_event()) is not None:
        if not isinstance(event, tuple):
            continue
        ping, reply = server_answer(family, event, r.random() if mangle else 0.0)
        if family == "zmtp":
            out += (_ping() if ping else b"") + _zmtp_frames(list(reply))
        else:
            out += len(reply[0]).to_bytes(8, "big") + reply[0]
    return bytes(out)


def _toggle(r: random.Random, peers: list[Peer]) -> None:
    """Now and then a peer reads what it was sent (its transport drains: a paused pipe may
    write again)."""
    for peer in peers:
        if r.random() < 0.3:
            peer.wire.drain()


def _chunks(r: random.Random, data: bytes) -> Iterator[bytes]:
    """``data`` split at random offsets (the reads)."""
    pos = 0
    while pos < len(data):
        n = r.choice((1, 3, 17, 64, 500, 4096, 1 << 20))
        yield data[pos: pos + n]
        pos += n


async def _feed(r: random.Random, peers: list[Peer], streams: list[bytes],
                others: list[Peer], buffered: bool = False) -> None:
    """Each of ``peers`` sends its stream, in reads split at random and interleaved; the
    ``others`` drain now and then. ``buffered``: the pipes read into their own buffers, as
    from a loop's transport (``get_buffer``/``buffer_updated``), else ``data_received``."""
    readers = [(c, _chunks(r, s)) for c, s in zip(peers, streams, strict=True)]
    while readers:
        c, chunks = readers[r.randrange(len(readers))]
        chunk = next(chunks, None)
        if chunk is None:
            readers = [(x, it) for x, it in readers if x is not c]
        elif not c.pipe.close_reason:
            deliver(c.pipe, chunk, buffered)
        _toggle(r, others)
        await asyncio.sleep(0)
    for _ in range(3):
        await asyncio.sleep(0)


async def _run(front: str, back: str, compiled: bool, seed: int, n: int,
               pattern: str = "reqrep", curve: bool = False,
               max_bytes: int | None = None, buffered: bool = False) -> dict[str, Any]:
    core._RUNNING_PIPE_IDS[0] = 100  # the same SP pipe ids in both runs
    rig = Rig(front, back, compiled, pattern, curve, max_bytes=max_bytes)
    await rig.open(clients=3, servers=2)
    r = random.Random(seed)
    try:
        if pattern == "pubsub":
            if front == "zmtp":  # the subscribers' prefixes (one of them takes everything)
                subs = [[b"", b"A"], [b"B", b"CC", b"Z"], [b"A", b"D"]]
                streams = []
                for c, ts in zip(rig.clients, subs, strict=True):
                    _SEALER[0] = c.codec if c.codec.sealed else None
                    streams.append(b"".join(_zmtp_frames([b"\x01" + t]) for t in ts))
                await _feed(r, rig.clients, streams, rig.servers, buffered)
            streams = []
            for server in rig.servers:
                _SEALER[0] = server.codec if back == "zmtp" and server.codec.sealed else None
                streams.append(b"".join(_published(r, back, i) for i in range(n)))
            await _feed(r, rig.servers, streams, rig.clients, buffered)
            return rig.state()
        streams = []
        for c in rig.clients:
            _SEALER[0] = c.codec if front == "zmtp" and c.codec.sealed else None
            streams.append(b"".join(_client_message(r, front, i, pattern) for i in range(n)))
        await _feed(r, rig.clients, streams, rig.servers, buffered)
        if pattern == "pipeline":
            return rig.state()
        for server in rig.servers:
            if server.pipe.close_reason:
                continue
            for chunk in _chunks(r, _server_replies(r, server, back)):
                if server.pipe.close_reason:
                    break
                deliver(server.pipe, chunk, buffered)
                _toggle(r, rig.clients)
                await asyncio.sleep(0)
        for _ in range(3):
            await asyncio.sleep(0)
        return rig.state()
    finally:
        await rig.close()


ROUTES = [("zmtp", "sp"), ("zmtp", "zmtp"), ("sp", "zmtp"), ("sp", "sp")]


@needs_kernel
@pytest.mark.parametrize(("front", "back"), ROUTES, ids=[f"{f}-{b}" for f, b in ROUTES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_the_kernel_writes_and_records_what_the_reference_does(front: str, back: str,
                                                                seed: int) -> None:
    compiled = asyncio.run(_run(front, back, True, seed, 40))
    reference = asyncio.run(_run(front, back, False, seed, 40))
    assert compiled == reference


@needs_kernel
@pytest.mark.parametrize("pattern", ["pipeline", "pubsub"])
@pytest.mark.parametrize(("front", "back"), ROUTES, ids=[f"{f}-{b}" for f, b in ROUTES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_patterns_beyond_request_reply_as_the_reference(front: str, back: str, pattern: str,
                                                         seed: int) -> None:
    compiled = asyncio.run(_run(front, back, True, seed, 40, pattern))
    reference = asyncio.run(_run(front, back, False, seed, 40, pattern))
    assert compiled == reference


#: a body past the kernel's VIEW_FROM (8 KiB): it goes out as a view of the read, not a copy
LARGE = 20_000


def _large(front: str, i: int) -> bytes:
    """The ``i``-th request of a client on the ``front`` wire, with a LARGE body of one byte
    value (``A`` + i)."""
    body = bytes([65 + i]) * LARGE
    if front == "zmtp":
        return _zmtp_frames([b"", body])
    rid = (0x80000000 | i).to_bytes(4, "big")
    return len(rid + body).to_bytes(8, "big") + rid + body


def _split_around(data: bytes, marker: int, cut: int) -> list[bytes]:
    """``data`` in reads around its run of LARGE ``marker`` bytes (a large body): cut ``cut``
    bytes from the run's start (negative: into the headers before it) when ``cut`` is below
    LARGE // 2, else ``cut - LARGE`` bytes from its end (past 0: into the message after it);
    ``cut == LARGE // 2``: three reads, in the headers, the body and after it."""
    start = data.index(bytes([marker]) * LARGE)
    end = start + LARGE
    if cut == LARGE // 2:
        points = [start - 3, start + LARGE // 3, end + 2]
    else:
        points = [start + cut if cut < LARGE // 2 else end + cut - LARGE]
    points = [0, *(p for p in points if 0 < p < len(data)), len(data)]
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


#: where the reads are cut: every offset from 14 bytes before a large body (its message's
#: headers, the frames before it) to 6 into it, from 6 before its end to 14 past it (the
#: next message's headers), and one three-way split
CUTS = [*range(-14, 7), *range(LARGE - 6, LARGE + 15), LARGE // 2]


async def _large_run(front: str, back: str, compiled: bool, cut: int,
                     hwm: int, buffered: bool = False) -> tuple[dict[str, Any], int]:
    """A small request, a large one and a small one from one client, read in pieces cut
    around the large body; the server's echo of them, cut the same way. The rig's state, and
    how many messages the kernel forwarded. ``buffered``: read as from a loop's transport."""
    core._RUNNING_PIPE_IDS[0] = 100
    rig = Rig(front, back, compiled, max_size=4 * LARGE, hwm=hwm)
    await rig.open(clients=1, servers=1)
    try:
        (c,), (s,) = rig.clients, rig.servers
        for chunk in _split_around(_hello(front, 0) + _large(front, 1) + _hello(front, 2),
                                   66, cut):
            deliver(c.pipe, chunk, buffered)
            await asyncio.sleep(0)
        for chunk in _split_around(_server_replies(random.Random(0), s, back, mangle=False),
                                   66, cut):
            deliver(s.pipe, chunk, buffered)
            await asyncio.sleep(0)
        for _ in range(3):
            await asyncio.sleep(0)
        return rig.state(), rig.fwd.ledger.tally.by_kernel
    finally:
        await rig.close()


@needs_kernel
@pytest.mark.parametrize("hwm", [2, 64])
@pytest.mark.parametrize(("front", "back"), ROUTES, ids=[f"{f}-{b}" for f, b in ROUTES])
def test_a_large_message_split_at_every_offset_as_the_reference(front: str, back: str,
                                                                hwm: int) -> None:
    """Issue 36: a large body (a view of the read, not copied) in reads cut at every offset
    around it, its request and its reply: the kernel (which waits for the rest of a message it
    takes, appended to the buffer once) writes and records what the reference does, and every
    message arrives whole. With hwm 64 (a 64 KiB mark) the kernel forwards all six; with hwm 2
    a large message is past the mark and the reference's (which then raises the mark)."""
    for cut in CUTS:
        compiled, by_kernel = asyncio.run(_large_run(front, back, True, cut, hwm))
        reference, _ = asyncio.run(_large_run(front, back, False, cut, hwm))
        assert compiled == reference, cut
        if hwm == 64:
            assert by_kernel == 6, cut
        assert compiled["forwarded"] == (3, 3) and not any(compiled["closed"]), cut
        assert bytes([66]) * LARGE in compiled["clients"][0], cut


def _hello(front: str, i: int) -> bytes:
    """The ``i``-th plain request (``hello i``) of a client on the ``front`` wire."""
    body = b"hello %d" % i
    if front == "zmtp":
        return _zmtp_frames([b"", body])
    rid = (0x80000000 | i).to_bytes(4, "big")
    return len(rid + body).to_bytes(8, "big") + rid + body


async def _ten_hellos_each(rig: Rig, front: str, sealed: bool = False) -> None:
    """Every client of ``rig`` sends ten requests (``sealed``: in its own CURVE boxes, for a
    ZMTP front), and the loop runs once."""
    for c in rig.clients:
        if sealed:
            _SEALER[0] = c.codec if front == "zmtp" else None
        for i in range(10):
            c.pipe.data_received(_hello(front, i))
    await asyncio.sleep(0)


def _all_by_the_kernel(go: Callable[[], Coroutine[Any, Any, dict[str, Any]]],
                       calls: list[str]) -> dict[str, Any]:
    """Run ``go`` (a rig's ten requests per client, two clients, and the answers): the 20
    requests and 20 replies were forwarded with no call of the reference recorded in
    ``calls``; the rig's state."""
    state = asyncio.run(go())
    assert calls == []
    assert state["forwarded"] == (20, 20)
    return state


async def _answered(rig: Rig, back: str) -> dict[str, Any]:
    """Every server of ``rig`` answers what reached it (unmangled); the rig's state after."""
    for s in rig.servers:
        s.pipe.data_received(_server_replies(random.Random(0), s, back, mangle=False))
    await asyncio.sleep(0)
    return rig.state()


@needs_kernel
@pytest.mark.parametrize(("front", "back"), ROUTES, ids=[f"{f}-{b}" for f, b in ROUTES])
def test_the_usual_traffic_goes_through_the_kernel(front: str, back: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain requests and replies are the kernel's (one call per read), not the reference's:
    the reference's per-message step is never called."""
    from gateway.device import step

    calls: list[str] = []
    monkeypatch.setattr(step.RequestStep, "forwarder",
                        lambda self, hold=None: lambda msg, t0=0.0: calls.append("request"))
    monkeypatch.setattr(step.ReplyStep, "forwarder",
                        lambda self, hold=None: lambda msg: calls.append("reply"))

    async def go() -> dict[str, Any]:
        core._RUNNING_PIPE_IDS[0] = 100
        rig = Rig(front, back, True)
        await rig.open(clients=2, servers=2)
        try:
            await _ten_hellos_each(rig, front)
            return await _answered(rig, back)
        finally:
            await rig.close()

    state = _all_by_the_kernel(go, calls)
    assert state["in_flight"] == 0 and state["tokens"] == [] and state["inflight"] == []
    for data in state["clients"]:
        assert data.count(b"re:hello") == 10


@needs_kernel
@pytest.mark.parametrize(("front", "back"), ROUTES, ids=[f"{f}-{b}" for f, b in ROUTES])
def test_a_whole_read_never_reaches_the_pipes_python(front: str, back: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A read of whole plain messages is the kernel's from its first byte (``fast_read``):
    ``Pipe.process`` (and the codec's ``receive_data`` under it) never runs; nor for a read cut
    inside a message the kernel takes (its tail waits in the buffer) and the read that ends it
    (appended there once, issue 36: the codec's Python never takes a large message apart);
    a tail that begins a command (a PING cut short) goes on to ``Pipe.process``, and the next
    read is the pipe's own."""
    from gateway.engine.pipe import PipeBody

    calls: list[str] = []
    process = PipeBody.process

    def counted(self: PipeBody, *args: int) -> None:
        calls.append("process")
        process(self, *args)

    monkeypatch.setattr(PipeBody, "process", counted)

    async def go() -> dict[str, Any]:
        core._RUNNING_PIPE_IDS[0] = 100
        rig = Rig(front, back, True)
        await rig.open(clients=2, servers=2)
        try:
            calls.clear()
            await _ten_hellos_each(rig, front)
            state = await _answered(rig, back)
            assert calls == [] and state["forwarded"] == (20, 20)
            c = rig.clients[0]
            cut = _hello(front, 10) + _hello(front, 11)
            c.pipe.data_received(cut[:-3])  # one whole message, then a tail: the kernel's
            c.pipe.data_received(cut[-3:])  # the tail's end: the kernel's too
            assert calls == []
            await asyncio.sleep(0)
            if front == "zmtp":  # a PING cut short: the reference's, and the read after it
                ping = _ping()
                c.pipe.data_received(_hello(front, 12) + ping[:3])
                assert calls == ["process"]
                c.pipe.data_received(ping[3:])
                assert calls == ["process"] * 2
                await asyncio.sleep(0)
            return rig.state()
        finally:
            await rig.close()

    state = asyncio.run(go())
    assert state["forwarded"] == ((23, 20) if front == "zmtp" else (22, 20))


@needs_kernel
def test_a_read_cut_by_an_unusual_message_takes_one_fair_share() -> None:
    """The kernel takes the usual messages of a whole read and leaves the rest to
    ``Pipe.process``: both count against one FAIR_SHARE, as when the pipe's Python took the
    read (review: a cut read took FAIR_SHARE more)."""
    read = (b"".join(_zmtp_frames([b"", b"a%03d" % i]) for i in range(200))
            + _zmtp_frames([b"", b"x", b"second"])  # two body frames: SP's refusal, the reference's
            + b"".join(_zmtp_frames([b"", b"b%03d" % i]) for i in range(300)))

    async def go(whole_read: bool) -> tuple[int, bool, int]:
        core._RUNNING_PIPE_IDS[0] = 100
        rig = Rig("zmtp", "sp", True, hwm=1000)
        await rig.open(clients=1, servers=1)
        try:
            pipe = rig.clients[0].pipe
            if not whole_read:
                pipe.fast_read = None  # data_received -> receive_data -> process
            pipe.data_received(read)
            rx = pipe.codec.rx
            return 501 - (len(rx.data) - rx.pos) // 8, pipe.reading, rig.fwd.ledger.forwarded(
                "request")
        finally:
            await rig.close()

    whole, piecewise = asyncio.run(go(True)), asyncio.run(go(False))
    assert whole == piecewise and whole[0] == 256  # (FAIR_SHARE, then the pipe yields)


@needs_kernel
def test_a_token_request_to_an_ipc_server_is_written_or_left_at_the_mark() -> None:
    """zmtp -> sp over nng's IPC mapping: a request whose [token][body] meets the batch mark
    only by IPC's type byte goes to the reference, written, not counted and lost (review: the
    room check left the byte out)."""
    read = b"".join(_zmtp_frames([b"", bytes([65 + i]) * 243]) for i in range(8))

    async def go(compiled: bool) -> dict[str, Any]:
        core._RUNNING_PIPE_IDS[0] = 100
        rig = Rig("zmtp", "sp", compiled)
        await rig.open(clients=1, servers=0)
        rig.servers.append(await _connect(rig.fwd.back.socket, "sp", "REP", over="ipc"))
        try:
            _SEALER[0] = None
            rig.clients[0].pipe.data_received(read)  # 8 x (1 + 8 + 4 + 243): the 2 KiB mark
            for _ in range(3):
                await asyncio.sleep(0)
            state = rig.state()
            state["bodies"] = sum(bytes([65 + i]) * 243 in rig.servers[0].wire.data
                                  for i in range(8))
            return state
        finally:
            await rig.close()

    compiled, reference = asyncio.run(go(True)), asyncio.run(go(False))
    assert compiled == reference and compiled["bodies"] == 8


@needs_kernel
@pytest.mark.parametrize("leaving", ["expire", "evicted"])
def test_the_compiled_in_flight_table_stays_bounded(leaving: str) -> None:
    """Requests that leave from the front (expired, or evicted from a full table) do not stay
    behind in the compiled table's send order (review: 50,000 kept for 10 live)."""
    import gc

    assert kernel.compiled is not None
    t = (kernel.compiled.InFlight(1000, 1.0) if leaving == "expire"
         else kernel.compiled.InFlight(10, 1e9))
    for i in range(50_000):
        t.sent((i.to_bytes(4, "big"),), b"p", float(i))
        if leaving == "expire":
            t.expire(float(i))
    order = next(o for o in gc.get_referents(t) if type(o) is list)
    assert len(order) < 2 * len(t) + 200


@needs_kernel
def test_a_second_kernel_over_the_same_sockets_writes_what_it_takes() -> None:
    """A pipe's kernel record is reused read after read; a new forwarder over the same sockets
    (its kernel's reads numbered from 1 again) still writes what it takes (review: the read
    number alone matched the first kernel's, and the bytes were never flushed)."""

    async def go() -> bytes:
        core._RUNNING_PIPE_IDS[0] = 100
        rig = Rig("zmtp", "zmtp", True)
        await rig.open(clients=1, servers=1)
        try:
            client, server = rig.clients[0], rig.servers[0]
            client.pipe.data_received(_hello("zmtp", 0))  # the first kernel's first read
            await asyncio.sleep(0)
            first = rig.fwd
            await first.close()  # (the sockets stay)
            rig.fwd = AsyncForwarder(first.front, first.back, first.translator, first.ledger)
            assert rig.fwd.kernel is not None
            rig.fwd.start()
            client.pipe.data_received(_hello("zmtp", 1))  # the second kernel's first read
            await asyncio.sleep(0)
            return bytes(server.wire.data)
        finally:
            await rig.close()

    wire = asyncio.run(go())
    assert b"hello 0" in wire and b"hello 1" in wire


#: in-flight keys that a flat form could confuse: parts that join alike, empty parts, a part
#: past the one-byte length (the compiled table keeps each key as one bytes object)
KEYS_IN_FLIGHT = [(b"\x00",), (b"\x01",), (b"ab", b"c"), (b"a", b"bc"), (b"abc",), (b"",),
                  (b"", b""), (b"\x00\x00\x00\x01", b""), (b"x" * 300, b""),
                  (b"x" * 254, b"y"), (b"x" * 255,), (bytes(range(256)),)]


@needs_kernel
@pytest.mark.parametrize("max_bytes", [NO_BYTE_BOUND, 40])
def test_the_compiled_tables_behave_as_the_references(max_bytes: int) -> None:
    """The token and in-flight tables, driven through their interface by the same random
    operations, give the same answers and hold the same entries (and bytes: with a small
    budget, they refuse and evict for their bytes alike)."""
    from gateway.device.inflight import InFlight

    assert kernel.compiled is not None
    r = random.Random(1)
    compiled_t = kernel.token_table(50, 1.0, start=3, max_bytes=max_bytes)
    ref_t = TokenTable(50, 1.0, start=3, max_bytes=max_bytes)
    compiled_f = kernel.compiled.InFlight(20, 1.0, max_bytes)
    ref_f = InFlight(20, 1.0, max_bytes)
    now = 0.0
    minted: list[bytes] = []
    for _ in range(5000):
        now += r.random() * 0.05
        op = r.random()
        if op < 0.4:
            hops = (bytes([r.randrange(3)]) * r.randrange(1, 9), b"")
            answers = []
            for t in (compiled_t, ref_t):
                try:
                    answers.append(t.mint(hops, now))
                except Exception as exc:  # noqa: BLE001 - compared below
                    answers.append(type(exc).__name__ + str(exc))
            assert answers[0] == answers[1]
            if isinstance(answers[0], bytes):
                minted.append(answers[0])
        elif op < 0.6 and minted:
            token = minted.pop(r.randrange(len(minted)))
            answers = []
            for t in (compiled_t, ref_t):
                try:
                    answers.append(t.pop(token, now))
                except Exception as exc:  # noqa: BLE001
                    answers.append(type(exc).__name__ + str(exc))
            assert answers[0] == answers[1]
        elif op < 0.65:
            assert compiled_t.expire(now) == ref_t.expire(now)
        elif op < 0.85:
            key, pipe = r.choice(KEYS_IN_FLIGHT), bytes([r.randrange(3)])
            assert compiled_f.sent(key, pipe, now) == ref_f.sent(key, pipe, now)
        elif op < 0.95:
            key = r.choice(KEYS_IN_FLIGHT)
            assert compiled_f.answered(key) == ref_f.answered(key)
        elif op < 0.97:
            pipe = bytes([r.randrange(3)])
            assert compiled_f.lost(pipe) == ref_f.lost(pipe)
        else:
            assert compiled_f.expire(now) == ref_f.expire(now)
        assert compiled_t.entries() == ref_t.entries()
        assert compiled_t.expired_total == ref_t.expired_total
        assert compiled_f.items() == ref_f.items() and len(compiled_f) == len(ref_f)
        assert (compiled_t.held_bytes, compiled_f.held_bytes) == (ref_t.held_bytes,
                                                                  ref_f.held_bytes)
        assert compiled_t.held_bytes <= max_bytes


@pytest.mark.parametrize("value", ["1", "yes"])
def test_no_extensions_runs_the_reference(value: str) -> None:
    """GATEWAY_NO_EXTENSIONS forces the pure-Python engine; --version and the build info say
    which path runs."""
    import os
    import subprocess
    import sys

    code = ("import gateway.kernel as k, gateway.metrics as m; "
            "print(k.IMPLEMENTATION, m.build_labels()['kernel'])")
    env = {**os.environ, "GATEWAY_NO_EXTENSIONS": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["pure", "pure"]
    version = subprocess.run([sys.executable, "-m", "gateway", "--version"], env=env,
                             capture_output=True, text=True, timeout=60, check=True).stdout
    assert "pure Python: GATEWAY_NO_EXTENSIONS is set" in version
    env.pop("GATEWAY_NO_EXTENSIONS")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    import importlib.util

    built = importlib.util.find_spec("gateway._kernel") is not None
    expected = "compiled" if built else "pure"
    assert out == [expected, expected]


@needs_kernel
@pytest.mark.parametrize(("front", "back"), ROUTES, ids=[f"{f}-{b}" for f, b in ROUTES])
def test_pipeline_and_published_messages_go_through_the_kernel(
        front: str, back: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipeline's messages and a publisher's are the kernel's: the reference's per-message
    step never runs for them (subscriptions, front to back, stay the reference's)."""
    from gateway.device import step

    calls: list[str] = []

    async def go(pattern: str) -> dict[str, Any]:
        core._RUNNING_PIPE_IDS[0] = 100
        rig = Rig(front, back, True, pattern)
        await rig.open(clients=2, servers=2)
        try:
            if pattern == "pubsub" and front == "zmtp":  # every subscriber takes "A..."
                for c in rig.clients:
                    c.pipe.data_received(_zmtp_frames([b"\x01A"]))
                for _ in range(3):
                    await asyncio.sleep(0)
            peers, family = (rig.clients, front) if pattern == "pipeline" else (rig.servers, back)
            for peer in peers:
                for i in range(10):
                    body = b"A%d" % i
                    peer.pipe.data_received(_zmtp_frames([body]) if family == "zmtp"
                                            else len(body).to_bytes(8, "big") + body)
            await asyncio.sleep(0)
            return rig.state()
        finally:
            await rig.close()

    with monkeypatch.context() as m:
        m.setattr(step.RequestStep, "forwarder",
                  lambda self, hold=None: lambda msg, t0=0.0: calls.append("r"))
        state = asyncio.run(go("pipeline"))
    assert calls == [] and state["forwarded"] == (20, 0)
    assert sum(data.count(b"A") for data in state["servers"]) == 20
    with monkeypatch.context() as m:
        m.setattr(step.ReplyStep, "forwarder", lambda self, hold=None: lambda msg: calls.append("p"))
        state = asyncio.run(go("pubsub"))
    assert calls == [] and state["forwarded"][1] == 20
    assert [data.count(b"A") for data in state["clients"]] == [20, 20]


CURVE_ROUTES = [("zmtp", "sp"), ("zmtp", "zmtp"), ("sp", "zmtp")]


@needs_kernel
@pytest.mark.parametrize("pattern", ["reqrep", "pipeline", "pubsub"])
@pytest.mark.parametrize(("front", "back"), CURVE_ROUTES,
                         ids=[f"{f}-{b}" for f, b in CURVE_ROUTES])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_curve_sides_as_the_reference(front: str, back: str, pattern: str, seed: int) -> None:
    """The ZeroMQ sides with CURVE (the kernel opens and seals the MESSAGE boxes itself,
    through libsodium): every peer opens the same messages, in the same order (its codec checks
    each box and nonce), and the tables and the ledger agree."""
    compiled = asyncio.run(_run(front, back, True, seed, 30, pattern, curve=True))
    reference = asyncio.run(_run(front, back, False, seed, 30, pattern, curve=True))
    assert compiled == reference


@needs_kernel
@pytest.mark.parametrize(("front", "back"), CURVE_ROUTES, ids=[f"{f}-{b}" for f, b in CURVE_ROUTES])
def test_curve_traffic_goes_through_the_kernel(front: str, back: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests and replies in CURVE boxes are the kernel's too (no Python step, no PyNaCl
    call per message once the handshake is done)."""
    from gateway.device import step
    from gateway.wire import zmtp_curve

    calls: list[str] = []
    for name in ("RequestStep", "ReplyStep"):  # (a step's forward is made with the bridge)
        monkeypatch.setattr(getattr(step, name), "forwarder",
                            lambda self, hold=None, name=name: lambda *a: calls.append(name))

    async def go() -> dict[str, Any]:
        core._RUNNING_PIPE_IDS[0] = 100
        rig = Rig(front, back, True, "reqrep", curve=True)
        await rig.open(clients=2, servers=2)
        try:
            with monkeypatch.context() as m:
                for peer in rig.clients + rig.servers:  # the gateway's side of each
                    mech = getattr(peer.pipe.codec, "security", None)
                    if isinstance(mech, zmtp_curve._Curve):
                        for name in ("seal", "open"):
                            m.setattr(mech, name, lambda *a, name=name: calls.append(name))
                await _ten_hellos_each(rig, front, sealed=True)
            # (the peers' own codecs seal and open as they like)
            return await _answered(rig, back)
        finally:
            await rig.close()

    state = _all_by_the_kernel(go, calls)
    if front == "zmtp":
        assert [sum(b"re:hello" in f for e in data for f in e) for data in state["clients"]] \
            == [10, 10]


@needs_kernel
def test_a_wire_the_kernel_does_not_know_is_left_to_the_reference() -> None:
    """A plugin's codec (WebSocket's: whole messages, no ``streaming`` or ``rx``) is the
    reference's: the kernel takes nothing from its reads and writes nothing to it (the ws
    bridges of CI run 26 failed here: the kernel read ``codec.streaming`` first)."""
    from types import SimpleNamespace

    class Foreign:  # the least a codec has: no kernel seam at all
        family = "sp"

    async def go() -> tuple[int, int]:
        rig = Rig("zmtp", "sp", True)
        await rig.open(clients=0, servers=0)
        try:
            pipe = SimpleNamespace(codec=Foreign(), close_reason=None, routing_id=b"\0\0\0\1",
                                   kernel_state=None)
            return rig.fwd.kernel.request(pipe), rig.fwd.kernel.reply(pipe)
        finally:
            await rig.close()

    assert asyncio.run(go()) == (0, 0)


class _Transport:
    def __init__(self, writes: list[tuple[str, bytes]], name: str, closing: bool) -> None:
        self.writes, self.name, self.closing = writes, name, closing

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes) -> None:
        self.writes.append((self.name, bytes(data)))

    def writelines(self, chunks: list[Any]) -> None:  # (recorded as such: one writev)
        self.writes.append((self.name + " writelines", b"".join(chunks)))

    def get_write_buffer_size(self) -> int:  # (everything written went to the OS)
        return 0


class _Owner:
    def __init__(self, writes: list[tuple[str, bytes]], name: str) -> None:
        self.writes, self.name = writes, name

    def pipe_writable(self, pipe: Any) -> None:  # (recorded among the writes, in order)
        self.writes.append((self.name + " writable", b"%d" % pipe.writable))


class _Pipe:
    def __init__(self, writes: list[tuple[str, bytes]], name: str, chunks: list[bytes],
                 transport: str) -> None:
        self.wbuf: list[Any] = list(chunks)
        self._wbuf_size = sum(len(c) for c in chunks)
        self.transport = (None if transport == "none"
                          else _Transport(writes, name, transport == "closing"))
        self.queued_msgs, self._closed = len(chunks), False
        # "held": the transport holds bytes (pause_writing), the queue waits; its mark 8 KiB
        self._t_held, self._held, self._high = transport == "held", 100, 8192
        self.writable, self.owner = True, _Owner(writes, name)

    def flush(self) -> None:  # the reference's, as Pipe has it
        from gateway.engine.writes import Writes

        Writes.flush(self)  # type: ignore[arg-type]

    def _check_full(self) -> None:
        from gateway.engine.writes import Writes

        Writes._check_full(self)  # type: ignore[arg-type]


@needs_kernel
@settings(max_examples=50, deadline=None)
@given(pipes=st.lists(st.tuples(
    st.lists(st.one_of(st.binary(max_size=5),  # small chunks, and large ones (JOIN_BELOW)
                       st.builds(lambda n, b: bytes([b]) * n, st.integers(4000, 20000),
                                 st.integers(0, 255))), max_size=3),
    st.sampled_from(["open", "closing", "none", "held"])), max_size=5))
def test_the_compiled_flush_writes_what_the_reference_writes(
        pipes: list[tuple[list[bytes], str]]) -> None:
    """``flush_batch`` (the kernel's whole reads) and ``writes.flush`` (Batch.close's) write
    the same bytes to the same transports (one chunk as it is, small ones joined, 16 KiB or
    more in one ``writelines``) and leave the pipes and the batch the same: pipes on
    the kernel's hot state (read as C fields) and other pipes (their own ``flush``), mixed;
    each flush with its own twin of the batch."""
    from gateway.engine.pipe import pipe_class
    from gateway.engine.writes import Batch, flush

    assert kernel.compiled is not None
    compiled_pipe = pipe_class()

    def made(writes: list[tuple[str, bytes]], i: int, chunks: list[bytes], t: str) -> Any:
        stand_in = _Pipe(writes, str(i), chunks, t)
        if i % 2:
            return stand_in
        pipe = compiled_pipe.__new__(compiled_pipe)  # (the fields flush reads, no connection)
        pipe.wbuf, pipe._wbuf_size, pipe.transport = (
            stand_in.wbuf, stand_in._wbuf_size, stand_in.transport)
        pipe.queued_msgs, pipe._closed = len(chunks), False
        pipe._t_held, pipe._held, pipe._high = stand_in._t_held, 100, 8192
        pipe.writable, pipe.owner = True, stand_in.owner
        return pipe

    def run(flusher: Callable[[Any], None], make_batch: Callable[[], Any]) -> tuple[object, ...]:
        writes: list[tuple[str, bytes]] = []
        batch = make_batch()
        batch.scheduled = object()  # type: ignore[assignment]
        pipes_made = [made(writes, i, chunks, t) for i, (chunks, t) in enumerate(pipes)]
        batch.dirty = list(pipes_made)
        flusher(batch)
        return (writes, batch.dirty, batch.scheduled,
                [(p.wbuf, p._wbuf_size, p.queued_msgs, p.writable) for p in pipes_made])

    assert run(kernel.compiled.flush_batch, kernel.compiled.Batch) == run(flush, Batch)


async def _prestart_order(compiled: bool) -> bytes:
    front = NativeSide("REP", SideOptions(max_message_size=700, router_mandatory=True), "o/front")
    back = NativeSide("REQ", SideOptions(max_message_size=700), "o/back")
    table = kernel.token_table(64, 60.0) if compiled else TokenTable(64, 60.0)
    saved = kernel.compiled
    if not compiled:
        kernel.compiled = None
    try:
        fwd = AsyncForwarder(front, back, Translator("zmtp", "zmtp", table),
                             Ledger(f"o-{uuid.uuid4().hex[:8]}"))
    finally:
        kernel.compiled = saved
    assert (fwd.kernel is not None) == compiled
    try:
        client = await _connect(front.socket, "zmtp", "DEALER")
        server = await _connect(back.socket, "zmtp", "ROUTER")
        server.wire.hold(server.pipe._high + 1)  # the back end has no room (its peer stopped)
        client.pipe.data_received(_zmtp_frames([b"", b"first"]))  # before start: the inbox
        fwd.start()
        for _ in range(3):
            await asyncio.sleep(0)  # the request loop took "first" and waits for room
        server.wire.drain()  # room, before the loop's task runs again
        client.pipe.data_received(_zmtp_frames([b"", b"second"]))
        for _ in range(20):
            await asyncio.sleep(0)
        return bytes(server.wire.data)
    finally:
        await fwd.close()
        front.close(0)
        back.close(0)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("compiled", [False, True] if kernel.compiled else [False])
def test_a_request_the_loop_holds_is_not_overtaken(compiled: bool) -> None:
    """A request taken by the request loop (here: one that came before the bridge started)
    and waiting for room holds the callback path and the kernel too: the next one, read
    once there is room, goes after it (found by review; older than the hold cells)."""
    wire = asyncio.run(_prestart_order(compiled))
    assert b"first" in wire and b"second" in wire
    assert wire.index(b"first") < wire.index(b"second")


def test_a_ledger_can_still_be_weakly_referenced() -> None:
    import weakref

    ledger = Ledger(f"w-{uuid.uuid4().hex[:8]}")
    assert weakref.ref(ledger)() is ledger


@needs_kernel
def test_pipes_read_through_the_compiled_data_received(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel runs, a new pipe's data_received is its compiled twin (the reference's
    steps when no kernel forwards for it); the choice is read when a pipe is made, so the
    reference's class stays the reference and a run without the kernel makes plain pipes."""
    from gateway.engine.pipe import Pipe, SniffingPipe, pipe_class

    assert kernel.compiled is not None
    received = kernel.compiled.PipeState.data_received
    assert pipe_class().data_received is received
    assert issubclass(pipe_class(), kernel.compiled.PipeState) and pipe_class() is pipe_class()
    assert pipe_class(sniffing=True)._read is received
    assert Pipe.data_received is not received
    assert SniffingPipe.data_received is not Pipe.data_received  # (its own, then the chosen one)
    monkeypatch.setattr(kernel, "compiled", None)
    assert pipe_class() is Pipe and pipe_class(sniffing=True) is SniffingPipe


@pytest.mark.parametrize("engine_path", PATHS, indirect=True)
def test_the_engine_path_fixture_runs_the_path_it_names(engine_path: str) -> None:
    """gateway.testing.pytest_plugin: on [pure] every table, forwarder and pipe made during the
    test is the reference's, and the processes the test starts are told so; on [compiled]
    they are the kernel's (the choice is read when each is made)."""
    import os

    from gateway.engine.pipe import Pipe, pipe_class

    front = NativeSide("REP", SideOptions(), "p/front")
    back = NativeSide("REQ", SideOptions(), "p/back")
    table = kernel.token_table(64, 60.0)
    fwd = AsyncForwarder(front, back, Translator("zmtp", "zmtp", table),
                         Ledger(f"p-{uuid.uuid4().hex[:8]}"))
    pure = engine_path == "pure"
    assert (fwd.kernel is None) == pure
    assert isinstance(table, TokenTable) == pure
    assert (pipe_class() is Pipe) == pure
    assert (os.environ.get("GATEWAY_NO_EXTENSIONS") == "1") == pure
    assert kernel.IMPLEMENTATION == engine_path


def test_no_extensions_means_the_same_at_build_and_at_run_time() -> None:
    """``GATEWAY_NO_EXTENSIONS=0`` (or empty) is unset for setup.py as for gateway.kernel: one
    rule, written with the same words in both (setup.py cannot import the package it builds)."""
    from pathlib import Path

    rule = 'os.environ.get("GATEWAY_NO_EXTENSIONS", "") not in ("", "0")'
    root = Path(__file__).resolve().parents[1]
    assert f"NO_EXTENSIONS = {rule}" in (root / "setup.py").read_text()
    assert f"NO_EXTENSIONS = {rule}" in (root / "gateway" / "kernel.py").read_text()


def test_a_free_threaded_build_without_the_gil_runs_the_reference() -> None:
    """On a free-threaded CPython running without the GIL, gateway.kernel does not import the
    extension (it would turn the GIL back on, and the kernel is not declared thread-safe):
    the pure path runs, and --version says why. Simulated: sys._is_gil_enabled() -> False."""
    import subprocess
    import sys

    code = ("import sys; sys._is_gil_enabled = lambda: False; "
            "import gateway.kernel as k; "
            "print(k.IMPLEMENTATION, 'gateway._kernel' in sys.modules); print(k.why())")
    import os

    env = {k: v for k, v in os.environ.items() if k != "GATEWAY_NO_EXTENSIONS"}  # (test-pure's)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True, env=env).stdout.splitlines()
    assert out == ["pure False", "pure Python: a free-threaded build without the GIL"]


@needs_kernel
@pytest.mark.parametrize("name", ["TokenTable", "InFlight"])
def test_the_table_twins_have_one_public_surface(name: str) -> None:
    """A compiled table and its reference offer the same public fields, methods and counters,
    on the class and on an instance: a member added to one twin and not the other fails here
    (the differential tests then compare what the members do)."""
    from gateway.device.inflight import InFlight

    reference = {"TokenTable": TokenTable, "InFlight": InFlight}[name]
    compiled = getattr(kernel.compiled, name)

    def public(obj: object) -> set[str]:
        return {n for n in dir(obj) if not n.startswith("_")}

    assert public(reference) == public(compiled)
    assert public(reference(64, 1.0)) == public(compiled(64, 1.0))
