"""The first matrix's cell families beyond the direct pairings (``gateway.tools.matrix.catalog``
puts them together): the gateway's routes, heartbeats, security, one port, JeroMQ and the
patterns, each with the share CI runs (``SECURITY_CI``, ``ONEPORT_CI``, ``JEROMQ_CI``,
:func:`pattern_ci_cells`); and the cell makers the catalog uses for its own families.
"""

from __future__ import annotations

from itertools import product

from gateway.tools.harness.peers import RECEIVERS, SENDERS
from gateway.tools.matrix.cells import (
    BACKENDS,
    DATA_SHAPES,
    EVIDENCE_IMPLS,
    JEROMQ,
    ONE_PORT,
    SECURE_IMPLS,
    SECURITY,
    WIRES,
    ZMTP_IMPLS,
    ZMTP_TYPES,
    Cell,
    cells_from_ids,
    validated,
)
from gateway.tools.matrix.outcomes import hops_legal
from gateway.tools.matrix.pattern_rules import (
    FAMILY_OF,
    PATTERN_TYPES,
    PUBSUB_SHAPES,
    pattern_legal,
)


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
                  and (not sec.bad or cw == ("zmq" if sec.zmtp else "sp"))
                  and not sec.zws]  # (ZWS: zws_cells)
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


def zws_cells() -> list[Cell]:
    """ZeroMQ over WebSocket (ZWS 2.0, ``zws``): the native engine against jszmq both ways and
    against itself (a pairing it refuses included: NULL exchanges the socket type), and jszmq
    through the gateway's ``zmq+ws`` front to libzmq and nng servers. jszmq speaks the
    mechanism-less ``ZWS2.0``, where no socket type is exchanged: its illegal pairings are not
    observable, so only legal ones are played."""
    legal = (("REQ", "REP"), ("DEALER", "ROUTER"), ("REQ", "ROUTER"), ("DEALER", "REP"))
    cells = [_direct("zmq", "tcp", ci, si, ct, st, "zws")
             for ci, si in (("jszmq", "native"), ("native", "jszmq"), ("native", "native"))
             for ct, st in legal]
    cells += [_direct("zmq", "tcp", "native", "native", "REQ", "REQ", "zws")]
    for ct in ("REQ", "DEALER"):
        cells += [_gw("zmq", "zmq", "tcp", "native", bb, "jszmq", ct, "libzmq", "REP", "zws")
                  for bb in BACKENDS["zmq"]]
        cells += [_gw("zmq", "sp", "tcp", "native", bb, "jszmq", ct, "nng", "REP", "zws")
                  for bb in BACKENDS["sp"]]
    return validated(cells)


#: the JeroMQ cells CI runs (a JVM per peer: a handful, each a different path)
JEROMQ_CI = cells_from_ids("""
jeromq-0.3:REQ>native:REP@zmq+tcp/direct/small
native:DEALER>jeromq-0.3:ROUTER@zmq+tcp/direct/small
jeromq-0.3:REP>native:REP@zmq+tcp/direct/small
jeromq-0.3:DEALER>nng:REP@zmq+tcp->sp+tcp/gateway:native->native/small
nng:REQ>jeromq-0.3:ROUTER@sp+tcp->zmq+tcp/gateway:native->native/small
""")


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
