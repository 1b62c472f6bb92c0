"""The cell library: what a matrix cell is, what it must do, and how to run one.

A cell = (client impl, client type, server impl, server type, wire/transport, route, shape).

* ``client`` connects, ``server`` binds (through the gateway: the client connects to the
  gateway's front, the gateway's back connects to the server).
* impls: ``native`` (this project's engine, both wires), ``libzmq`` (pyzmq), ``nng`` (pynng,
  cooked), ``nng-raw`` (pynng raw: ``nng_req0_open_raw`` / ``nng_rep0_open_raw``, headers read
  and written by hand), ``nanomsg`` (Debian's ``nanocat``, nanomsg 1.1.5), ``nng-1.5``
  (Debian's ``nngcat``, nng 1.5.2) and ``jeromq-0.3`` (Debian's JeroMQ 0.3.6, a ZMTP 2.0 peer:
  ``gateway.tools.harness.peers.jeromq``; tcp only; its cells are
  :func:`~gateway.tools.matrix.suites.jeromq_cells`).
* ``transport`` is the wire/transport column, spelled like the URL scheme: ``zmq+tcp``,
  ``sp+ipc`` for a direct cell; ``<front>-><back>`` (``zmq+tcp->sp+tcp``) through the gateway.
  Direct cells never cross wires: a libzmq peer and an nng peer cannot talk (different
  handshakes), so such pairs are not cells; the gateway cells are the cross-wire ones.
* ``route``: ``direct`` or ``gateway:<front backend>-><back backend>`` with backends
  ``pyzmq``/``native`` on a ZMTP side and ``pynng``/``native`` on an SP side; a front backend
  ``any`` is the native engine on one port for both wires (``any+tcp://``): the client speaks
  its own wire (the transport's first side) to a port that also takes the other one
  (:func:`~gateway.tools.matrix.suites.oneport_cells`).
* shapes: ``small`` (100 B), ``empty`` (0 B), ``64k`` (65 536 B), ``oversize`` (1 MiB + 1 KiB),
  and ``heartbeat`` (ZMTP liveness): every ZMTP socket of the cell, the gateway's included,
  sends heartbeats (``HEARTBEAT``: libzmq's HEARTBEAT_IVL/TIMEOUT, the native engine's
  ``heartbeat_ivl``/``heartbeat_timeout``); two 100-byte exchanges with ``HEARTBEAT_IDLE``
  seconds of silence between them, and no connection may drop meanwhile (each side's PINGs
  answered by the other implementation).
* security and transport shapes (``SECURITY``; ``suites.security_cells``, 127 cells, 12 of them
  in ``catalog.ci_cells`` as ``SECURITY_CI``; the rest ``slow``): a 100-byte exchange with CURVE
  or PLAIN on the ZeroMQ hops (``curve``, ``plain``), SP over TLS, WebSocket or secure WebSocket
  on the SP hops (``tls``, ``ws``, ``wss``) or both through the gateway (``curve+tls``,
  ``plain+tls``), and with the client's credentials wrong: ``curve-badkey`` (a CURVE key the
  server does not allow), ``plain-badpass`` (a wrong PLAIN password), ``tls-untrusted`` and
  ``wss-untrusted`` (a client CA that did not sign the server's certificate). Impls: native and
  libzmq on ZeroMQ hops, native and nng on SP hops; tcp only; directly and through the gateway
  (native and library backends; ws/wss fronts and backs are the native engine's). Keys and
  certificates are made once per run (:mod:`gateway.tools.harness.security`, on
  ``gateway.tools.harness.certs``).

Expected outcome (``expected(cell)``, :mod:`gateway.tools.matrix.outcomes`) is derived, never
listed by hand:

1. the pairing tables of ``gateway.patterns.pairing`` (``zmtp_legal``, ``sp_legal`` with
   ``sp_protocol``) decide ``refused-handshake``; through the gateway both hops are checked:
   client vs the front (a raw REP: ROUTER on ZMTP, rep0 on SP) and the back (a raw REQ:
   DEALER on ZMTP, req0 on SP) vs the server — the gateway's own rule, DESIGN section 6;
2. a security shape with wrong credentials is ``refused-auth``;
3. ``oversize`` is ``refused-limit`` when any receiver on the path enforces a maximum message
   size: the responder (gets the request), the requester (gets an equally large reply, unless
   the responder is a CLI: those answer an oversize request with a short fixed reply), and the
   gateway (``Limits.max_message_size``, 1 MiB, on every backend). ``RECV_LIMITS`` records each
   implementation's *default* limit as measured (see its comment: nng has none by default).
4. otherwise ``exchanged``.

Observed outcome (``gateway.tools.matrix.host.run_cell``): ``exchanged``; ``refused-handshake`` (not one message got
through, and no side saw a completed handshake on a direct link); ``refused-limit`` (the
handshake was proven by a small probe exchange, then the oversize exchange got no reply);
``refused-auth`` (a security cell with wrong credentials: not one message got through within
the cell's timeout, and no side saw a completed handshake; nng's dialer keeps retrying a refused
TLS handshake, so this is told by the bounded wait, never by a hang); ``timeout`` (a handshake
completed but the exchange still got no reply); ``connected`` (a pairing with no side able to
send completed its handshake anyway); ``bad-reply``; ``error``.

This module holds the axes (implementations, types, wires, shapes, limits, result columns), the
:class:`Cell` and its checks, and the per-cell run settings; the pattern cells' rules are
:mod:`~gateway.tools.matrix.pattern_rules`, the expected outcome and the known issues
:mod:`~gateway.tools.matrix.outcomes`, the cell families :mod:`~gateway.tools.matrix.suites`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from gateway.config import Limits
from gateway.patterns.pairing import SOCKET_TYPES
from gateway.tools.harness.peers import Security as Sec
from gateway.tools.matrix.impls import IMPLEMENTATIONS
from gateway.tools.matrix.pattern_rules import (
    DYNAMIC_SHAPES,
    FAMILY_OF,
    GATEWAY_PATTERN_KINDS,
    PATTERN_BACKENDS,
    PATTERN_IMPLS,
    PATTERN_SHAPES,
    PATTERN_TYPES,
    pattern_sender,
)

MIB = 1 << 20

#: the implementations every ordered type pairing runs between (the first matrix's); the others
#: meet these (:func:`generation_cells`)
ZMTP_IMPLS = ("native", "libzmq")
SP_IMPLS = ("native", "nng", "nng-raw", "nanomsg", "nng-1.5")
#: a ZMTP 2.0 implementation (RFC 15): it meets peers that negotiate versions, RFC 37
JEROMQ = "jeromq-0.3"
IMPLS = tuple(IMPLEMENTATIONS)
CLI_IMPLS = frozenset(n for n, i in IMPLEMENTATIONS.items() if i.runtime == "cli")
#: impls whose peers can tell a completed handshake from a refused one (libzmq's socket monitor,
#: nng's pipe callbacks, the native engine's ``peers``); a pairing where nobody can send needs one.
EVIDENCE_IMPLS = frozenset(n for n, i in IMPLEMENTATIONS.items() if i.evidence)
#: the implementations of another generation or runtime, each meeting the reference ones
ZMTP_NEW = ("libzmq-4.3.4", "libzmq-4.1", "omq")
SP_NEW = ("nng-2.0", "nng-1.1")
ZMTP_TYPES = SOCKET_TYPES  # REQ REP DEALER ROUTER
SP_TYPES = ("REQ", "REP")
WIRES = ("zmq", "sp")
NETS = ("tcp", "ipc")
BACKENDS = {"zmq": ("pyzmq", "native"), "sp": ("pynng", "native")}
#: the front "backend" of a one-port cell: the native engine bound on ``any+<net>://``
ONE_PORT = "any"

SHAPES: dict[str, int] = {
    "small": 100,
    "empty": 0,
    "64k": 64 * 1024,
    "oversize": MIB + 1024,
    "heartbeat": 100,
}
#: the shapes that only differ in size (every legal pairing gets them)
DATA_SHAPES = ("small", "empty", "64k", "oversize")


#: security and transport shapes (100-byte exchanges; :mod:`gateway.tools.harness.security`)
SECURITY: dict[str, Sec] = {
    "curve": Sec("CURVE"), "curve-badkey": Sec("CURVE", bad=True),
    "plain": Sec("PLAIN"), "plain-badpass": Sec("PLAIN", bad=True),
    "tls": Sec(sp="tls+tcp"), "tls-untrusted": Sec(sp="tls+tcp", bad=True),
    "ws": Sec(sp="ws"), "wss": Sec(sp="wss"), "wss-untrusted": Sec(sp="wss", bad=True),
    "curve+tls": Sec("CURVE", "tls+tcp"), "plain+tls": Sec("PLAIN", "tls+tcp"),
    "zws": Sec(zws="ws"),
}
SHAPES.update({name: 100 for name in SECURITY})
#: the implementations the first security cells use (each can be told its keys and
#: certificates); which others can: ``IMPLEMENTATIONS[...].mechanisms`` / ``.sp_transports``
SECURE_IMPLS = {"zmq": ("native", "libzmq"), "sp": ("native", "nng")}
#: heartbeat cells: interval and timeout (milliseconds) on every ZMTP socket, idle seconds
HEARTBEAT_IDLE = 1.0


#: Default maximum *received* message size per implementation, in bytes (None: no limit):
#: ``impls.Impl.recv_limit``, measured on this machine, not assumed:
#:  - libzmq 4.1.6, 4.3.4 and 4.3.5, JeroMQ 0.3.6: ZMQ_MAXMSGSIZE defaults to -1 (no limit);
#:  - nng 1.1.1, 1.5.2, 1.11 and 2.0: NNG_OPT_RECVMAXSZ defaults to 0 (no limit): they accept
#:    1 MiB + 1 KiB. DESIGN section 10 calls 1 MiB "nng's default": that is nanomsg's default,
#:    not nng's (a finding of this matrix);
#:  - nanomsg 1.1.5: NN_RCVMAXSIZE = 1 MiB, counted on the SP payload *including* the 4-byte
#:    request id, so a REP refuses a request body of exactly 1 MiB;
#:  - native: ``gateway.Socket(max_message_size=1 MiB)`` (DESIGN section 10).
RECV_LIMITS: dict[str, int | None] = {n: i.recv_limit for n, i in IMPLEMENTATIONS.items()}
GATEWAY_LIMIT = Limits().max_message_size

OUTCOMES = ("exchanged", "refused-handshake", "refused-limit", "refused-auth")

#: Parquet/DataFrame columns, in order (the first twelve are the contract of issue 4).
RESULT_COLUMNS = (
    "client_impl", "client_type", "server_impl", "server_type", "transport", "route", "shape",
    "expected", "observed", "envelope_ok", "rtt_us", "detail",
    "cell_id", "wire", "duration_s",
    "bytes_seen", "executor",
)
#: an observed outcome that is no finding: the implementation is missing on this machine
SKIPPED = "skipped"


def wire_of_impl(impl: str) -> tuple[str, ...]:
    return IMPLEMENTATIONS[impl].wires


@dataclass(frozen=True, slots=True, order=True)
class Cell:
    client_impl: str
    client_type: str
    server_impl: str
    server_type: str
    transport: str  # "zmq+tcp" | "sp+ipc" | "zmq+tcp->sp+tcp"
    route: str  # "direct" | "gateway:pyzmq->pynng"
    shape: str  # key of SHAPES

    # -- identity -------------------------------------------------------------------------
    @property
    def cell_id(self) -> str:
        """Stable, human-readable, unique: ``libzmq:REQ>nng:REP@zmq+tcp->sp+tcp/gateway:pyzmq->pynng/small``."""
        return (f"{self.client_impl}:{self.client_type}>{self.server_impl}:{self.server_type}"
                f"@{self.transport}/{self.route}/{self.shape}")

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_id(cls, cell_id: str) -> Cell:
        """The cell of a ``cell_id`` (``client:TYPE>server:TYPE@transport/route/shape``)."""
        pair, _, rest = cell_id.strip().partition("@")
        client, _, server = pair.partition(">")
        transport, route, shape = rest.rsplit("/", 2)
        (client_impl, client_type), (server_impl, server_type) = (
            client.split(":"), server.split(":"))
        return cls(client_impl, client_type, server_impl, server_type, transport, route, shape)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cell:
        return cls(**{f.name: d[f.name] for f in fields(cls)})

    # -- derived --------------------------------------------------------------------------
    @property
    def direct(self) -> bool:
        return self.route == "direct"

    @property
    def backends(self) -> tuple[str, str]:
        """(front backend, back backend) of a gateway route."""
        front, _, back = self.route.partition(":")[2].partition("->")
        return front, back

    @property
    def sides(self) -> tuple[str, str]:
        """(client side wire+transport, server side wire+transport)."""
        if "->" in self.transport:
            a, _, b = self.transport.partition("->")
            return a, b
        return self.transport, self.transport

    @property
    def client_wire(self) -> str:
        return self.sides[0].partition("+")[0]

    @property
    def server_wire(self) -> str:
        return self.sides[1].partition("+")[0]

    @property
    def net(self) -> str:
        return self.sides[0].partition("+")[2]

    @property
    def wire(self) -> str:
        """``zmq``, ``sp`` (direct) or ``zmq->sp`` (gateway): the report's grid key."""
        return self.client_wire if self.direct else f"{self.client_wire}->{self.server_wire}"

    @property
    def requester(self) -> str | None:
        """Which side sends the first message: ``client``, ``server`` or None (nobody can)."""
        if self.family != "reqrep":
            return pattern_sender(self)
        ct, st = self.client_type, self.server_type
        if not self.direct:  # the gateway only forwards requests from its front
            return "client" if ct in ("REQ", "DEALER", "ROUTER") else None
        if ct == "REQ":
            return "client"
        if st == "REQ":
            return "server"
        if ct == "REP":  # a REP client answers; a DEALER server can ask it, a ROUTER server
            return "server" if st == "DEALER" else None  # cannot address it (REP sends no Identity)
        return "client"  # DEALER/ROUTER client to REP/DEALER/ROUTER server

    @property
    def responder(self) -> str | None:
        req = self.requester
        if req is None:
            return None
        other = "server" if req == "client" else "client"
        kind = self.server_type if other == "server" else self.client_type
        return other if kind != "REQ" else None

    def impl_of(self, side: str) -> str:
        return self.client_impl if side == "client" else self.server_impl

    def type_of(self, side: str) -> str:
        return self.client_type if side == "client" else self.server_type

    @property
    def family(self) -> str:
        """``reqrep``, ``pubsub``, ``pipeline`` or ``pair``: a gateway cell's bridge pattern
        (``gateway-pubsub:pyzmq->pynng``), a direct cell's client type's family."""
        if not self.direct:
            head = self.route.partition(":")[0]
            pattern = head.partition("-")[2] or "reqrep"
            return "pair" if pattern == "pair1" else pattern
        return FAMILY_OF.get(self.client_type, "reqrep")

    @property
    def gateway_pattern(self) -> str:
        """The ``?pattern=`` of a gateway cell (``pair1`` kept)."""
        return self.route.partition(":")[0].partition("-")[2] or "reqrep"

    def validate(self) -> None:
        if self.family != "reqrep":
            validate_pattern_cell(self)
            return
        if self.shape not in SHAPES:
            raise ValueError(f"unknown shape {self.shape!r}")
        if self.shape == "heartbeat" and "zmq" not in (self.client_wire, self.server_wire):
            raise ValueError("a heartbeat cell needs a ZeroMQ side (SP has no heartbeat)")
        if self.shape in SECURITY:
            self._validate_security(SECURITY[self.shape])
        for side in ("client", "server"):
            impl, kind = self.impl_of(side), self.type_of(side)
            wire = self.client_wire if side == "client" else self.server_wire
            if impl not in IMPLS:
                raise ValueError(f"unknown impl {impl!r}")
            if wire not in wire_of_impl(impl):
                raise ValueError(f"{impl} does not speak the {wire} wire")
            if kind not in (ZMTP_TYPES if wire == "zmq" else SP_TYPES):
                raise ValueError(f"{kind} is not a socket type on the {wire} wire")
            if kind not in IMPLEMENTATIONS[impl].reqrep:
                raise ValueError(f"{impl} plays no {kind}")
            if self.net not in IMPLEMENTATIONS[impl].nets:
                raise ValueError(f"{impl} runs on {', '.join(sorted(IMPLEMENTATIONS[impl].nets))}")
            if "ws-only" in IMPLEMENTATIONS[impl].tags and self.shape != "zws":
                raise ValueError(f"{impl} speaks ZeroMQ over WebSocket only (shape zws)")
            if self.shape == "heartbeat" and wire == "zmq" and not IMPLEMENTATIONS[impl].heartbeat:
                raise ValueError(f"{impl} sends no heartbeats")
        if self.net not in NETS:
            raise ValueError(f"unknown transport {self.net!r}")
        if (not self.direct and self.client_type == "ROUTER"
                and not IMPLEMENTATIONS[self.client_impl].router_client):
            raise ValueError(f"{self.client_impl} cannot name the gateway (CONNECT_ROUTING_ID)")
        if not self.direct:
            front, back = self.backends
            fronts = (*BACKENDS[self.client_wire], ONE_PORT)
            if front not in fronts or back not in BACKENDS[self.server_wire]:
                raise ValueError(f"bad route {self.route!r} for {self.transport}")
            if front == ONE_PORT and self.shape == "heartbeat":
                raise ValueError("one-port cells exchange data (heartbeat cells name a wire)")


    def _validate_security(self, sec: Sec) -> None:
        wires = {self.client_wire, self.server_wire}
        if (sec.zmtp or sec.zws) and "zmq" not in wires or sec.sp and "sp" not in wires:
            raise ValueError(f"shape {self.shape} needs a hop of each wire it names")
        if sec.bad and self.client_wire != ("zmq" if sec.zmtp else "sp"):
            raise ValueError(f"shape {self.shape}: the client's own hop carries the wrong "
                             "credentials")
        if self.net != "tcp":
            raise ValueError("security cells run on tcp")
        for side, wire in (("client", self.client_wire), ("server", self.server_wire)):
            impl = IMPLEMENTATIONS[self.impl_of(side)]
            if wire == "zmq" and sec.zmtp and sec.zmtp not in impl.mechanisms:
                raise ValueError(f"{impl.name} has no {sec.zmtp} in the matrix")
            if wire == "sp" and sec.sp and sec.sp not in impl.sp_transports:
                raise ValueError(f"{impl.name} has no {sec.sp} in the matrix")
            if wire == "zmq" and sec.zws and sec.zws not in impl.zmq_transports and (
                    self.direct or side == "client"):  # (a gateway's server hop stays tcp)
                raise ValueError(f"{impl.name} has no zmq+{sec.zws} in the matrix")
        if not self.direct and ONE_PORT in self.backends:
            raise ValueError("a one-port front has no security")

    @property
    def security(self) -> Sec | None:
        """What this cell's shape puts on its hops (None: plain tcp/ipc, NULL mechanism)."""
        return SECURITY.get(self.shape)


def cells_from_ids(text: str) -> tuple[Cell, ...]:
    """Cells written as their ids, one a line."""
    return tuple(Cell.from_id(line) for line in text.splitlines() if line.strip())


def validated(cells: list[Cell]) -> list[Cell]:
    """``cells`` once each, in order, each checked (``Cell.validate`` raises on a cell that
    makes no sense: a generator's mistake, not a finding)."""
    out = list(dict.fromkeys(cells))
    for c in out:
        c.validate()
    return out


def validate_pattern_cell(cell: Cell) -> None:
    if cell.shape not in PATTERN_SHAPES:
        raise ValueError(f"unknown pattern shape {cell.shape!r}")
    for side in ("client", "server"):
        impl, kind = cell.impl_of(side), cell.type_of(side)
        wire = cell.client_wire if side == "client" else cell.server_wire
        if impl not in PATTERN_IMPLS or wire not in wire_of_impl(impl):
            raise ValueError(f"{impl} on the {wire} wire is not a pattern peer")
        if kind not in PATTERN_TYPES[wire]:
            raise ValueError(f"{kind} is not a pattern socket type on the {wire} wire")
        if kind not in IMPLEMENTATIONS[impl].patterns:
            raise ValueError(f"{impl} has no {kind}")
        if cell.net not in IMPLEMENTATIONS[impl].nets:
            raise ValueError(f"{impl} has no {cell.net}")
    if cell.net not in NETS:
        raise ValueError(f"unknown transport {cell.net!r}")
    if cell.shape in DYNAMIC_SHAPES:
        if cell.client_type not in ("SUB", "XSUB") or not IMPLEMENTATIONS[cell.client_impl].unsubscribe:
            raise ValueError(f"shape {cell.shape}: the client is a subscriber that can change "
                             "its subscriptions")
        if IMPLEMENTATIONS[cell.server_impl].fixed_sender:
            raise ValueError(f"shape {cell.shape}: the publisher sends rounds")
    if not cell.direct:
        if cell.gateway_pattern not in GATEWAY_PATTERN_KINDS:
            raise ValueError(f"bad pattern in route {cell.route!r}")
        front, back = cell.backends
        if front not in PATTERN_BACKENDS[cell.client_wire] or back not in PATTERN_BACKENDS[cell.server_wire]:
            raise ValueError(f"bad route {cell.route!r} for {cell.transport}")


# -- running ----------------------------------------------------------------------------------
DEFAULT_TIMEOUT = 2.0


def hard_timeout(timeout: float) -> float:
    """Wall-clock ceiling of one cell: set-up (gateway start), probe, rounds, tear-down."""
    return 30.0 + 6 * timeout


def executor() -> str:
    """Where a cell ran: host and working directory (on a Spark worker, the executor's own
    directory: ``.../work/app-.../<executor id>``)."""
    import os
    import socket

    return f"{socket.gethostname()}:{os.getcwd()}"
