"""What a matrix cell must end as (``gateway.tools.matrix.cells``, "Expected outcome"): the
expected outcome and its reason, derived from the pairing tables, the credentials and the size
limits on the path; the known issues the matrix found (cells that end otherwise, and why); and
the result row of a cell that could not run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.patterns.pairing import sp_legal, sp_protocol, zmtp_legal, zmtp_socket_type
from gateway.tools.matrix.cells import (
    CLI_IMPLS,
    GATEWAY_LIMIT,
    RECV_LIMITS,
    SHAPES,
    Cell,
    executor,
)
from gateway.tools.matrix.impls import IMPLEMENTATIONS
from gateway.tools.matrix.pattern_rules import pattern_hops_legal


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


def error_row(cell: Cell, detail: str, duration: float = 0.0) -> dict[str, Any]:
    row: dict[str, Any] = dict(cell.as_dict())
    row.update(expected=expected(cell), observed="error", envelope_ok=False, rtt_us=None,
               detail=detail[:2000], cell_id=cell.cell_id, wire=cell.wire,
               duration_s=round(duration, 3), bytes_seen="", executor=executor())
    return row
