"""Twin bridges for the kernel harnesses: the same peers' bytes into a bridge whose engine is
the compiled kernel and into one whose engine is the pure-Python reference, and what each
bridge did, to compare.

One run is one bridge of the native engine (two :class:`~gateway.device.sides.NativeSide`
sockets, an :class:`~gateway.device.forward_async.AsyncForwarder`, the translator and the
ledger) with the engine :mod:`gateway.kernel` chooses while it is made: the compiled path as
built, or the reference with ``gateway.kernel.compiled`` set to None for the whole run (as the
``engine_path`` fixture of :mod:`gateway.testing.pytest_plugin` does it: every pipe, table and
forwarder is then the reference's). Its peers are the project's own codecs on a transport that
records what the pipe writes; each peer's connection is a pipe the front or back socket makes
(``endpoints.new_pipe``: the class :func:`gateway.engine.pipe.pipe_class` picks), fed with
``data_received``, or read into its own buffer as a loop's transport does (``get_buffer``,
``buffer_updated``: ``Setup.buffered``). The kernel's internals (its classes, slots, offsets) are
not named here; what is: ``gateway.kernel.compiled`` and ``token_table``, ``NativeSide(kind,
options, name).socket.endpoints.new_pipe``, a pipe's ``connection_made``, ``data_received``,
``get_buffer``, ``buffer_updated``, ``connection_lost``, ``ready``, ``close_reason``, and the forwarder's ``start``, ``close``,
``kernel`` (not None: it forwards with the kernel), ``translator.table``, ``loss.inflight``,
``front.backlog``, ``back.backlog`` and ``ledger``. A kernel reworked behind these runs under
the harnesses unchanged.

What a run comes to (:func:`observe`): the bytes each peer was sent (the messages each peer
opens, under CURVE, whose boxes differ from run to run), each gateway pipe's close reason, the
token and in-flight tables, the ledger's counts and drops, the sockets' backlogs, and every
exception that left the engine. The pipe ids the engine draws are made the same in both runs
(:func:`same_pipe_ids`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gateway import kernel
from gateway.adapter import SideOptions
from gateway.device.forward_async import AsyncForwarder
from gateway.device.ledger import Ledger
from gateway.device.sides import NativeSide
from gateway.engine import core
from gateway.engine.codecs import sp_role, zmtp_role
from gateway.envelope import PatternTranslator, Translator
from gateway.errors import DROP_REASONS, ProtocolError
from gateway.metrics import METRICS, Registry
from gateway.plugins import registry
from gateway.security import Security
from gateway.testing.bridge_peers import RecordingTransport, deliver, handshake
from gateway.wire.sp import SpCodec
from gateway.wire.zmtp import ZmtpCodec
from gateway.wire.zmtp_curve import CurveClient, CurveServer

from ._zmtp_sec import fixed_keypair

#: each pattern's bridge sides (raw kinds) and its peers (ZeroMQ kind, SP kind), clients first
SIDES = {"reqrep": ("REP", "REQ"), "pipeline": ("PULL", "PUSH"), "pubsub": ("XPUB", "XSUB")}
PEERS = {"reqrep": (("DEALER", "REQ"), ("ROUTER", "REP")),
         "pipeline": (("PUSH", "PUSH"), ("PULL", "PULL")),
         "pubsub": (("SUB", "SUB"), ("PUB", "PUB"))}
#: fixed CURVE keys (an input replays exactly): the gateway's front (a server), its back (a
#: client), the ZeroMQ servers behind it and the clients in front
KEYS = {who: fixed_keypair(b"zmq-sp-gateway fuzz kernel " + who.encode())
        for who in ("front", "back", "server", "client")}
TTL = 60.0
HWM_DROPS = METRICS.declare("gateway_socket_dropped_messages_total", reason="hwm")


@dataclass(frozen=True)
class Setup:
    """One bridge: its pattern, the two wires, CURVE on its ZeroMQ sides, SP over IPC, how many
    peers on each side, the size limit, the mark and how the pipes read."""

    pattern: str
    front: str
    back: str
    curve: bool = False
    ipc: bool = False
    clients: int = 1
    servers: int = 1
    max_size: int = 700
    hwm: int = 1000
    #: the pipes read into their own buffers, as from a loop's transport (get_buffer and
    #: buffer_updated), else each read is given to data_received
    buffered: bool = False


class Wire(RecordingTransport):
    """The recording transport of the kernel's tests, closed as asyncio closes: the protocol
    hears ``connection_lost`` on the next turn of the loop."""

    def __init__(self) -> None:
        super().__init__()
        self.read = 0  # bytes of ``data`` the peer has decoded

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)


@dataclass
class Peer:
    """A client or server of the bridge: its codec, the gateway's pipe facing it, the wire."""

    codec: Any
    pipe: Any
    wire: Wire
    family: str
    gone: bool = False  # it left (its connection was lost)
    #: what its codec read of ``wire`` so far (:func:`read_events`), how that read ended last
    seen: list[Any] = field(default_factory=list)


@dataclass
class Bridge:
    """One run's bridge and peers, and the exceptions that left the engine."""

    setup: Setup
    fwd: Any
    clients: list[Peer] = field(default_factory=list)
    servers: list[Peer] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: the counters when the bridge opened (the ledgers of all runs count in one registry)
    before: dict[str, int] = field(default_factory=dict)

    @property
    def peers(self) -> list[Peer]:
        return self.clients + self.servers

    def feed(self, peer: Peer, data: bytes) -> None:
        """One read of ``peer``'s bytes by its pipe; an exception is the engine's failure."""
        if peer.gone or peer.pipe.close_reason or not data:
            return
        try:
            deliver(peer.pipe, data, self.setup.buffered)
        except Exception as exc:  # noqa: BLE001 - recorded: the comparison and the oracle
            self.errors.append(f"a read raised {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def engine(compiled: bool) -> Iterator[None]:
    """Within: :mod:`gateway.kernel` chooses the compiled path (as built) or the reference."""
    saved = kernel.compiled
    if not compiled:
        kernel.compiled = None
    try:
        yield
    finally:
        kernel.compiled = saved


def _side_security(setup: Setup) -> tuple[Security | None, Security | None]:
    if not setup.curve:
        return None, None
    front = Security("CURVE", True, *KEYS["front"]) if setup.front == "zmtp" else None
    back = (Security("CURVE", False, *KEYS["back"], server_key=KEYS["server"][0])
            if setup.back == "zmtp" else None)
    return front, back


async def _connect(bridge: Bridge, socket: Any, family: str, kind: str, client: bool) -> Peer:
    """A peer of ``kind`` connected to ``socket`` through a pipe it makes, handshaken."""
    setup = bridge.setup
    reg = registry()
    transport = reg.transport("ipc" if setup.ipc and family == "sp" else "tcp")
    pipe = socket.endpoints.new_pipe(reg.wire_for(family), transport, f"{family}+fuzz://peer",
                                     "peer:1")
    wire = Wire()
    wire.protocol = pipe
    codec: Any
    if family == "zmtp":
        mech = None
        if setup.curve:
            mech = (CurveClient(*KEYS["client"], KEYS["front"][0]) if client
                    else CurveServer(*KEYS["server"]))
        codec = ZmtpCodec(zmtp_role(kind, False), security=mech)
    else:
        codec = SpCodec(sp_role(kind), message_prefix=transport.sp_message_prefix)
    if not await handshake(pipe, codec, wire):
        raise RuntimeError(f"the harness's {kind} peer could not connect ({family})")
    return Peer(codec, pipe, wire, family)


async def open_bridge(setup: Setup) -> Bridge:
    """The bridge of ``setup`` with the engine chosen now (see :func:`engine`), started, its
    peers connected."""
    f_kind, b_kind = SIDES[setup.pattern]
    f_sec, b_sec = _side_security(setup)
    front = NativeSide(f_kind, SideOptions(
        max_message_size=setup.max_size, router_mandatory=setup.pattern == "reqrep",
        hwm=setup.hwm, security=f_sec), "fuzz/front")
    back = NativeSide(b_kind, SideOptions(max_message_size=setup.max_size, hwm=setup.hwm,
                                          security=b_sec), "fuzz/back")
    translator: Any
    if setup.pattern == "reqrep":
        translator = Translator(setup.front, setup.back, kernel.token_table(64, TTL, start=7))
    else:
        translator = PatternTranslator(setup.pattern, setup.front, setup.back)
    fwd = AsyncForwarder(front, back, translator, Ledger("fuzz", _registry()))
    bridge = Bridge(setup, fwd)
    bridge.before = counts(bridge)
    asyncio.get_running_loop().set_exception_handler(
        lambda loop, ctx: bridge.errors.append(f"loop: {ctx.get('message')}: "
                                               f"{ctx.get('exception')!r}"))
    fwd.start()
    (zc, sc), (zs, ss) = PEERS[setup.pattern]
    for _ in range(setup.clients):
        bridge.clients.append(await _connect(bridge, front.socket, setup.front,
                                             zc if setup.front == "zmtp" else sc, True))
    for _ in range(setup.servers):
        bridge.servers.append(await _connect(bridge, back.socket, setup.back,
                                             zs if setup.back == "zmtp" else ss, False))
    await settle()
    return bridge


@functools.cache
def _registry() -> Registry:
    """The ledgers' registry: one for the process, not METRICS (the tests' registry, when the
    corpus is replayed) nor one a run (a registry costs more than a run)."""
    return Registry()


def counts(bridge: Bridge) -> dict[str, int]:
    """The ledger's counters (forwarded, dropped by reason) and the sockets' drops at their
    mark, as they stand."""
    ledger = bridge.fwd.ledger
    out = {"forwarded request": ledger.forwarded("request"),
           "forwarded reply": ledger.forwarded("reply"),
           "socket hwm": METRICS.value(HWM_DROPS)}
    for reason in DROP_REASONS:
        out[f"dropped {reason}"] = ledger.dropped_count(reason)
    return out


def kernel_engaged(bridge: Bridge) -> bool:
    """The bridge forwards with the compiled kernel (the forwarder took it)."""
    return bridge.fwd.kernel is not None


async def settle(turns: int = 3) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


def read_events(peer: Peer) -> list[Any]:
    """What the gateway wrote to ``peer`` since the last read, as its codec reads it (messages
    as tuples, other events by name, a refusal by its reason), also kept in ``peer.seen``."""
    if peer.seen and type(peer.seen[-1]) is str and peer.seen[-1].startswith("refused"):
        return []  # its codec refused the stream: it reads no more
    peer.codec.receive_data(bytes(peer.wire.data[peer.wire.read:]))
    peer.wire.read = len(peer.wire.data)
    events: list[Any] = []
    try:
        while (event := peer.codec.next_event()) is not None:
            events.append(event if type(event) is tuple else type(event).__name__)
    except ProtocolError as exc:
        events.append(f"refused: {type(exc).__name__} {exc.reason}")
    peer.seen += events
    return events


def observe(bridge: Bridge) -> dict[str, Any]:
    """What the run came to (see the module's doc)."""
    fwd, ledger = bridge.fwd, bridge.fwd.ledger
    sealed = bridge.setup.curve
    for peer in bridge.peers:
        if sealed and peer.family == "zmtp":
            read_events(peer)
    table = getattr(fwd.translator, "table", None)
    inflight = fwd.loss.inflight
    return {
        # the bytes; under CURVE (boxes differ from run to run) the events each peer opens
        "received": [p.seen if sealed and p.family == "zmtp" else bytes(p.wire.data)
                     for p in bridge.peers],
        "closed": [p.pipe.close_reason for p in bridge.peers],
        "tokens": [(t, h) for t, h, _ in table.entries()] if table is not None else [],
        "inflight": [(k, p) for k, p, _ in inflight.items()],
        "held_bytes": (table.held_bytes if table is not None else 0, inflight.held_bytes),
        "counts": {k: n - bridge.before.get(k, 0) for k, n in counts(bridge).items()
                   if n != bridge.before.get(k, 0)},
        "in_flight": ledger.in_flight,
        "backlog": (fwd.front.backlog, fwd.back.backlog),
        "filtered": getattr(fwd.back.socket.pattern, "filtered", 0),
        "errors": list(bridge.errors),
        # views of a read the kernel wrote, still held by a write, that a later read changed
        # (the pipes of a bridge share their thread's scratch: never one a view shows)
        "overwritten": [p.wire.overwritten() for p in bridge.peers],
    }


def same_pipe_ids() -> None:
    """The pipe ids of the next run, the same in both: a ZeroMQ routing id a socket draws from
    ``random`` (seeded), an SP pipe id the next of a process-wide counter (set; as the kernel's
    differential tests do). They go on the wire (an SP client's pipe id leads the envelope a
    ZeroMQ server is sent), so they are made the same rather than replaced after the fact."""
    random.seed(0)
    core._RUNNING_PIPE_IDS[0] = 0x2F1C0000


async def close_bridge(bridge: Bridge) -> None:
    await bridge.fwd.close()
    bridge.fwd.front.close(0)
    bridge.fwd.back.close(0)
    await settle()
    bridge.fwd.ledger.close()  # (its counters folded: the registry keeps no cell a run)


def run(setup: Setup, compiled: bool,
        steps: Callable[[Bridge], Any]) -> tuple[dict[str, Any], bool]:
    """One run: the bridge of ``setup`` on the chosen engine, ``steps(bridge)`` (a coroutine),
    then what it came to, and whether the kernel forwarded for it."""
    async def go() -> tuple[dict[str, Any], bool]:
        bridge = await open_bridge(setup)
        try:
            await steps(bridge)
            await settle()
            return observe(bridge), kernel_engaged(bridge)
        finally:
            await close_bridge(bridge)

    drawn = random.getstate()
    same_pipe_ids()
    try:
        with engine(compiled):
            return asyncio.run(go())
    finally:
        random.setstate(drawn)
