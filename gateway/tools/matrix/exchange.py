"""A request-reply cell's exchange (:mod:`gateway.tools.matrix.runner` plays the cell): the
payloads and the replies a Python responder makes, the requester's rounds (an oversize cell
proves the handshake with a small probe first), a heartbeat cell's idle spell, and what is
observed when nobody can send or no reply comes.
"""

from __future__ import annotations

import time

from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers import GATEWAY_ID, HEARTBEAT, SERVER_ID, Peer
from gateway.tools.harness.peers.cli import CliPeer
from gateway.tools.matrix.cells import CLI_IMPLS, HEARTBEAT_IDLE, SECURITY, SHAPES, Cell
from gateway.tools.matrix.envelope import Outcome, _check_reply
from gateway.tools.matrix.outcomes import limits_on_path

REPLY_TABLE = bytes((b + 1) & 0xFF for b in range(256))
ROUNDS = {"small": 5, "empty": 5, "64k": 3, "oversize": 2, "heartbeat": 2,
          **dict.fromkeys(SECURITY, 2)}
PATTERN = bytes(range(251))


def make_payload(shape: str) -> bytes:
    n = SHAPES[shape]
    reps = n // len(PATTERN) + 1
    return (PATTERN * reps)[:n]


def reply_of(request: bytes) -> bytes:
    """What a Python responder answers: the request with every byte + 1 (same size)."""
    return request.translate(REPLY_TABLE)


def _evidence(peers: list[Peer]) -> dict[str, str | None]:
    return {p.label: p.evidence() for p in peers}


def _observe_idle(cell: Cell, timeout: float, client: Peer, server: Peer, out: Outcome) -> None:
    """Nobody can send (REP-REP, REP-ROUTER, a REP client at the gateway): the handshake
    evidence is the observation. Only the client's link counts through the gateway."""
    watched = [client, server] if cell.direct else [client]
    deadline = time.monotonic() + timeout
    ev: dict[str, str | None] = {}
    while time.monotonic() < deadline:
        ev = _evidence(watched)
        if "refused" in ev.values() or (ev and all(v in ("ok",) for v in ev.values())):
            break
        time.sleep(0.02)
    ev = _evidence(watched)
    shown = ", ".join(f"{k}: {v or 'no handshake'}" for k, v in ev.items())
    if "refused" in ev.values():
        out.observed = "refused-handshake"
        out.note(f"no sender; closed before any handshake ({shown})")
    elif "ok" in ev.values() or "lost" in ev.values():
        out.observed = "connected"
        out.note(f"no sender; a handshake completed ({shown})")
    else:
        out.observed = "refused-handshake"
        out.note(f"no sender; no handshake within {timeout}s ({shown})")
    if cell.direct:
        for p in (client, server):
            if p.seen:
                out.bad(f"{p.label} received {len(p.seen)} message(s) on a refused pairing")


def _no_exchange(cell: Cell, peers: list[Peer], out: Outcome, what: str) -> None:
    ev = _evidence(peers)
    shown = ", ".join(f"{k}: {v or '?'}" for k, v in ev.items())
    if "refused" in ev.values():
        out.observed = "refused-handshake"
    elif cell.direct and "ok" in ev.values():
        out.observed = "timeout"
    elif not cell.direct and all(v in ("ok", "lost") for v in ev.values()):
        out.observed = "timeout"
    else:
        out.observed = "refused-handshake"
    out.note(f"{what}: no reply ({shown})")


def _exchange(cell: Cell, timeout: float, requester: Peer, peers: list[Peer], payload: bytes,
              probe: bytes, needs_probe: bool, cli_reply: bytes, out: Outcome,
              gw: Gateway | None = None) -> None:
    responder_impl = cell.impl_of(cell.responder) if cell.responder else None
    peer_id = GATEWAY_ID if not cell.direct else SERVER_ID

    # stop waiting early on proof: a handshake refused, or (oversize) a pipe closed under us. A
    # CLI requester closes its connection after every request: "lost" proves nothing there.
    stop_on = ("refused",) if cell.impl_of(cell.requester or "client") in CLI_IMPLS else ("refused", "lost")

    def aborted() -> bool:
        return any(v in stop_on for v in (p.evidence() for p in peers))

    def want(request: bytes) -> bytes:
        return cli_reply if responder_impl in CLI_IMPLS else reply_of(request)

    if needs_probe:
        t = time.monotonic()
        rep = requester.request(probe, t + timeout, aborted, peer_id)
        if rep is None:
            _no_exchange(cell, peers, out, "probe")
            return
        _check_reply(cell, requester, rep, want(probe), peer_id, out, "probe")
    rounds = ROUNDS[cell.shape]
    cli_requester = cell.impl_of(cell.requester or "client") in CLI_IMPLS
    for i in range(rounds):
        if i and requester.kind == "REQ" and isinstance(requester, CliPeer) and requester.mode == "bind":
            break  # a binding CLI requester asks once
        if i and cell.shape == "heartbeat" and _lost_while_idle(peers, gw, out):
            out.observed = "timeout"
            return
        t = time.perf_counter()
        rep = requester.request(payload, time.monotonic() + timeout, aborted, peer_id)
        dt = time.perf_counter() - t
        if rep is None:
            if i == 0 and needs_probe:
                out.observed = "refused-limit"
                ev = _evidence(peers)
                out.note("probe exchanged, oversize got no reply ("
                         + ", ".join(f"{k}: {v or '?'}" for k, v in ev.items()) + ")")
                if not limits_on_path(cell):
                    out.note("nobody on this path should refuse it")
            elif i == 0:
                _no_exchange(cell, peers, out, "request")
            else:
                out.observed = "timeout"
                out.note(f"round {i + 1}/{rounds} got no reply")
            return
        _check_reply(cell, requester, rep, want(payload), peer_id, out, f"round {i + 1}")
        if not cli_requester:
            out.rtts.append(dt)
    out.observed = "exchanged"
    if cli_requester:
        out.note("CLI requester: one process per request, no round-trip time")


def _lost_while_idle(peers: list[Peer], gw: Gateway | None, out: Outcome) -> bool:
    """A heartbeat cell: stay silent for ``HEARTBEAT_IDLE`` seconds (many heartbeat timeouts);
    True (and a note) when a connection dropped meanwhile: someone's PINGs went unanswered."""
    time.sleep(HEARTBEAT_IDLE)
    lost = [p.label for p in peers if p.evidence() == "lost"]
    if gw is not None and "heartbeat-timeout" in gw.stderr:
        lost.append("the gateway closed a pipe (heartbeat-timeout)")
    if lost:
        out.note(f"connection lost while idle with heartbeats: {', '.join(lost)}")
    else:
        out.note(f"idle {HEARTBEAT_IDLE}s with heartbeats ({HEARTBEAT['ivl_ms']} ms, timeout "
                 f"{HEARTBEAT['timeout_ms']} ms): no connection dropped")
    return bool(lost)
