"""Play one cell in this process and decide what was observed (see ``gateway.tools.matrix.cells``).

Sequence: the server binds (its real URL), the gateway starts if the route says so (its back
connects to the server, its front binds on :0 and reports READY), the client connects, the
responder starts answering, then the requester exchanges: an oversize cell first proves the
handshake with a small probe, then runs its rounds; the median round trip is ``rtt_us``.

This module holds the cell's set-up and its row (:func:`run_cell_inline`, the request-reply
play and the pattern play); the exchange itself is :mod:`gateway.tools.matrix.exchange`, what
was observed and the envelope checks :mod:`gateway.tools.matrix.envelope`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

from gateway.patterns.pairing import zmtp_socket_type
from gateway.tools.harness import security as sec_material
from gateway.tools.harness.gateway import Gateway, Zygote
from gateway.tools.harness.peers import GATEWAY_ID, HEARTBEAT, Peer, make_peer
from gateway.tools.harness.peers.cli import CliPeer
from gateway.tools.harness.procs import Unavailable, lib_url
from gateway.tools.matrix.cells import (
    CLI_IMPLS,
    IMPLS,
    ONE_PORT,
    Cell,
    executor,
)
from gateway.tools.matrix.envelope import Outcome, _check_responder, _check_wire
from gateway.tools.matrix.exchange import _exchange, _observe_idle, make_payload, reply_of
from gateway.tools.matrix.outcomes import expected, expected_reason
from gateway.tools.matrix.pattern_rules import (
    DYNAMIC_SHAPES,
    PUBSUB_ROUND,
    SHAPE_CHANGE,
    SHAPE_TOPICS,
    STREAM_ROUND,
    delivery_expected,
    pattern_sender,
)

#: how the gateway's back URL names an SP server's wire (nng+, nanomsg+ are sp+ aliases)
SP_SERVER_SCHEME = {"native": "sp", "nanomsg": "nanomsg", **{n: "nng" for n in IMPLS
                                                           if n.startswith("nng")}}


#: a prepared gateway process (``gateway.tools.harness.gateway.Zygote``) for this cell, set by
#: the cell host before anything else runs; None: start ``python -m gateway`` instead
ZYGOTE: Zygote | None = None


def start_gateway(front: str, back: str, workdir: str) -> tuple[Gateway, str]:
    """``gateway bridge FRONT BACK`` (JSON logs), started; it and its front as a library URL."""
    gw = Gateway("bridge", front, back, "--log-format", "json", ready_timeout=20.0,
                 stderr_path=os.path.join(workdir, "gateway.err"), zygote=ZYGOTE).start()
    return gw, lib_url(gw.front)


def _bind_url(net: str, workdir: str, name: str) -> str:
    return "tcp://127.0.0.1:0" if net == "tcp" else f"ipc://{workdir}/{name}.sock"


def _hop_url(cell: Cell, wire: str, workdir: str, name: str) -> str:
    """Where a listener of ``wire`` binds: the SP transport of a security cell (tls+tcp, ws,
    wss), else the cell's net."""
    sec = cell.security
    if sec is not None and sec.sp and wire == "sp":
        return sec_material.sp_url(sec.sp)
    if sec is not None and sec.zws and wire == "zmq" and (cell.direct or name == "front"):
        return sec_material.sp_url(sec.zws)  # ZWS: the client's hop (the server's stays tcp)
    return _bind_url(cell.net, workdir, name)


def run_cell_inline(cell: Cell, timeout: float,
                    on_played: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run one cell here. ``on_played`` gets the row as it stands once the exchange is over,
    before the peers close: a forked cell hands it on, so that a peer library that dies while
    it closes (nng's wss dialer: ``panic: pthread_mutex_lock``) cannot take the result along."""
    t0 = time.monotonic()
    out = Outcome()
    workdir = tempfile.mkdtemp(prefix="gwm-", dir="/tmp")
    peers: list[Any] = []
    gw: Gateway | None = None
    try:
        play = _play if cell.family == "reqrep" else _play_pattern
        gw = play(cell, timeout, workdir, peers, out)
        if on_played is not None:
            on_played(_row(cell, out, t0))
    except Unavailable as exc:  # an implementation missing on this machine: skipped, with why
        out.observed = "skipped"
        out.note(f"skipped: {exc}")
    except Exception as exc:  # noqa: BLE001 - one broken cell must not stop the matrix
        out.observed = "error"
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        out.note(f"{type(exc).__name__}: {exc} | {''.join(tb[-3:]).strip()[-600:]}")
    finally:
        for p in reversed(peers):
            with contextlib.suppress(Exception):
                p.close()
        gw = gw or out.gateway
        if gw is not None:
            rc = gw.stop()
            if rc not in (0, None, -9, -15):
                out.note(f"gateway exited {rc}: {gw.stderr_tail(3)}")
        shutil.rmtree(workdir, ignore_errors=True)
    return _row(cell, out, t0)


def _row(cell: Cell, out: Outcome, t0: float) -> dict[str, Any]:
    exp = expected(cell)
    if out.observed not in (exp, "skipped") and not any(d.startswith("expected ")
                                                         for d in out.details):
        out.note(f"expected {exp} ({expected_reason(cell)})")
    row: dict[str, Any] = dict(cell.as_dict())
    row.update(
        expected=exp,
        observed=out.observed,
        envelope_ok=(out.observed not in ("error", "skipped") and not out.envelope_problems),
        rtt_us=(round(statistics.median(out.rtts) * 1e6, 1) if out.rtts else None),
        detail="; ".join(out.details + out.envelope_problems)[:2000],
        cell_id=cell.cell_id,
        wire=cell.wire,
        duration_s=round(time.monotonic() - t0, 3),
        bytes_seen="; ".join(out.bytes_seen)[:2000],
        executor=executor(),
    )
    return row


def _play(cell: Cell, timeout: float, workdir: str, peers: list[Any], out: Outcome) -> Gateway | None:
    payload = make_payload(cell.shape)
    probe = make_payload("small")
    needs_probe = cell.shape == "oversize"
    req_side, resp_side = cell.requester, cell.responder
    # what a CLI responder answers (a fixed file); a CLI requester's request
    cli_reply = reply_of(probe if needs_probe else payload)

    hb = cell.shape == "heartbeat"
    sec = cell.security
    server = make_peer(cell.server_impl, cell.server_type, cell.server_wire, "server", workdir,
                       heartbeat=hb, sec=sec)
    peers.append(server)
    if isinstance(server, CliPeer):
        server.configure(reply=cli_reply, request=payload if req_side == "server" else None)
    server_url = server.bind(_hop_url(cell, cell.server_wire, workdir, "server"))

    gw: Gateway | None = None
    connect_url = server_url
    if not cell.direct:
        fb, bb = cell.backends
        scheme = cell.server_wire if cell.server_wire == "zmq" else SP_SERVER_SCHEME[cell.server_impl]
        if fb == ONE_PORT:  # one port for both wires: the native engine on any+<net>://
            front = f"@any+{_bind_url(cell.net, workdir, 'front')}?backend=native"
        else:
            front = (f"@{cell.client_wire}+{_hop_url(cell, cell.client_wire, workdir, 'front')}"
                     f"?backend={fb}")
        back = f">{scheme}+{server_url}?backend={bb}"
        if sec is not None:  # the front serves the client's hop, the back is the server's client
            front += sec_material.query(sec_material.settings(sec.zmtp, sec.sp,
                                                              cell.client_wire, "server"))
            back += sec_material.query(sec_material.settings(sec.zmtp, sec.sp,
                                                             cell.server_wire, "client"))
        if hb:  # the gateway's ZeroMQ sides send heartbeats too
            beat = (f"&heartbeat_ivl={HEARTBEAT['ivl_ms']}"
                    f"&heartbeat_timeout={HEARTBEAT['timeout_ms']}")
            front += beat if cell.client_wire == "zmq" else ""
            back += beat if cell.server_wire == "zmq" else ""
        gw, connect_url = start_gateway(front, back, workdir)
        out.gateway = gw
        out.note(f"gateway {fb}->{bb} READY front={gw.front}")

    crid = GATEWAY_ID if (not cell.direct and cell.client_type == "ROUTER") else None
    client = make_peer(cell.client_impl, cell.client_type, cell.client_wire, "client", workdir,
                       connect_routing_id=crid, heartbeat=hb, sec=sec)
    peers.append(client)
    if isinstance(client, CliPeer):
        client.configure(reply=cli_reply, request=payload if req_side == "client" else None)
    client.connect(connect_url)
    by_side = {"client": client, "server": server}

    if resp_side is not None:
        by_side[resp_side].serve(reply_of)
    else:
        for p in peers:
            p.idle()

    if req_side is None:
        _observe_idle(cell, timeout, client, server, out)
    else:
        _exchange(cell, timeout, by_side[req_side], peers, payload, probe, needs_probe,
                  cli_reply, out, gw)
    if resp_side is not None:
        _check_responder(cell, by_side[resp_side], payload, probe, out)
    if sec is not None:  # the probes speak plain ZMTP and SP over TCP: nothing to compare
        if sec.bad and out.observed == "refused-handshake":
            out.observed = "refused-auth"  # nothing crossed, no handshake: the keys were refused
    elif not (isinstance(server, CliPeer) and server.kind == "REQ"):  # a CLI REQ server may be gone
        _check_wire(cell.server_wire, cell.server_type, cell.server_impl, server_url,
                    f"server {cell.server_impl}", out)
    if gw is not None and sec is None:
        front_type = zmtp_socket_type("REP", raw=True) if cell.client_wire == "zmq" else "REP"
        _check_wire(cell.client_wire, front_type, "gateway", connect_url, "gateway front", out,
                    sp_first=cell.backends[0] == ONE_PORT)
    for p in peers:
        for problem in p.problems:
            out.bad(problem)
        for n in p.notes[:3]:
            out.note(n)
    if gw is not None and not gw.alive():
        out.bad(f"gateway died: {gw.stderr_tail(3)}")
    return gw


# -- pub/sub, pipeline, pair ------------------------------------------------------------------
CLI_DATA = {"pubsub": b"a.cli", "pipeline": b"cli-data", "pair": b"cli-data"}


def _play_pattern(cell: Cell, timeout: float, workdir: str, peers: list[Any],
                  out: Outcome) -> Gateway | None:
    """A pattern cell: connect, probe until something crosses (bounded), then one exact round
    (``delivery_expected``), both ways for pair. A CLI sender repeats one message: its receiver
    must get copies of it and nothing else."""
    family = cell.family
    sender = pattern_sender(cell)
    receiver = "client" if sender == "server" else "server"
    topics = SHAPE_TOPICS.get(cell.shape, ())

    def peer(side: str) -> Any:
        kind = cell.type_of(side)
        wire = cell.client_wire if side == "client" else cell.server_wire
        return make_peer(cell.impl_of(side), kind, wire, side, workdir,
                         topics=topics if kind in ("SUB", "XSUB") else (),
                         data=CLI_DATA[family])

    server = peer("server")
    peers.append(server)
    server_url = server.bind(_bind_url(cell.net, workdir, "server"))
    gw: Gateway | None = None
    connect_url = server_url
    if not cell.direct:
        fb, bb = cell.backends
        scheme = cell.server_wire if cell.server_wire == "zmq" else SP_SERVER_SCHEME[cell.server_impl]
        pattern = cell.gateway_pattern  # pair1 is said on the SP side
        on_back = pattern == "pair1" and cell.client_wire == "zmq"
        front = (f"@{cell.client_wire}+{_bind_url(cell.net, workdir, 'front')}?backend={fb}"
                 + ("" if on_back else f"&pattern={pattern}"))
        back = f">{scheme}+{server_url}?backend={bb}" + (f"&pattern={pattern}" if on_back else "")
        gw, connect_url = start_gateway(front, back, workdir)
        out.gateway = gw
        out.note(f"gateway {cell.gateway_pattern} {fb}->{bb} READY front={gw.front}")
    client = peer("client")
    peers.append(client)
    client.connect(connect_url)
    by_side = {"client": client, "server": server}
    if cell.shape in DYNAMIC_SHAPES:
        out.observed = _dynamic(cell, server, client, connect_url, workdir, peers, timeout, out)
        if gw is not None and not gw.alive():
            out.bad(f"gateway died: {gw.stderr_tail(3)}")
        return gw
    directions = [(sender, receiver)]
    if cell.client_type.startswith("PAIR") and cell.server_type.startswith("PAIR"):
        directions.append((receiver, sender))  # pair: the other way too
    results = []
    for src, dst in directions:
        results.append(_deliver(cell, by_side[src], by_side[dst], timeout, out))
    if all(r == "refused-handshake" for r in results):
        out.observed = "refused-handshake"
    elif all(r == "exchanged" for r in results):
        out.observed = "exchanged"
    else:
        out.observed = "bad-delivery" if "bad-delivery" in results else "refused-handshake"
    if gw is not None and not gw.alive():
        out.bad(f"gateway died: {gw.stderr_tail(3)}")
    return gw


def _dynamic(cell: Cell, publisher: Peer, sub: Peer, url: str, workdir: str,
             peers: list[Any], timeout: float, out: Outcome) -> str:
    """``unsubscribe``: a round, the subscriber drops a topic, a round without it. ``late``: a
    round, a second subscriber of the client's implementation joins holding another topic, a
    round that reaches both. Each round exact (``delivery_expected``)."""
    first = _deliver(cell, publisher, sub, timeout, out)
    if first != "exchanged":
        return first
    change = SHAPE_CHANGE[cell.shape]
    held = SHAPE_TOPICS[cell.shape]
    if cell.shape == "unsubscribe":
        sub.unsubscribe(change)
        time.sleep(0.5)  # the cancel travels to the publisher (and through the gateway)
        held = tuple(t for t in held if t != change)
        return _deliver(cell, publisher, sub, timeout, out, topics=held, what="after unsubscribe")
    late = make_peer(cell.client_impl, cell.client_type, cell.client_wire, "client", workdir,
                     topics=(change,))
    peers.append(late)
    late.connect(url)
    got = _deliver(cell, publisher, late, timeout, out, topics=(change,), what="late joiner",
                   also=[(sub, held)])
    return got


def _deliver(cell: Cell, src: Any, dst: Any, timeout: float, out: Outcome,
             topics: tuple[bytes, ...] | None = None, what: str = "",
             also: list[tuple[Any, tuple[bytes, ...]]] = ()) -> str:  # type: ignore[assignment]
    """One direction: ``exchanged``, ``refused-handshake`` (nothing crossed) or ``bad-delivery``."""
    quiet = 0.3
    if src.impl in CLI_IMPLS:  # repeats its one message: two copies tell
        got: list[bytes] = []
        deadline = time.monotonic() + 3 * timeout + 3
        while len(got) < 2 and time.monotonic() < deadline:
            got += dst.drain(quiet=max(1.5, timeout), deadline=min(deadline, time.monotonic() + 0.5))
        if not got:
            return "refused-handshake"
        data = CLI_DATA[cell.family]
        wanted = bool(not SHAPE_TOPICS.get(cell.shape)
                      or any(data.startswith(t) for t in SHAPE_TOPICS[cell.shape]))
        if wanted and len(got) >= 2 and set(got) == {data}:
            out.note(f"{dst.label}: {len(got)} copies of the CLI's message")
            return "exchanged"
        out.note(f"{dst.label}: got {got[:5]!r}")
        return "bad-delivery"
    held = SHAPE_TOPICS.get(cell.shape) if topics is None else topics
    probe = (held[0] if held else b"") + b"probe"
    t0 = time.monotonic()
    deadline = t0 + 3 * timeout + 2  # a subscription takes a moment to reach the publisher
    crossed = False
    refused = False
    while time.monotonic() < deadline and not crossed and not refused:
        src.send(probe)
        crossed = any(m == probe for m in dst.drain(quiet=0.1, deadline=time.monotonic() + 0.5))
        # a handshake refused on a direct link is proof enough (a gateway's side may retry)
        refused = cell.direct and "refused" in (src.evidence(), dst.evidence())
    if not crossed:
        out.note(f"{dst.label}: nothing crossed{' ' + what if what else ''}")
        return "refused-handshake"
    out.rtts.append(time.monotonic() - t0)
    receivers = [(dst, held), *also]
    for peer, _ in receivers:
        peer.drain(quiet=quiet, deadline=time.monotonic() + 2)  # probes still on the way
    msgs = PUBSUB_ROUND if held is not None else STREAM_ROUND
    for m in msgs:
        src.send(m)
    verdict = "exchanged"
    for peer, topics_held in receivers:
        want = delivery_expected(cell, topics_held)
        # until every wanted message came or the deadline passed (a quiet gap alone is no end:
        # on a loaded machine the first message may take longer than ``quiet`` to cross), then
        # one more quiet spell for what should not have come
        end = time.monotonic() + 3 * timeout + 2
        got = []
        while len(got) < len(want) and time.monotonic() < end:
            got += [m for m in peer.drain(quiet=quiet, deadline=end) if not m.endswith(b"probe")]
        got += [m for m in peer.drain(quiet=quiet, deadline=time.monotonic() + quiet + 0.5)
                if not m.endswith(b"probe")]
        out.saw(f"{peer.label}{' ' + what if what else ''}", got)
        if got != want:
            out.note(f"{peer.label}{' ' + what if what else ''}: expected {want!r}, got {got!r}")
            verdict = "bad-delivery"
    return verdict
