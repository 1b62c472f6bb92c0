"""The catalog of cells: the whole matrix (:func:`all_cells`), the selection CI runs
(:func:`ci_cells`), the small one of ``make demo`` (:func:`small_selection`), and the
``--select`` language (:func:`select`).

The first matrix (``gateway.tools.matrix.cells`` and ``.suites``: every ordered type pairing
between the engine, libzmq, nng and the CLIs, the gateway's routes and backends, security,
heartbeats, one port, JeroMQ, the patterns) is extended here by :func:`generation_cells` and
:func:`pattern_generation_cells`: each implementation of another generation or runtime
(``impls.ZMTP_NEW``/``SP_NEW``: libzmq 4.3.4 and 4.1.6, omq.rs, nng 2.0 and 1.1.1) meets the
reference implementation of its wire and the engine on every pairing and shape it has, every
other implementation of its wire on the main pairings, and the gateway on every route and
backend; and every implementation that has the patterns plays them against the reference, and
through the gateway across the families.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import fields
from itertools import product

from gateway.tools.matrix.cells import (
    BACKENDS,
    DATA_SHAPES,
    JEROMQ,
    SECURITY,
    SP_IMPLS,
    SP_NEW,
    SP_TYPES,
    WIRES,
    ZMTP_IMPLS,
    ZMTP_NEW,
    ZMTP_TYPES,
    Cell,
    validated,
)
from gateway.tools.matrix.impls import IMPLEMENTATIONS, REFERENCE
from gateway.tools.matrix.outcomes import expected
from gateway.tools.matrix.pattern_rules import DYNAMIC_SHAPES, PUBSUB_SHAPES
from gateway.tools.matrix.suites import (
    GW_DEFAULT_CLIENT,
    GW_DEFAULT_SERVER,
    JEROMQ_CI,
    ONEPORT_CI,
    SECURITY_CI,
    _direct,
    _gw,
    _observable,
    _pc,
    _shapes_for,
    gateway_cells,
    heartbeat_cells,
    jeromq_cells,
    oneport_cells,
    pattern_cells,
    pattern_ci_cells,
    security_cells,
    zws_cells,
)


def _valid(cells: list[Cell]) -> list[Cell]:
    """The cells that make sense (``Cell.validate``), each once, in order."""
    out = []
    for c in dict.fromkeys(cells):
        try:
            c.validate()
        except ValueError:
            continue
        out.append(c)
    return out


def every_pairing(wire: str, impl_pairs: Iterable[tuple[str, ...]]) -> list[Cell]:
    """Direct tcp cells between each (client, server) implementation pair: every ordered
    socket type pairing that can be observed, the legal ones where the client asks in every
    data shape (``suites._shapes_for``)."""
    types = ZMTP_TYPES if wire == "zmq" else SP_TYPES
    out: list[Cell] = []
    for ci, si in impl_pairs:
        for ct, st in product(types, repeat=2):
            base = _direct(wire, "tcp", ci, si, ct, st, "small")
            if _observable(base):
                out += [_direct(wire, "tcp", ci, si, ct, st, s) for s in _shapes_for(base)]
    return out


def generation_cells() -> list[Cell]:
    """Request-reply with the implementations of another generation or runtime: each against
    the reference of its wire and the engine (both roles, every ordered type pairing, the legal
    ones in every data shape; ipc), against every other implementation of its wire (the main
    pairings), with keys (CURVE, PLAIN, right and wrong) or over ws where it has them, with
    heartbeats where it sends them, and through the gateway as client and as server on every
    backend pair."""
    cells: list[Cell] = []
    for wire, new, others in (("zmq", ZMTP_NEW, ("libzmq", "native")),
                              ("sp", SP_NEW, ("nng", "native"))):
        for n, other in product(new, others):
            cells += every_pairing(wire, ((n, other), (other, n)))
            for ci, si in ((n, other), (other, n)):
                main = ("REQ", "REP") if wire == "sp" else ("DEALER", "ROUTER")
                cells += [_direct(wire, "ipc", ci, si, "REQ", "REP", "small"),
                          _direct(wire, "ipc", ci, si, *main, "64k")]
        everyone = (*ZMTP_IMPLS, *ZMTP_NEW, JEROMQ) if wire == "zmq" else (*SP_IMPLS, *SP_NEW)
        for ci, si in product(everyone, repeat=2):
            if ci in new or si in new:
                pairs = [("REQ", "REP"), ("REQ", "REQ")] + (
                    [("DEALER", "ROUTER"), ("DEALER", "REP")] if wire == "zmq" else [])
                cells += [_direct(wire, "tcp", ci, si, ct, st, "small") for ct, st in pairs]
        for n, other in product(new, others):  # keys, ws, heartbeats
            for ci, si in ((n, other), (other, n)):
                cells += [_direct(wire, "tcp", ci, si, "REQ", "REP", s) for s in SECURITY]
                cells.append(_direct(wire, "tcp", ci, si, "DEALER" if wire == "zmq" else "REQ",
                                     "ROUTER" if wire == "zmq" else "REP", "heartbeat"))
                cells.append(_direct(wire, "tcp", ci, si, "REQ", "REP", "heartbeat"))
    cells += _generation_gateway_cells()
    return _valid(cells)


def _generation_gateway_cells() -> list[Cell]:
    """Each newer implementation as the gateway's client and as its server, on every route
    (both wires on the far side) and backend pair; the data shapes on the default backends;
    an illegal peer at each end; CURVE/PLAIN (right and wrong) on its hop to a native front."""
    cells: list[Cell] = []
    for wire, new in (("zmq", ZMTP_NEW), ("sp", SP_NEW)):
        client_kinds = ("REQ", "DEALER") if wire == "zmq" else ("REQ",)
        server_kinds = ("REP", "ROUTER") if wire == "zmq" else ("REP",)
        for n, far in product(new, WIRES):
            ref_server, ref_client = GW_DEFAULT_SERVER[far], GW_DEFAULT_CLIENT[far]
            for fb, bb in product(BACKENDS[wire], BACKENDS[far]):  # it is the client
                cells += [_gw(wire, far, "tcp", fb, bb, n, kind, *ref_server, "small")
                          for kind in client_kinds]
            for fb, bb in product(BACKENDS[far], BACKENDS[wire]):  # it is the server
                cells += [_gw(far, wire, "tcp", fb, bb, *ref_client, n, kind, "small")
                          for kind in server_kinds]
            default = (BACKENDS[wire][0], BACKENDS[far][0])
            for shape in ("empty", "64k", "oversize"):
                cells.append(_gw(wire, far, "tcp", *default, n, "REQ", *GW_DEFAULT_SERVER[far], shape))
                cells.append(_gw(far, wire, "tcp", BACKENDS[far][0], BACKENDS[wire][0],
                                 *GW_DEFAULT_CLIENT[far], n, "REP", shape))
            cells.append(_gw(wire, far, "tcp", *default, n, "REP", *GW_DEFAULT_SERVER[far],
                             "small"))  # illegal at the front
            cells.append(_gw(far, wire, "tcp", BACKENDS[far][0], BACKENDS[wire][0],
                             *GW_DEFAULT_CLIENT[far], n, "REQ", "small"))  # illegal at the back
            cells.append(_gw(wire, far, "ipc", *default, n, "REQ", *GW_DEFAULT_SERVER[far],
                             "small"))
            if wire == "zmq":
                for shape in ("curve", "curve-badkey", "plain", "plain-badpass"):
                    cells.append(_gw(wire, far, "tcp", "native", "native", n, "REQ",
                                     *GW_DEFAULT_SERVER[far], shape))
    return cells


def _pubsub_shapes(sub: str, pub: str) -> tuple[str, ...]:
    """What a subscriber of ``sub`` and a publisher of ``pub`` can play: a CLI publisher
    repeats one message (``topic``); a CLI subscriber cannot change its subscriptions."""
    if IMPLEMENTATIONS[pub].fixed_sender:
        return ("topic",)
    dynamic = DYNAMIC_SHAPES if IMPLEMENTATIONS[sub].unsubscribe else ()
    return (*PUBSUB_SHAPES, *dynamic)


def _pattern_pairs(wire: str, client: str, server: str) -> list[tuple[str, str, str]]:
    """(client type, server type, shape) of the pattern cells between two implementations."""
    out = [("SUB", "PUB", s) for s in _pubsub_shapes(client, server)]
    out += [("PUB", "SUB", "topic")] if not IMPLEMENTATIONS[client].fixed_sender else []
    out += [("PUSH", "PULL", "stream"), ("PULL", "PUSH", "stream"), ("PUSH", "SUB", "stream")]
    if wire == "zmq":
        out += [("XSUB", "XPUB", "topic"), ("SUB", "XPUB", "multi"), ("XSUB", "PUB", "topic"),
                ("PAIR", "PAIR", "stream")]
    else:
        out += [("PAIR0", "PAIR0", "stream"), ("PAIR1", "PAIR1", "stream"),
                ("PAIR0", "PAIR1", "stream")]
    return out


def pattern_generation_cells() -> list[Cell]:
    """Every implementation that has the patterns (the engine included), against the reference
    of its wire in both roles: pub/sub with filtering, unsubscribe and a late joiner, pipeline
    and pair (pair0 and pair1 on SP), the illegal pairings once; ipc once; and through the
    gateway across the families and within them, default and native backends."""
    cells: list[Cell] = []
    for wire in WIRES:
        ref = REFERENCE[wire]
        for impl in (n for n, i in IMPLEMENTATIONS.items() if i.patterns and wire in i.wires):
            for ci, si in ((impl, ref), (ref, impl)) if impl != ref else ((ref, ref),):
                cells += [_pc(ci, ct, si, st, f"{wire}+tcp", "direct", sh)
                          for ct, st, sh in _pattern_pairs(wire, ci, si)]
                cells.append(_pc(ci, "SUB", si, "PUB", f"{wire}+ipc", "direct", "topic"))
            for far in WIRES:
                for fb, bb in ((BACKENDS[wire][0], BACKENDS[far][0]), ("native", "native")):
                    far_ref = REFERENCE[far]
                    t, route = f"{wire}+tcp->{far}+tcp", f"{fb}->{bb}"
                    pair = "PAIR" if wire == "zmq" else "PAIR0"
                    far_pair = "PAIR" if far == "zmq" else "PAIR0"
                    for sh in _pubsub_shapes(impl, far_ref):
                        cells.append(_pc(impl, "SUB", far_ref, "PUB", t, f"gateway-pubsub:{route}", sh))
                    cells += [
                        _pc(impl, "PUSH", far_ref, "PULL", t, f"gateway-pipeline:{route}", "stream"),
                        _pc(impl, pair, far_ref, far_pair, t, f"gateway-pair:{route}", "stream"),
                        _pc(impl, "PULL", far_ref, "PUB", t, f"gateway-pubsub:{route}", "topic"),
                    ]
                    rt = f"{far}+tcp->{wire}+tcp"
                    route_back = f"{BACKENDS[far][0] if fb != 'native' else 'native'}->" \
                                 f"{BACKENDS[wire][0] if bb != 'native' else 'native'}"
                    cells += [
                        _pc(far_ref, "SUB", impl, "PUB", rt, f"gateway-pubsub:{route_back}", "topic"),
                        _pc(REFERENCE[far], "PUSH", impl, "PULL", rt,
                            f"gateway-pipeline:{route_back}", "stream"),
                    ]
    # the mixed backend pairs (a library on one side, the engine on the other), each family
    for cw, sw in product(WIRES, repeat=2):
        t = f"{cw}+tcp->{sw}+tcp"
        kinds = ("PAIR" if cw == "zmq" else "PAIR0", "PAIR" if sw == "zmq" else "PAIR0")
        for fb, bb in ((BACKENDS[cw][0], "native"), ("native", BACKENDS[sw][0])):
            route = f"{fb}->{bb}"
            ref_c, ref_s = REFERENCE[cw], REFERENCE[sw]
            cells += [
                _pc(ref_c, "SUB", ref_s, "PUB", t, f"gateway-pubsub:{route}", "multi"),
                _pc(ref_c, "SUB", ref_s, "PUB", t, f"gateway-pubsub:{route}", "unsubscribe"),
                _pc(ref_c, "PUSH", ref_s, "PULL", t, f"gateway-pipeline:{route}", "stream"),
                _pc(ref_c, kinds[0], ref_s, kinds[1], t, f"gateway-pair:{route}", "stream"),
            ]
    return _valid(cells)


def all_cells() -> list[Cell]:
    """The full matrix (``gateway matrix run`` without ``--select``)."""
    # direct ZMTP, tcp: every impl pair x every ordered type pair
    cells = every_pairing("zmq", product(ZMTP_IMPLS, repeat=2))
    # direct ZMTP, ipc: the main pairings
    for ci, si in product(ZMTP_IMPLS, repeat=2):
        cells += [_direct("zmq", "ipc", ci, si, "REQ", "REP", s) for s in DATA_SHAPES]
        cells += [_direct("zmq", "ipc", ci, si, "DEALER", "ROUTER", "small"),
                  _direct("zmq", "ipc", ci, si, "REQ", "REQ", "small")]
    # direct SP, tcp: every impl pair x every ordered type pair
    cells += every_pairing("sp", product(SP_IMPLS, repeat=2))
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
                               + zws_cells()
                               + first_ci_cells() + generation_ci_cells() + small_selection()
                               + pattern_cells()
                               + generation_cells() + pattern_generation_cells()))
    return validated(cells)




def ci_cells() -> list[Cell]:
    """The CI-sized selection (:func:`first_ci_cells`), each newer implementation's main cells
    (:func:`generation_ci_cells`), then, for every value of every column (implementation,
    socket type, transport, route, shape, expected outcome) that no cell of those has, the first
    cell of the whole matrix that has it: every implementation, shape and route at least once."""
    cells = first_ci_cells() + generation_ci_cells()
    everything = all_cells()
    for key in COVERED:
        have = {v for c in cells for v in _value(c, key)}
        for c in everything:
            missing = set(_value(c, key)) - have
            if missing:
                cells.append(c)
                have |= set(_value(c, key))
    return list(dict.fromkeys(cells))


#: the columns whose every value the CI selection covers
COVERED = ("client_impl", "server_impl", "client_type", "server_type", "transport", "route",
           "shape", "expected")


def generation_ci_cells() -> list[Cell]:
    """Each implementation of another generation or runtime: both roles against the reference
    of its wire, the engine, a refused pairing, the gateway as client and as server (library and
    native backends), a pattern, keys where it has them."""
    cells: list[Cell] = []
    for wire, new in (("zmq", ZMTP_NEW), ("sp", SP_NEW)):
        ref, far = REFERENCE[wire], "sp" if wire == "zmq" else "zmq"
        lib, flib = BACKENDS[wire][0], BACKENDS[far][0]
        for n in new:
            cells += [
                _direct(wire, "tcp", n, ref, "REQ", "REP", "small"),
                _direct(wire, "tcp", ref, n, "REQ", "REP", "64k"),
                _direct(wire, "tcp", n, "native", "REQ", "REP", "small"),
                _direct(wire, "ipc", "native", n, "REQ", "REP", "small"),
                _direct(wire, "tcp", n, ref, "REQ", "REQ", "small"),  # refused
                _gw(wire, far, "tcp", lib, flib, n, "REQ", *GW_DEFAULT_SERVER[far], "small"),
                _gw(far, wire, "tcp", "native", "native", *GW_DEFAULT_CLIENT[far], n, "REP",
                    "small"),
                _pc(n, "SUB", ref, "PUB", f"{wire}+tcp", "direct", "multi"),
                _pc(ref, "PUSH", n, "PULL", f"{wire}+tcp", "direct", "stream"),
                _direct(wire, "tcp", n, "native", "REQ", "REP", "curve"),
                _direct(wire, "tcp", "native", n, "REQ", "REP", "plain-badpass"),
                _pc(n, "SUB", REFERENCE[far], "PUB", f"{wire}+tcp->{far}+tcp",
                    "gateway-pubsub:native->native", "late"),
                _pc(n, "SUB", REFERENCE[far], "PUB", f"{wire}+tcp->{far}+tcp",
                    f"gateway-pubsub:{lib}->{flib}", "unsubscribe"),
            ]
    return _valid(cells)


def first_ci_cells() -> list[Cell]:
    """The first CI-sized selection: every impl pair (direct REQ-REP on each wire), every ZMTP
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
    return validated(cells)




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
    return validated(cells)


