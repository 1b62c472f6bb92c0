"""The cell library: what a matrix cell is, what it must do, and how to run one.

A cell = (client impl, client type, server impl, server type, wire/transport, route, shape).

* ``client`` connects, ``server`` binds (through the gateway: the client connects to the
  gateway's front, the gateway's back connects to the server).
* impls: ``native`` (this project's engine, both wires), ``libzmq`` (pyzmq), ``nng`` (pynng,
  cooked), ``nng-raw`` (pynng raw: ``nng_req0_open_raw`` / ``nng_rep0_open_raw``, headers read
  and written by hand), ``nanomsg`` (Debian's ``nanocat``, nanomsg 1.1.5), ``nng-1.5``
  (Debian's ``nngcat``, nng 1.5.2) and ``jeromq-0.3`` (Debian's JeroMQ 0.3.6, a ZMTP 2.0 peer:
  ``gateway.tools.harness.peers.jeromq``; tcp only; its cells are :func:`jeromq_cells`).
* ``transport`` is the wire/transport column, spelled like the URL scheme: ``zmq+tcp``,
  ``sp+ipc`` for a direct cell; ``<front>-><back>`` (``zmq+tcp->sp+tcp``) through the gateway.
  Direct cells never cross wires: a libzmq peer and an nng peer cannot talk (different
  handshakes), so such pairs are not cells; the gateway cells are the cross-wire ones.
* ``route``: ``direct`` or ``gateway:<front backend>-><back backend>`` with backends
  ``pyzmq``/``native`` on a ZMTP side and ``pynng``/``native`` on an SP side; a front backend
  ``any`` is the native engine on one port for both wires (``any+tcp://``): the client speaks
  its own wire (the transport's first side) to a port that also takes the other one
  (:func:`oneport_cells`).
* shapes: ``small`` (100 B), ``empty`` (0 B), ``64k`` (65 536 B), ``oversize`` (1 MiB + 1 KiB),
  and ``heartbeat`` (ZMTP liveness): every ZMTP socket of the cell, the gateway's included,
  sends heartbeats (``HEARTBEAT``: libzmq's HEARTBEAT_IVL/TIMEOUT, the native engine's
  ``heartbeat_ivl``/``heartbeat_timeout``); two 100-byte exchanges with ``HEARTBEAT_IDLE``
  seconds of silence between them, and no connection may drop meanwhile (each side's PINGs
  answered by the other implementation).
* security and transport shapes (``SECURITY``; :func:`security_cells`, 127 cells, 12 of them in
  :func:`ci_cells` as ``SECURITY_CI``; the rest ``slow``): a 100-byte exchange with CURVE or
  PLAIN on the ZeroMQ hops (``curve``, ``plain``), SP over TLS, WebSocket or secure WebSocket on
  the SP hops (``tls``, ``ws``, ``wss``) or both through the gateway (``curve+tls``,
  ``plain+tls``), and with the client's credentials wrong: ``curve-badkey`` (a CURVE key the
  server does not allow), ``plain-badpass`` (a wrong PLAIN password), ``tls-untrusted`` and
  ``wss-untrusted`` (a client CA that did not sign the server's certificate). Impls: native and
  libzmq on ZeroMQ hops, native and nng on SP hops; tcp only; directly and through the gateway
  (native and library backends; ws/wss fronts and backs are the native engine's). Keys and
  certificates are made once per run (:mod:`gateway.tools.harness.security`, on
  ``gateway.tools.harness.certs``).

Expected outcome (``expected(cell)``) is derived, never listed by hand:

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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from itertools import product
from typing import Any

from gateway.config import Limits
from gateway.patterns.pairing import (
    SOCKET_TYPES,
    sp_legal,
    sp_protocol,
    zmtp_legal,
    zmtp_socket_type,
)
from gateway.tools.harness.peers import RECEIVERS, SENDERS
from gateway.tools.harness.peers import Security as Sec
from gateway.tools.matrix.impls import IMPLEMENTATIONS

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
        if sec.zmtp and "zmq" not in wires or sec.sp and "sp" not in wires:
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
        if not self.direct and ONE_PORT in self.backends:
            raise ValueError("a one-port front has no security")

    @property
    def security(self) -> Sec | None:
        """What this cell's shape puts on its hops (None: plain tcp/ipc, NULL mechanism)."""
        return SECURITY.get(self.shape)


def _omq_bound_subscriber(cell: Cell) -> bool:
    """omq.rs as a subscriber that binds, a publisher connecting to it."""
    return (cell.direct and cell.server_impl == "omq" and cell.server_type in ("SUB", "XSUB")
            and cell.client_type in ("PUB", "XPUB") and cell.client_impl != "omq")


def _native_router_omq_req(cell: Cell) -> bool:
    """The native engine's ROUTER and omq.rs's REQ, directly."""
    sides = {(cell.client_impl, cell.client_type), (cell.server_impl, cell.server_type)}
    return cell.direct and sides == {("native", "ROUTER"), ("omq", "REQ")}


#: intermittent known issues: pytest marks them xfail without ``strict`` (they pass at times)
INTERMITTENT = frozenset({_native_router_omq_req})

#: Cells whose observed outcome (or wire check) differs from the tables because of a bug the
#: matrix found, with the reason. pytest marks them xfail (strict, unless INTERMITTENT: a fix
#: makes them fail until removed here); ``gateway matrix run`` counts them as known issues,
#: not as unexplained mismatches.
KNOWN_ISSUES: tuple[tuple[Callable[[Cell], bool], str], ...] = (
    (_omq_bound_subscriber,
     "omq.rs 0.21: a SUB that binds sends its subscriptions to no publisher that connects to "
     "it (nothing crosses; a connecting omq SUB is served, and libzmq's bound SUB is too)"),
    (_native_router_omq_req,
     "omq.rs 0.21, intermittent (about 1 run in 3): its REQ writes two empty frames before "
     "its first body (on the wire after READY: 01 00 01 00 00 64 ...; the next requests have "
     "one), so the native ROUTER reports [id, '', '', body], as it arrived; not seen with "
     "libzmq's ROUTER, whose handshake timing differs"),
)


def known_issue_strict(cell: Cell) -> bool:
    """False for an intermittent known issue (see :data:`INTERMITTENT`)."""
    return not any(applies in INTERMITTENT and applies(cell) for applies, _ in KNOWN_ISSUES)


def known_issue(cell: Cell) -> str | None:
    """Why ``cell`` is known not to end as the tables say (None: it must)."""
    return next((why for applies, why in KNOWN_ISSUES if applies(cell)), None)


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


# -- expected outcome ----------------------------------------------------------------------
def legal(wire: str, a: str, b: str) -> bool:
    """The pairing tables, for socket types ``a`` and ``b`` on ``wire``."""
    if wire == "zmq":
        return zmtp_legal(a, b)
    return sp_legal(sp_protocol(a), sp_protocol(b))


#: What the gateway's sockets are, as the pairing tables see them (DESIGN section 6: a raw REP
#: in front, a raw REQ at the back; on ZMTP they announce ROUTER and DEALER).
GATEWAY_FRONT_TYPE = "REP"
GATEWAY_BACK_TYPE = "REQ"


def _as_wire_type(wire: str, kind: str, raw: bool) -> str:
    return zmtp_socket_type(kind, raw=raw) if wire == "zmq" else kind


def hops_legal(cell: Cell) -> list[tuple[str, bool]]:
    """Each link of the cell with its verdict from the pairing tables."""
    if cell.direct:
        w = cell.client_wire
        hops = [(f"{w}: {cell.client_type}-{cell.server_type}",
                 legal(w, cell.client_type, cell.server_type))]
        if w == "zmq":  # a ZMTP 2.0-only peer meets only peers that still speak 2.0
            a, b = (IMPLEMENTATIONS[i].zmtp for i in (cell.client_impl, cell.server_impl))
            if not set(a) & set(b):
                hops.append((f"zmq: ZMTP {'/'.join(map(str, a))} vs "
                             f"{'/'.join(map(str, b))}", False))
        return hops
    cw, sw = cell.client_wire, cell.server_wire
    front = _as_wire_type(cw, GATEWAY_FRONT_TYPE, raw=True)
    back = _as_wire_type(sw, GATEWAY_BACK_TYPE, raw=True)
    return [
        (f"{cw}: {cell.client_type}-gateway {front}", legal(cw, cell.client_type, front)),
        (f"{sw}: gateway {back}-{cell.server_type}", legal(sw, back, cell.server_type)),
    ]


def reply_is_oversize(cell: Cell) -> bool:
    """Python responders answer with a reply as large as the request; CLI responders with a
    short fixed reply when the request is oversize (a CLI cannot compute its answer)."""
    responder = cell.responder
    return responder is not None and cell.impl_of(responder) not in CLI_IMPLS


def limits_on_path(cell: Cell) -> list[str]:
    """Who refuses an oversize message on this cell's path (empty: nobody)."""
    if cell.shape != "oversize" or cell.requester is None:
        return []
    size = SHAPES[cell.shape]
    out = []
    responder = cell.responder
    requester = cell.requester
    if responder is not None:
        lim = RECV_LIMITS[cell.impl_of(responder)]
        if lim is not None and size > lim:
            out.append(f"{responder} {cell.impl_of(responder)} (request, limit {lim})")
    if not cell.direct and size > GATEWAY_LIMIT:
        out.append(f"gateway (limit {GATEWAY_LIMIT})")
    if reply_is_oversize(cell):
        lim = RECV_LIMITS[cell.impl_of(requester)]
        if lim is not None and size > lim:
            out.append(f"{requester} {cell.impl_of(requester)} (reply, limit {lim})")
    return out


def expected(cell: Cell) -> str:
    """``exchanged`` | ``refused-handshake`` | ``refused-limit``, from the tables (see module doc)."""
    if cell.family != "reqrep":
        return "exchanged" if all(ok for _, ok in pattern_hops_legal(cell)) else "refused-handshake"
    if not all(ok for _, ok in hops_legal(cell)):
        return "refused-handshake"
    if cell.security is not None and cell.security.bad:
        return "refused-auth"
    if limits_on_path(cell):
        return "refused-limit"
    return "exchanged"


def expected_reason(cell: Cell) -> str:
    hops = pattern_hops_legal(cell) if cell.family != "reqrep" else hops_legal(cell)
    bad = [name for name, ok in hops if not ok]
    if bad:
        return "illegal " + "; ".join(bad)
    if cell.security is not None and cell.security.bad:
        return f"legal, with the wrong credentials ({cell.shape})"
    lim = limits_on_path(cell)
    if lim:
        return "over the limit of " + ", ".join(lim)
    return "legal"


# -- the matrix ------------------------------------------------------------------------------
def _direct(wire: str, net: str, ci: str, si: str, ct: str, st: str, shape: str) -> Cell:
    return Cell(ci, ct, si, st, f"{wire}+{net}", "direct", shape)


def _gw(cw: str, sw: str, net: str, fb: str, bb: str, ci: str, ct: str, si: str, st: str,
        shape: str) -> Cell:
    return Cell(ci, ct, si, st, f"{cw}+{net}->{sw}+{net}", f"gateway:{fb}->{bb}", shape)


def _shapes_for(cell: Cell) -> tuple[str, ...]:
    """Every shape for legal pairings where the client asks; one shape for the others."""
    if all(ok for _, ok in hops_legal(cell)) and cell.requester == "client":
        return DATA_SHAPES
    return ("small",)


def _observable(cell: Cell) -> bool:
    """A pairing where nobody can send is only observable through handshake evidence."""
    if cell.requester is not None:
        return True
    return bool({cell.client_impl, cell.server_impl} & EVIDENCE_IMPLS)


GW_CLIENTS = {
    "zmq": [("native", "REQ"), ("libzmq", "REQ"), ("libzmq", "DEALER"), ("libzmq", "ROUTER"),
            ("native", "DEALER")],
    "sp": [("native", "REQ"), ("nng", "REQ"), ("nng-raw", "REQ"), ("nanomsg", "REQ"),
           ("nng-1.5", "REQ")],
}
GW_SERVERS = {
    "zmq": [("native", "REP"), ("libzmq", "REP"), ("libzmq", "ROUTER"), ("libzmq", "DEALER"),
            ("native", "ROUTER")],
    "sp": [("native", "REP"), ("nng", "REP"), ("nng-raw", "REP"), ("nanomsg", "REP"),
           ("nng-1.5", "REP")],
}
GW_DEFAULT_CLIENT = {"zmq": ("libzmq", "REQ"), "sp": ("nng", "REQ")}
GW_DEFAULT_SERVER = {"zmq": ("libzmq", "REP"), "sp": ("nng", "REP")}
#: an illegal peer for each side of the gateway: a REP client (vs the front's ROUTER/rep0) and
#: a REQ server (vs the back's DEALER/req0).
GW_BAD_CLIENT = {"zmq": ("libzmq", "REP"), "sp": ("nng", "REP")}
GW_BAD_SERVER = {"zmq": ("libzmq", "REQ"), "sp": ("nng", "REQ")}


def gateway_cells(net: str = "tcp", backends: str = "all") -> list[Cell]:
    out: list[Cell] = []
    for cw, sw in product(WIRES, repeat=2):
        for fb, bb in product(BACKENDS[cw], BACKENDS[sw]):
            if backends == "default" and (fb, bb) != (BACKENDS[cw][0], BACKENDS[sw][0]):
                continue
            if backends == "native" and (fb, bb) != ("native", "native"):
                continue
            dc, ds = GW_DEFAULT_CLIENT[cw], GW_DEFAULT_SERVER[sw]
            pairs = [(c, ds) for c in GW_CLIENTS[cw]] + [(dc, s) for s in GW_SERVERS[sw]]
            pairs += [(GW_BAD_CLIENT[cw], ds), (dc, GW_BAD_SERVER[sw])]
            seen = set()
            for (ci, ct), (si, st) in pairs:
                if (ci, ct, si, st) in seen:
                    continue
                seen.add((ci, ct, si, st))
                out.append(_gw(cw, sw, net, fb, bb, ci, ct, si, st, "small"))
            for shape in ("empty", "64k", "oversize"):
                out.append(_gw(cw, sw, net, fb, bb, *dc, *ds, shape))
    return out


def heartbeat_cells() -> list[Cell]:
    """ZMTP liveness: native and libzmq heartbeats against each other, directly and through
    the gateway on every route with a ZeroMQ side (both backends)."""
    cells = [_direct("zmq", "tcp", ci, si, ct, st, "heartbeat")
             for ci, si in product(ZMTP_IMPLS, repeat=2)
             for ct, st in (("REQ", "REP"), ("DEALER", "ROUTER"))]
    for cw, sw in product(WIRES, repeat=2):
        if "zmq" not in (cw, sw):
            continue
        for fb, bb in product(BACKENDS[cw], BACKENDS[sw]):
            cells.append(_gw(cw, sw, "tcp", fb, bb, *GW_DEFAULT_CLIENT[cw],
                             *GW_DEFAULT_SERVER[sw], "heartbeat"))
    return cells


def security_cells() -> list[Cell]:
    """CURVE and PLAIN on ZeroMQ hops, TLS, ws and wss on SP hops: directly between the native
    engine and the libraries, and through the gateway (native and library backends), with the
    right credentials (exchanged) and the wrong ones (refused-auth)."""
    cells: list[Cell] = []
    zmq_shapes = ("curve", "curve-badkey", "plain", "plain-badpass")
    sp_shapes = ("tls", "tls-untrusted", "ws", "wss", "wss-untrusted")
    for ci, si in product(SECURE_IMPLS["zmq"], repeat=2):
        cells += [_direct("zmq", "tcp", ci, si, "REQ", "REP", s) for s in zmq_shapes]
    cells += [_direct("zmq", "tcp", "libzmq", "native", "DEALER", "ROUTER", s)
              for s in ("curve", "plain")]
    for ci, si in product(SECURE_IMPLS["sp"], repeat=2):
        cells += [_direct("sp", "tcp", ci, si, "REQ", "REP", s) for s in sp_shapes]
    for cw, sw in product(WIRES, repeat=2):
        shapes = [s for s, sec in SECURITY.items()
                  if (not sec.zmtp or "zmq" in (cw, sw)) and (not sec.sp or "sp" in (cw, sw))
                  and (not sec.bad or cw == ("zmq" if sec.zmtp else "sp"))]
        for fb, bb in product(BACKENDS[cw], BACKENDS[sw]):
            sp_backends = {b for w, b in ((cw, fb), (sw, bb)) if w == "sp"}
            for shape in shapes:
                if SECURITY[shape].sp in ("ws", "wss") and "pynng" in sp_backends:
                    continue  # the gateway's ws and wss are the native engine's
                cells.append(_gw(cw, sw, "tcp", fb, bb, *GW_DEFAULT_CLIENT[cw],
                                 *GW_DEFAULT_SERVER[sw], shape))
    return validated(cells)


#: the security cells CI runs: CURVE and PLAIN right and wrong against libzmq, TLS and wss
#: right and wrong against nng, and the chains of the issue through the gateway
SECURITY_CI = cells_from_ids("""
libzmq:REQ>native:REP@zmq+tcp/direct/curve
libzmq:REQ>native:REP@zmq+tcp/direct/curve-badkey
native:REQ>libzmq:REP@zmq+tcp/direct/plain-badpass
nng:REQ>native:REP@sp+tcp/direct/tls-untrusted
native:REQ>nng:REP@sp+tcp/direct/wss
libzmq:REQ>nng:REP@zmq+tcp->sp+tcp/gateway:native->native/curve+tls
nng:REQ>libzmq:REP@sp+tcp->zmq+tcp/gateway:native->pyzmq/plain+tls
nng:REQ>libzmq:REP@sp+tcp->zmq+tcp/gateway:native->native/ws
libzmq:REQ>nng:REP@zmq+tcp->sp+tcp/gateway:pyzmq->native/plain-badpass
libzmq:DEALER>native:ROUTER@zmq+tcp/direct/plain
native:REQ>nng:REP@sp+tcp/direct/tls
nng:REQ>libzmq:REP@sp+tcp->zmq+tcp/gateway:native->native/wss-untrusted
""")


def oneport_cells() -> list[Cell]:
    """One port, both wires (``any+tcp://``, route ``gateway:any-><back>``): every gateway
    client of each wire, legal and illegal, to the default server of each wire with both
    back ends, and the data shapes for the default pairs; ipc once per direction."""
    cells: list[Cell] = []
    for cw, sw in product(WIRES, repeat=2):
        ds = GW_DEFAULT_SERVER[sw]
        for bb in BACKENDS[sw]:
            for client in [*GW_CLIENTS[cw], GW_BAD_CLIENT[cw]]:
                cells.append(_gw(cw, sw, "tcp", ONE_PORT, bb, *client, *ds, "small"))
            cells += [_gw(cw, sw, "tcp", ONE_PORT, bb, *GW_DEFAULT_CLIENT[cw], *ds, shape)
                      for shape in ("empty", "64k", "oversize")]
        cells.append(_gw(cw, sw, "ipc", ONE_PORT, "native", *GW_DEFAULT_CLIENT[cw], *ds,
                         "small"))
    return validated(cells)


#: the one-port cells CI runs: each client wire to each server wire, a DEALER with its own
#: envelope, and an illegal client on the shared port
ONEPORT_CI = cells_from_ids("""
libzmq:REQ>nng:REP@zmq+tcp->sp+tcp/gateway:any->native/small
libzmq:DEALER>libzmq:REP@zmq+tcp->zmq+tcp/gateway:any->native/small
nng:REQ>nng:REP@sp+tcp->sp+tcp/gateway:any->native/small
nng:REQ>libzmq:REP@sp+tcp->zmq+tcp/gateway:any->pyzmq/small
libzmq:REP>nng:REP@zmq+tcp->sp+tcp/gateway:any->native/small
""")


def jeromq_cells() -> list[Cell]:
    """JeroMQ 0.3 (ZMTP 2.0) against the peers that negotiate: the native engine (every ordered
    type pairing, legal and illegal, as client and as server), libzmq, and through the gateway
    both ways with the native and the library backends. Its CI share is in :func:`ci_cells`;
    the rest is ``slow`` (one JVM per peer)."""
    cells: list[Cell] = []
    for ct, st in product(ZMTP_TYPES, repeat=2):
        for ci, si in (("native", JEROMQ), (JEROMQ, "native")):
            if ci == JEROMQ and ct == "ROUTER":
                continue  # a ROUTER requester needs the server's id first; not played by JeroMQ
            base = _direct("zmq", "tcp", ci, si, ct, st, "small")
            if _observable(base):
                cells += [_direct("zmq", "tcp", ci, si, ct, st, s) for s in _shapes_for(base)]
    cells += [
        _direct("zmq", "tcp", JEROMQ, "libzmq", "REQ", "REP", "small"),
        _direct("zmq", "tcp", JEROMQ, "libzmq", "DEALER", "ROUTER", "small"),
        _direct("zmq", "tcp", "libzmq", JEROMQ, "REQ", "REP", "small"),
        _direct("zmq", "tcp", "libzmq", JEROMQ, "DEALER", "ROUTER", "64k"),
    ]
    for fb, bb in (("native", "native"), ("pyzmq", "pynng")):
        for ct in ("REQ", "DEALER", "REP"):  # REP: illegal at the gateway's front
            cells.append(_gw("zmq", "sp", "tcp", fb, bb, JEROMQ, ct, "nng", "REP", "small"))
    for fb, bb in (("native", "native"), ("pynng", "pyzmq")):
        for st in ("REP", "ROUTER", "DEALER", "REQ"):  # REQ: illegal at the gateway's back
            cells.append(_gw("sp", "zmq", "tcp", fb, bb, "nng", "REQ", JEROMQ, st, "small"))
    cells.append(_gw("zmq", "zmq", "tcp", "native", "native", JEROMQ, "DEALER", JEROMQ, "ROUTER",
                     "small"))
    return validated(cells)


#: the JeroMQ cells CI runs (a JVM per peer: a handful, each a different path)
JEROMQ_CI = cells_from_ids("""
jeromq-0.3:REQ>native:REP@zmq+tcp/direct/small
native:DEALER>jeromq-0.3:ROUTER@zmq+tcp/direct/small
jeromq-0.3:REP>native:REP@zmq+tcp/direct/small
jeromq-0.3:DEALER>nng:REP@zmq+tcp->sp+tcp/gateway:native->native/small
nng:REQ>jeromq-0.3:ROUTER@sp+tcp->zmq+tcp/gateway:native->native/small
""")


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


def error_row(cell: Cell, detail: str, duration: float = 0.0) -> dict[str, Any]:
    row: dict[str, Any] = dict(cell.as_dict())
    row.update(expected=expected(cell), observed="error", envelope_ok=False, rtt_us=None,
               detail=detail[:2000], cell_id=cell.cell_id, wire=cell.wire,
               duration_s=round(duration, 3), bytes_seen="", executor=executor())
    return row


# ---------------------------------------------------------------------------------------------
# pub/sub, pipeline and pair (docs/patterns.md)
#
# The same Cell, with the patterns' socket types. Shapes: ``topic`` (the subscriber holds
# ``a.``), ``prefix`` (``a``: a prefix of ``a.`` and ``ab``), ``all`` (the empty subscription:
# everything, the empty message too), ``multi`` (``a.`` and ``b.``), all four publishing one
# round of messages for subscribed, unsubscribed and prefix-of-another topics; ``stream`` (20
# numbered messages, each way for pair). Delivery is checked exactly: count, order per sender,
# nothing for topics nobody subscribed to. Observed: ``exchanged`` (the delivery check passed),
# ``refused-handshake`` (nothing crossed within the timeout), ``bad-delivery``, ``error``.

#: the patterns' socket types per wire (SP pair0/pair1 are distinct protocols, 0x10/0x11)
PATTERN_TYPES = {"zmq": ("PUB", "SUB", "XPUB", "XSUB", "PUSH", "PULL", "PAIR"),
                 "sp": ("PUB", "SUB", "PUSH", "PULL", "PAIR0", "PAIR1")}
FAMILY_OF = {"PUB": "pubsub", "SUB": "pubsub", "XPUB": "pubsub", "XSUB": "pubsub",
             "PUSH": "pipeline", "PULL": "pipeline", "PAIR": "pair", "PAIR0": "pair",
             "PAIR1": "pair"}
PATTERN_SHAPES = ("topic", "prefix", "all", "multi", "unsubscribe", "late", "stream")
PUBSUB_SHAPES = ("topic", "prefix", "all", "multi")
#: pub/sub shapes over time: ``unsubscribe`` (the subscriber holds ``a.`` and ``b.``, gets a
#: round, drops ``b.``, gets the next round without it), ``late`` (a second subscriber of the
#: same implementation, holding ``b.``, joins after a first round: the next round reaches both)
DYNAMIC_SHAPES = ("unsubscribe", "late")
#: ZMTP (RFC 37's compatibility table, as libzmq 4.3.5 checks it at READY)
ZMTP_PATTERN_PEERS: dict[str, frozenset[str]] = {
    "PUB": frozenset({"SUB", "XSUB"}), "XPUB": frozenset({"SUB", "XSUB"}),
    "SUB": frozenset({"PUB", "XPUB"}), "XSUB": frozenset({"PUB", "XPUB"}),
    "PUSH": frozenset({"PULL"}), "PULL": frozenset({"PUSH"}), "PAIR": frozenset({"PAIR"}),
}
#: SP (nng: only the declared peer protocol; pub0 0x20/sub0 0x21, push0 0x50/pull0 0x51,
#: pair0 0x10, pair1 0x11)
SP_PATTERN_PEERS: dict[str, frozenset[str]] = {
    "PUB": frozenset({"SUB"}), "SUB": frozenset({"PUB"}), "PUSH": frozenset({"PULL"}),
    "PULL": frozenset({"PUSH"}), "PAIR0": frozenset({"PAIR0"}), "PAIR1": frozenset({"PAIR1"}),
}
#: the gateway's own sockets per pattern: (front, back) per wire
GATEWAY_PATTERN_KINDS = {
    "pubsub": {"zmq": ("XPUB", "XSUB"), "sp": ("PUB", "SUB")},
    "pipeline": {"zmq": ("PULL", "PUSH"), "sp": ("PULL", "PUSH")},
    "pair": {"zmq": ("PAIR", "PAIR"), "sp": ("PAIR0", "PAIR0")},
    "pair1": {"zmq": ("PAIR", "PAIR"), "sp": ("PAIR1", "PAIR1")},
}
PATTERN_BACKENDS = {"zmq": ("pyzmq", "native"), "sp": ("pynng", "native")}
PATTERN_IMPLS = tuple(n for n, i in IMPLEMENTATIONS.items() if i.patterns)


def pattern_legal(wire: str, a: str, b: str) -> bool:
    table = ZMTP_PATTERN_PEERS if wire == "zmq" else SP_PATTERN_PEERS
    return b in table.get(a, frozenset()) and a in table.get(b, frozenset())


def pattern_hops_legal(cell: Cell) -> list[tuple[str, bool]]:
    if cell.direct:
        w = cell.client_wire
        return [(f"{w}: {cell.client_type}-{cell.server_type}",
                 pattern_legal(w, cell.client_type, cell.server_type))]
    kinds = GATEWAY_PATTERN_KINDS[cell.gateway_pattern]
    cw, sw = cell.client_wire, cell.server_wire
    front, back = kinds[cw][0], kinds[sw][1]
    return [(f"{cw}: {cell.client_type}-gateway {front}",
             pattern_legal(cw, cell.client_type, front)),
            (f"{sw}: gateway {back}-{cell.server_type}",
             pattern_legal(sw, back, cell.server_type))]


def pattern_sender(cell: Cell) -> str:
    """Which side sends (for pair: first; the other answers the same way)."""
    if cell.server_type in ("PUB", "XPUB", "PUSH") or cell.client_type not in SENDERS:
        return "server"
    return "client"


#: what the subscribing side holds, per pub/sub shape
SHAPE_TOPICS: dict[str, tuple[bytes, ...]] = {"topic": (b"a.",), "prefix": (b"a",),
                                             "all": (b"",), "multi": (b"a.", b"b."),
                                             "unsubscribe": (b"a.", b"b."), "late": (b"a.",)}
#: ``unsubscribe``: what the subscriber drops after its first round; ``late``: what the late
#: joiner holds
SHAPE_CHANGE: dict[str, bytes] = {"unsubscribe": b"b.", "late": b"b."}
#: one round: subscribed, not subscribed, a prefix of another (``a`` vs ``a.``), the empty one
PUBSUB_ROUND = (b"a.1", b"b.1", b"c.1", b"a", b"ab", b"a.2", b"", b"b.2", b"bb", b"a.3")
STREAM_ROUND = tuple(b"m-%02d" % i for i in range(20))


def delivery_expected(cell: Cell, topics: tuple[bytes, ...] | None = None) -> list[bytes]:
    """What the receiving side must get from one round, exactly and in order (``topics``:
    what it holds, when not the shape's first set)."""
    if topics is not None or cell.shape in SHAPE_TOPICS:
        held = SHAPE_TOPICS[cell.shape] if topics is None else topics
        return [m for m in PUBSUB_ROUND if any(m.startswith(t) for t in held)]
    return list(STREAM_ROUND)


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


def _pc(ci: str, ct: str, si: str, st: str, transport: str, route: str, shape: str) -> Cell:
    return Cell(ci, ct, si, st, transport, route, shape)


_LIB = {"zmq": "libzmq", "sp": "nng"}
_GW_BACKEND = {"zmq": "pyzmq", "sp": "pynng"}


def _sp_pair(pattern: str) -> str:
    return "PAIR1" if pattern == "pair1" else "PAIR0"


def pattern_cells() -> list[Cell]:
    """Every pattern cell (``gateway matrix run``; the CI runs :func:`pattern_ci_cells`)."""
    cells: list[Cell] = []
    # direct, each wire, the libraries: every ordered pairing of the pattern types (the legal
    # ones with their shapes, the illegal ones once)
    for wire in WIRES:
        lib = _LIB[wire]
        for ct, st in product(PATTERN_TYPES[wire], repeat=2):
            if not ((ct in SENDERS and st in RECEIVERS) or (st in SENDERS and ct in RECEIVERS)):
                continue  # nothing could cross even if libzmq/nng let them pair
            if pattern_legal(wire, ct, st):
                if FAMILY_OF[ct] == "pubsub" and st in ("PUB", "XPUB"):
                    shapes: tuple[str, ...] = PUBSUB_SHAPES
                elif FAMILY_OF[ct] == "pubsub":
                    continue  # a publishing client to a subscribing server: the next loop
                else:
                    shapes = ("stream",)
            else:
                shapes = ("stream",) if FAMILY_OF[ct] != "pubsub" else ("topic",)
            cells += [_pc(lib, ct, lib, st, f"{wire}+tcp", "direct", sh) for sh in shapes]
    # direct SP across implementations (nng, nanomsg, nng 1.5): each pattern both ways
    sp_impls = ("nng", "nanomsg", "nng-1.5")
    for ci, si in product(sp_impls, repeat=2):
        if ci == si == "nng":
            continue
        cells.append(_pc(ci, "SUB", si, "PUB", "sp+tcp", "direct", "topic"))
        cells.append(_pc(ci, "PUSH", si, "PULL", "sp+tcp", "direct", "stream"))
        cells.append(_pc(ci, "PAIR0", si, "PAIR0", "sp+tcp", "direct", "stream"))
        if "nanomsg" not in (ci, si):
            cells.append(_pc(ci, "PAIR1", si, "PAIR1", "sp+tcp", "direct", "stream"))
    cells.append(_pc("nng", "PAIR0", "nng-1.5", "PAIR1", "sp+tcp", "direct", "stream"))  # illegal
    # through the gateway: each pattern, both directions across the families, every shape
    for cw, sw in (("zmq", "sp"), ("sp", "zmq"), ("zmq", "zmq"), ("sp", "sp")):
        route = f"{_GW_BACKEND[cw]}->{_GW_BACKEND[sw]}"
        t = f"{cw}+tcp->{sw}+tcp"
        sub = "SUB"
        for sh in PUBSUB_SHAPES:
            cells.append(_pc(_LIB[cw], sub, _LIB[sw], "PUB", t, f"gateway-pubsub:{route}", sh))
        cells.append(_pc(_LIB[cw], "PUSH", _LIB[sw], "PULL", t, f"gateway-pipeline:{route}",
                         "stream"))
        for pattern in ("pair", "pair1") if "sp" in (cw, sw) else ("pair",):
            ctype = "PAIR" if cw == "zmq" else _sp_pair(pattern)
            stype = "PAIR" if sw == "zmq" else _sp_pair(pattern)
            cells.append(_pc(_LIB[cw], ctype, _LIB[sw], stype, t, f"gateway-{pattern}:{route}",
                             "stream"))
        # illegal peers on each side of the gateway
        cells.append(_pc(_LIB[cw], "PULL", _LIB[sw], "PUB", t, f"gateway-pubsub:{route}",
                         "topic"))  # the client is no subscriber
        cells.append(_pc(_LIB[cw], "PUSH", _LIB[sw], "SUB", t, f"gateway-pipeline:{route}",
                         "stream"))  # the server is no PULL
        if cw == "zmq" and sw == "zmq":
            cells.append(_pc("libzmq", "XSUB", "libzmq", "XPUB", t, f"gateway-pubsub:{route}",
                             "topic"))
    # the native engine on both sides of the gateway: each pattern, both directions
    for cw, sw in (("zmq", "sp"), ("sp", "zmq")):
        t = f"{cw}+tcp->{sw}+tcp"
        cells += [
            _pc(_LIB[cw], "SUB", _LIB[sw], "PUB", t, "gateway-pubsub:native->native", "multi"),
            _pc(_LIB[cw], "SUB", _LIB[sw], "PUB", t, "gateway-pubsub:native->native", "all"),
            _pc(_LIB[cw], "PUSH", _LIB[sw], "PULL", t, "gateway-pipeline:native->native", "stream"),
            _pc(_LIB[cw], "PAIR" if cw == "zmq" else "PAIR1", _LIB[sw],
                "PAIR" if sw == "zmq" else "PAIR1", t, "gateway-pair1:native->native", "stream"),
            _pc(_LIB[cw], "PULL", _LIB[sw], "PUB", t, "gateway-pubsub:native->native", "topic"),
        ]
    # the CLIs through the gateway
    for cli in ("nanomsg", "nng-1.5"):
        cells += [
            _pc(cli, "SUB", "libzmq", "PUB", "sp+tcp->zmq+tcp", "gateway-pubsub:pynng->pyzmq", "topic"),
            _pc("libzmq", "SUB", cli, "PUB", "zmq+tcp->sp+tcp", "gateway-pubsub:pyzmq->pynng", "topic"),
            _pc(cli, "PUSH", "libzmq", "PULL", "sp+tcp->zmq+tcp", "gateway-pipeline:pynng->pyzmq", "stream"),
            _pc("libzmq", "PUSH", cli, "PULL", "zmq+tcp->sp+tcp", "gateway-pipeline:pyzmq->pynng", "stream"),
            _pc("libzmq", "PAIR", cli, "PAIR0", "zmq+tcp->sp+tcp", "gateway-pair:pyzmq->pynng", "stream"),
            _pc(cli, "PAIR0", "libzmq", "PAIR", "sp+tcp->zmq+tcp", "gateway-pair:pynng->pyzmq", "stream"),
            _pc(cli, "PULL", "libzmq", "PUB", "sp+tcp->zmq+tcp", "gateway-pubsub:pynng->pyzmq", "topic"),
        ]
    cells.append(_pc("nng-1.5", "PAIR1", "libzmq", "PAIR", "sp+tcp->zmq+tcp",
                     "gateway-pair1:pynng->pyzmq", "stream"))
    return validated(cells)


def pattern_ci_cells() -> list[Cell]:
    """The representative pattern selection for CI: each family direct on both wires (legal
    and illegal), each family through the gateway both ways across the families, the topic
    shapes once each, a CLI per family, and an illegal peer on each side of the gateway."""
    g_zs, g_sz = "zmq+tcp->sp+tcp", "sp+tcp->zmq+tcp"
    cells = [
        _pc("libzmq", "SUB", "libzmq", "XPUB", "zmq+tcp", "direct", "topic"),
        _pc("libzmq", "PUSH", "libzmq", "SUB", "zmq+tcp", "direct", "stream"),  # illegal
        _pc("nng", "SUB", "nng", "PUB", "sp+tcp", "direct", "multi"),
        _pc("nng", "PAIR0", "nng", "PAIR1", "sp+tcp", "direct", "stream"),  # illegal
        _pc("nanomsg", "PUSH", "nng-1.5", "PULL", "sp+tcp", "direct", "stream"),
        _pc("libzmq", "SUB", "nng", "PUB", g_zs, "gateway-pubsub:pyzmq->pynng", "multi"),
        _pc("libzmq", "SUB", "nng", "PUB", g_zs, "gateway-pubsub:pyzmq->pynng", "prefix"),
        _pc("nng", "SUB", "libzmq", "PUB", g_sz, "gateway-pubsub:pynng->pyzmq", "all"),
        _pc("libzmq", "PUSH", "nng", "PULL", g_zs, "gateway-pipeline:pyzmq->pynng", "stream"),
        _pc("nng", "PUSH", "libzmq", "PULL", g_sz, "gateway-pipeline:pynng->pyzmq", "stream"),
        _pc("libzmq", "PAIR", "nng", "PAIR0", g_zs, "gateway-pair:pyzmq->pynng", "stream"),
        _pc("nng", "PAIR1", "libzmq", "PAIR", g_sz, "gateway-pair1:pynng->pyzmq", "stream"),
        _pc("nanomsg", "SUB", "libzmq", "PUB", g_sz, "gateway-pubsub:pynng->pyzmq", "topic"),
        _pc("libzmq", "PUSH", "nng-1.5", "PULL", g_zs, "gateway-pipeline:pyzmq->pynng", "stream"),
        _pc("libzmq", "PULL", "nng", "PUB", g_zs, "gateway-pubsub:pyzmq->pynng", "topic"),  # bad client
        _pc("nng", "PUSH", "libzmq", "SUB", g_sz, "gateway-pipeline:pynng->pyzmq", "stream"),  # bad server
        _pc("libzmq", "SUB", "nng", "PUB", g_zs, "gateway-pubsub:native->native", "multi"),
        _pc("nng", "SUB", "libzmq", "PUB", g_sz, "gateway-pubsub:native->native", "all"),
        _pc("nng", "PUSH", "libzmq", "PULL", g_sz, "gateway-pipeline:native->native", "stream"),
        _pc("libzmq", "PAIR", "nng", "PAIR1", g_zs, "gateway-pair1:native->native", "stream"),
    ]
    return validated(cells)
