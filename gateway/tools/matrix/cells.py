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

import fnmatch
import re
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

MIB = 1 << 20

ZMTP_IMPLS = ("native", "libzmq")
SP_IMPLS = ("native", "nng", "nng-raw", "nanomsg", "nng-1.5")
#: a ZMTP 2.0 implementation (RFC 15): it meets peers that negotiate versions, RFC 37
JEROMQ = "jeromq-0.3"
IMPLS = ("native", "libzmq", "nng", "nng-raw", "nanomsg", "nng-1.5", JEROMQ)
CLI_IMPLS = frozenset({"nanomsg", "nng-1.5"})
#: impls whose peers can tell a completed handshake from a refused one (libzmq's socket monitor,
#: nng's pipe callbacks, the native engine's ``peers``); a pairing where nobody can send needs one.
EVIDENCE_IMPLS = frozenset({"libzmq", "nng", "nng-raw", "native"})
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
#: the implementations the security cells use (each can be told its keys and certificates)
SECURE_IMPLS = {"zmq": ("native", "libzmq"), "sp": ("native", "nng")}
#: heartbeat cells: interval and timeout (milliseconds) on every ZMTP socket, idle seconds
HEARTBEAT_IDLE = 1.0


#: Default maximum *received* message size per implementation, in bytes (None: no limit).
#: Measured on this machine, not assumed:
#:  - libzmq 4.3.5: ZMQ_MAXMSGSIZE defaults to -1 (no limit);
#:  - nng 1.11 (pynng 0.9.0) and nng 1.5.2 (nngcat): NNG_OPT_RECVMAXSZ defaults to 0 (no limit):
#:    both accept 1 MiB + 1 KiB. DESIGN section 10 calls 1 MiB "nng's default": that is
#:    nanomsg's default, not nng's (a finding of this matrix);
#:  - nanomsg 1.1.5: NN_RCVMAXSIZE = 1 MiB, counted on the SP payload *including* the 4-byte
#:    request id, so a REP refuses a request body of exactly 1 MiB;
#:  - native: ``gateway.Socket(max_message_size=1 MiB)`` (DESIGN section 10).
RECV_LIMITS: dict[str, int | None] = {
    "native": MIB,
    "libzmq": None,
    "nng": None,
    "nng-raw": None,
    "nanomsg": MIB,
    "nng-1.5": None,
    JEROMQ: None,  # JeroMQ 0.3.6: maxMsgSize -1 (as libzmq)
}
GATEWAY_LIMIT = Limits().max_message_size

OUTCOMES = ("exchanged", "refused-handshake", "refused-limit", "refused-auth")

#: Parquet/DataFrame columns, in order (the first twelve are the contract of issue 4).
RESULT_COLUMNS = (
    "client_impl", "client_type", "server_impl", "server_type", "transport", "route", "shape",
    "expected", "observed", "envelope_ok", "rtt_us", "detail",
    "cell_id", "wire", "duration_s",
)


def wire_of_impl(impl: str) -> tuple[str, ...]:
    return {"native": WIRES, "libzmq": ("zmq",), JEROMQ: ("zmq",)}.get(impl, ("sp",))


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
        if self.net not in NETS:
            raise ValueError(f"unknown transport {self.net!r}")
        if JEROMQ in (self.client_impl, self.server_impl) and self.net != "tcp":
            raise ValueError(f"{JEROMQ} runs on tcp only")
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
            if self.impl_of(side) not in SECURE_IMPLS[wire]:
                raise ValueError(f"{self.impl_of(side)} takes no keys in the matrix")
        if not self.direct and ONE_PORT in self.backends:
            raise ValueError("a one-port front has no security")

    @property
    def security(self) -> Sec | None:
        """What this cell's shape puts on its hops (None: plain tcp/ipc, NULL mechanism)."""
        return SECURITY.get(self.shape)


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
        return [(f"{w}: {cell.client_type}-{cell.server_type}",
                 legal(w, cell.client_type, cell.server_type))]
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


def all_cells() -> list[Cell]:
    """The full matrix (``gateway matrix run`` without ``--select``)."""
    cells: list[Cell] = []
    # direct ZMTP, tcp: every impl pair x every ordered type pair
    for ci, si in product(ZMTP_IMPLS, repeat=2):
        for ct, st in product(ZMTP_TYPES, repeat=2):
            base = _direct("zmq", "tcp", ci, si, ct, st, "small")
            if not _observable(base):
                continue
            cells += [_direct("zmq", "tcp", ci, si, ct, st, s) for s in _shapes_for(base)]
    # direct ZMTP, ipc: the main pairings
    for ci, si in product(ZMTP_IMPLS, repeat=2):
        cells += [_direct("zmq", "ipc", ci, si, "REQ", "REP", s) for s in DATA_SHAPES]
        cells += [_direct("zmq", "ipc", ci, si, "DEALER", "ROUTER", "small"),
                  _direct("zmq", "ipc", ci, si, "REQ", "REQ", "small")]
    # direct SP, tcp: every impl pair x every ordered type pair
    for ci, si in product(SP_IMPLS, repeat=2):
        for ct, st in product(SP_TYPES, repeat=2):
            base = _direct("sp", "tcp", ci, si, ct, st, "small")
            if not _observable(base):
                continue
            cells += [_direct("sp", "tcp", ci, si, ct, st, s) for s in _shapes_for(base)]
    # direct SP, ipc: req-rep, three shapes
    for ci, si in product(SP_IMPLS, repeat=2):
        cells += [_direct("sp", "ipc", ci, si, "REQ", "REP", s) for s in ("small", "64k", "oversize")]
    # through the gateway: every route and backend on tcp; default and native backends on ipc
    cells += gateway_cells("tcp", "all")
    cells += [c for c in gateway_cells("ipc", "default") if c.shape in ("small", "64k")]
    cells += [c for c in gateway_cells("ipc", "native")
              if c.shape == "small" and (c.client_impl, c.client_type) == GW_DEFAULT_CLIENT[c.client_wire]
              and (c.server_impl, c.server_type) == GW_DEFAULT_SERVER[c.server_wire]]
    assert len(set(cells)) == len(cells), "duplicate cells"
    # the CI and demo selections are part of the matrix, whatever the loops above chose

    cells += heartbeat_cells()
    cells = list(dict.fromkeys(cells + jeromq_cells() + oneport_cells() + security_cells()
                               + ci_cells()
                               + small_selection() + pattern_cells()))
    for c in cells:
        c.validate()
    return cells


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


def ci_cells() -> list[Cell]:
    """The CI-sized selection: every impl pair (direct REQ-REP on each wire), every ZMTP
    pairing against libzmq (so every illegal one), the SP illegal ones against nng and
    nanomsg, one cell per shape and transport, every gateway route family with both the
    library and the native backends, and an illegal peer on each side of the gateway."""
    cells: list[Cell] = []
    for ct, st in product(ZMTP_TYPES, repeat=2):  # all 16 ordered pairings, libzmq both ends
        cells.append(_direct("zmq", "tcp", "libzmq", "libzmq", ct, st, "small"))
    for ci, si in product(ZMTP_IMPLS, repeat=2):
        if (ci, si) != ("libzmq", "libzmq"):
            cells.append(_direct("zmq", "tcp", ci, si, "REQ", "REP", "small"))
    cells += [
        _direct("zmq", "tcp", "native", "libzmq", "REQ", "DEALER", "small"),  # illegal, native side
        _direct("zmq", "tcp", "libzmq", "native", "DEALER", "ROUTER", "small"),
        _direct("zmq", "tcp", "native", "libzmq", "ROUTER", "ROUTER", "small"),
        _direct("zmq", "tcp", "libzmq", "libzmq", "REQ", "REP", "empty"),
        _direct("zmq", "tcp", "libzmq", "libzmq", "DEALER", "ROUTER", "64k"),
        _direct("zmq", "tcp", "libzmq", "libzmq", "REQ", "REP", "oversize"),  # no limit: exchanged
        _direct("zmq", "tcp", "libzmq", "native", "REQ", "REP", "oversize"),  # refused-limit
        _direct("zmq", "ipc", "libzmq", "native", "REQ", "REP", "small"),
    ]
    for ci, si in product(SP_IMPLS, repeat=2):  # every SP impl pair
        cells.append(_direct("sp", "tcp", ci, si, "REQ", "REP", "small"))
    cells += [
        _direct("sp", "tcp", "nng", "nng", "REQ", "REQ", "small"),
        _direct("sp", "tcp", "nng", "nng", "REP", "REP", "small"),
        _direct("sp", "tcp", "nanomsg", "nng-1.5", "REQ", "REQ", "small"),
        _direct("sp", "tcp", "nng-raw", "native", "REQ", "REQ", "small"),
        _direct("sp", "tcp", "nng", "nanomsg", "REP", "REQ", "small"),
        _direct("sp", "tcp", "nng-raw", "nng-1.5", "REQ", "REP", "empty"),
        _direct("sp", "tcp", "native", "nng-raw", "REQ", "REP", "64k"),
        _direct("sp", "tcp", "nng", "nanomsg", "REQ", "REP", "oversize"),  # nanomsg: 1 MiB limit
        _direct("sp", "tcp", "nng", "nng-1.5", "REQ", "REP", "oversize"),  # nng: no limit
        _direct("sp", "ipc", "nanomsg", "nng", "REQ", "REP", "small"),
        _direct("sp", "ipc", "native", "nng-1.5", "REQ", "REP", "small"),
    ]
    for cw, sw in product(WIRES, repeat=2):
        for fb, bb in ((BACKENDS[cw][0], BACKENDS[sw][0]), ("native", "native")):
            cells.append(_gw(cw, sw, "tcp", fb, bb, *GW_DEFAULT_CLIENT[cw], *GW_DEFAULT_SERVER[sw], "small"))
    cells += [
        _gw("zmq", "sp", "tcp", "pyzmq", "pynng", "libzmq", "DEALER", "nng-raw", "REP", "small"),
        _gw("sp", "zmq", "tcp", "pynng", "pyzmq", "nng-raw", "REQ", "libzmq", "ROUTER", "small"),
        _gw("zmq", "sp", "tcp", "pyzmq", "pynng", "libzmq", "REP", "nng", "REP", "small"),  # bad client
        _gw("sp", "zmq", "tcp", "pynng", "pyzmq", "nng", "REQ", "libzmq", "REQ", "small"),  # bad server
        _gw("zmq", "sp", "tcp", "pyzmq", "pynng", "libzmq", "REQ", "nng", "REP", "oversize"),
        _gw("sp", "zmq", "ipc", "pynng", "pyzmq", "nng", "REQ", "libzmq", "REP", "small"),
        _direct("zmq", "tcp", "libzmq", "native", "DEALER", "ROUTER", "heartbeat"),
        _direct("zmq", "tcp", "native", "libzmq", "REQ", "REP", "heartbeat"),
        _gw("zmq", "sp", "tcp", "native", "native", "libzmq", "REQ", "nng", "REP", "heartbeat"),
        _gw("sp", "zmq", "tcp", "native", "native", "nng", "REQ", "libzmq", "REP", "heartbeat"),
    ]
    cells += pattern_ci_cells()
    cells += JEROMQ_CI
    cells += ONEPORT_CI
    cells += SECURITY_CI
    for c in cells:
        c.validate()
    return list(dict.fromkeys(cells))


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
    for c in cells:
        c.validate()
    return list(dict.fromkeys(cells))


#: the security cells CI runs: CURVE and PLAIN right and wrong against libzmq, TLS and wss
#: right and wrong against nng, and the chains of the issue through the gateway
SECURITY_CI = (
    Cell("libzmq", "REQ", "native", "REP", "zmq+tcp", "direct", "curve"),
    Cell("libzmq", "REQ", "native", "REP", "zmq+tcp", "direct", "curve-badkey"),
    Cell("native", "REQ", "libzmq", "REP", "zmq+tcp", "direct", "plain-badpass"),
    Cell("nng", "REQ", "native", "REP", "sp+tcp", "direct", "tls-untrusted"),
    Cell("native", "REQ", "nng", "REP", "sp+tcp", "direct", "wss"),
    Cell("libzmq", "REQ", "nng", "REP", "zmq+tcp->sp+tcp", "gateway:native->native", "curve+tls"),
    Cell("nng", "REQ", "libzmq", "REP", "sp+tcp->zmq+tcp", "gateway:native->pyzmq", "plain+tls"),
    Cell("nng", "REQ", "libzmq", "REP", "sp+tcp->zmq+tcp", "gateway:native->native", "ws"),
    Cell("libzmq", "REQ", "nng", "REP", "zmq+tcp->sp+tcp", "gateway:pyzmq->native",
         "plain-badpass"),
    Cell("libzmq", "DEALER", "native", "ROUTER", "zmq+tcp", "direct", "plain"),
    Cell("native", "REQ", "nng", "REP", "sp+tcp", "direct", "tls"),
    Cell("nng", "REQ", "libzmq", "REP", "sp+tcp->zmq+tcp", "gateway:native->native",
         "wss-untrusted"),
)


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
    for c in cells:
        c.validate()
    return list(dict.fromkeys(cells))


#: the one-port cells CI runs: each client wire to each server wire, a DEALER with its own
#: envelope, and an illegal client on the shared port
ONEPORT_CI = (
    Cell("libzmq", "REQ", "nng", "REP", "zmq+tcp->sp+tcp", "gateway:any->native", "small"),
    Cell("libzmq", "DEALER", "libzmq", "REP", "zmq+tcp->zmq+tcp", "gateway:any->native", "small"),
    Cell("nng", "REQ", "nng", "REP", "sp+tcp->sp+tcp", "gateway:any->native", "small"),
    Cell("nng", "REQ", "libzmq", "REP", "sp+tcp->zmq+tcp", "gateway:any->pyzmq", "small"),
    Cell("libzmq", "REP", "nng", "REP", "zmq+tcp->sp+tcp", "gateway:any->native", "small"),
)


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
    for c in cells:
        c.validate()
    return list(dict.fromkeys(cells))


#: the JeroMQ cells CI runs (a JVM per peer: a handful, each a different path)
JEROMQ_CI = (
    Cell(JEROMQ, "REQ", "native", "REP", "zmq+tcp", "direct", "small"),
    Cell("native", "DEALER", JEROMQ, "ROUTER", "zmq+tcp", "direct", "small"),
    Cell(JEROMQ, "REP", "native", "REP", "zmq+tcp", "direct", "small"),  # illegal: 2.0 type byte
    Cell(JEROMQ, "DEALER", "nng", "REP", "zmq+tcp->sp+tcp", "gateway:native->native", "small"),
    Cell("nng", "REQ", JEROMQ, "ROUTER", "sp+tcp->zmq+tcp", "gateway:native->native", "small"),
)


# -- selection -------------------------------------------------------------------------------
_KEYS = {f.name for f in fields(Cell)} | {"cell_id", "wire", "expected", "net", "impl", "type"}


def _value(cell: Cell, key: str) -> list[str]:
    if key == "expected":
        return [expected(cell)]
    if key == "impl":
        return [cell.client_impl, cell.server_impl]
    if key == "type":
        return [cell.client_type, cell.server_type]
    return [str(getattr(cell, key))]


def select(cells: list[Cell], expr: str | None) -> list[Cell]:
    """Filter cells with a small expression language (``--select``).

    Terms are separated by ``,`` (or whitespace) and all must hold:

    * ``key=value`` / ``key!=value``: a field equals (or not) the value; the value may be a glob
      (``nng*``) and may list alternatives with ``|`` (``server_impl=nanomsg|nng-1.5``). Keys: the
      cell fields, plus ``cell_id``, ``wire`` (``zmq``, ``sp``, ``zmq->sp``...), ``net`` (``tcp``,
      ``ipc``), ``expected``, ``impl`` / ``type`` (either side).
    * ``~text``  or bare ``text``: a substring of the cell id (``gateway``, ``nanomsg``, ``/64k``).
    * ``@ci`` / ``@all`` / ``@small``: a named selection (``@small`` = ``gateway.tools.matrix.cells``).
    * ``!term``: negates any of the above.

    Example: ``--select 'wire=sp,impl=nanomsg,shape!=oversize'``.
    """
    if not expr or not expr.strip():
        return list(cells)
    terms = [t for t in re.split(r"[,\s]+", expr.strip()) if t]
    preds = [_predicate(t) for t in terms]
    return [c for c in cells if all(p(c) for p in preds)]


def _predicate(term: str):  # type: ignore[no-untyped-def]
    if term.startswith("!") and len(term) > 1:
        inner = _predicate(term[1:])
        return lambda c: not inner(c)
    if term.startswith("@"):
        name = term[1:]
        if name == "all":
            return lambda c: True
        if name == "ci":
            chosen = set(ci_cells())
        elif name == "small":

            chosen = set(small_selection())
        else:
            raise ValueError(f"unknown named selection {term!r} (known: @ci, @small, @all)")
        return lambda c: c in chosen
    m = re.fullmatch(r"([a-z_]+)(!=|=)(.*)", term)
    if m:
        key, op, raw = m.groups()
        if key not in _KEYS:
            raise ValueError(f"unknown key {key!r} in --select (known: {', '.join(sorted(_KEYS))})")
        alts = raw.split("|")

        def match(c: Cell, key: str = key, alts: list[str] = alts) -> bool:
            return any(fnmatch.fnmatchcase(v, a) for v in _value(c, key) for a in alts)

        return match if op == "=" else (lambda c: not match(c))
    text = term[1:] if term.startswith("~") else term
    return lambda c: text in c.cell_id


# -- running ----------------------------------------------------------------------------------
DEFAULT_TIMEOUT = 2.0


def hard_timeout(timeout: float) -> float:
    """Wall-clock ceiling of one cell: set-up (gateway start), probe, rounds, tear-down."""
    return 30.0 + 6 * timeout


def error_row(cell: Cell, detail: str, duration: float = 0.0) -> dict[str, Any]:
    row: dict[str, Any] = dict(cell.as_dict())
    row.update(expected=expected(cell), observed="error", envelope_ok=False, rtt_us=None,
               detail=detail[:2000], cell_id=cell.cell_id, wire=cell.wire,
               duration_s=round(duration, 3))
    return row


# ---------------------------------------------------------------------------------------------
# the small selection (@small)
#
# A small matrix (about 20 cells, well under a minute of cell time) for ``make demo`` and the
# Spark test: every implementation once, the four illegal ZMTP pairings the seed note got wrong,
# both SP illegal pairings, one size-limit refusal, and each cross-family gateway route.
#
#     gateway matrix run --out /tmp/matrix --select @small && gateway matrix report /tmp/matrix


def small_selection() -> list[Cell]:
    d, g = "direct", "gateway"
    cells = [
        # ZMTP, libzmq both ends: two legal, the four illegal pairings of the seed note
        Cell("libzmq", "REQ", "libzmq", "REP", "zmq+tcp", d, "small"),
        Cell("libzmq", "DEALER", "libzmq", "ROUTER", "zmq+tcp", d, "64k"),
        Cell("libzmq", "REQ", "libzmq", "REQ", "zmq+tcp", d, "small"),
        Cell("libzmq", "REQ", "libzmq", "DEALER", "zmq+tcp", d, "small"),
        Cell("libzmq", "REP", "libzmq", "REP", "zmq+tcp", d, "small"),
        Cell("libzmq", "REP", "libzmq", "ROUTER", "zmq+tcp", d, "small"),
        # the native engine against libzmq and nng
        Cell("native", "REQ", "libzmq", "ROUTER", "zmq+tcp", d, "small"),
        Cell("libzmq", "DEALER", "native", "REP", "zmq+ipc", d, "empty"),
        Cell("nng", "REQ", "native", "REP", "sp+tcp", d, "small"),
        Cell("native", "REQ", "nng-raw", "REP", "sp+tcp", d, "small"),
        # SP libraries and CLIs
        Cell("nanomsg", "REQ", "nng", "REP", "sp+tcp", d, "small"),
        Cell("nng-raw", "REQ", "nng-1.5", "REP", "sp+tcp", d, "small"),
        Cell("nng", "REQ", "nng", "REQ", "sp+tcp", d, "small"),
        Cell("nng", "REP", "nng", "REP", "sp+tcp", d, "small"),
        Cell("nng", "REQ", "nanomsg", "REP", "sp+tcp", d, "oversize"),  # nanomsg's 1 MiB limit
        # through the gateway, both directions, library and native backends
        Cell("libzmq", "REQ", "nng", "REP", "zmq+tcp->sp+tcp", f"{g}:pyzmq->pynng", "small"),
        Cell("libzmq", "DEALER", "nanomsg", "REP", "zmq+tcp->sp+tcp", f"{g}:native->native", "small"),
        Cell("nng", "REQ", "libzmq", "REP", "sp+tcp->zmq+tcp", f"{g}:pynng->pyzmq", "small"),
        Cell("nng-1.5", "REQ", "libzmq", "ROUTER", "sp+tcp->zmq+tcp", f"{g}:native->pyzmq", "small"),
        Cell("libzmq", "REQ", "libzmq", "REP", "zmq+tcp->zmq+tcp", f"{g}:pyzmq->pyzmq", "small"),
        Cell("nng", "REQ", "nng-raw", "REP", "sp+tcp->sp+tcp", f"{g}:pynng->pynng", "small"),
    ]
    for c in cells:
        c.validate()
    return cells


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
PATTERN_SHAPES = ("topic", "prefix", "all", "multi", "stream")
PUBSUB_SHAPES = ("topic", "prefix", "all", "multi")
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
PATTERN_IMPLS = ("libzmq", "nng", "nanomsg", "nng-1.5")
#: what the CLIs speak: nanocat's --pair is nanomsg's pair (pair0); nngcat's --pair0/--pair1
CLI_PATTERN_TYPES = {"nanomsg": frozenset({"PUB", "SUB", "PUSH", "PULL", "PAIR0"}),
                     "nng-1.5": frozenset({"PUB", "SUB", "PUSH", "PULL", "PAIR0", "PAIR1"})}


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
                                             "all": (b"",), "multi": (b"a.", b"b.")}
#: one round: subscribed, not subscribed, a prefix of another (``a`` vs ``a.``), the empty one
PUBSUB_ROUND = (b"a.1", b"b.1", b"c.1", b"a", b"ab", b"a.2", b"", b"b.2", b"bb", b"a.3")
STREAM_ROUND = tuple(b"m-%02d" % i for i in range(20))


def delivery_expected(cell: Cell) -> list[bytes]:
    """What the receiving side must get from one round, exactly and in order."""
    if cell.shape in SHAPE_TOPICS:
        topics = SHAPE_TOPICS[cell.shape]
        return [m for m in PUBSUB_ROUND if any(m.startswith(t) for t in topics)]
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
        if impl in CLI_PATTERN_TYPES and kind not in CLI_PATTERN_TYPES[impl]:
            raise ValueError(f"{impl} has no {kind}")
    if cell.net not in NETS:
        raise ValueError(f"unknown transport {cell.net!r}")
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
    out = list(dict.fromkeys(cells))
    for c in out:
        c.validate()
    return out


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
    for c in cells:
        c.validate()
    return cells
