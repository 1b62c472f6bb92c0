"""Play one cell in this process and decide what was observed (see ``gateway.tools.matrix.cells``).

Sequence: the server binds (its real URL), the gateway starts if the route says so (its back
connects to the server, its front binds on :0 and reports READY), the client connects, the
responder starts answering, then the requester exchanges: an oversize cell first proves the
handshake with a small probe, then runs its rounds; the median round trip is ``rtt_us``.

Envelope checks (``envelope_ok``) compare what each side saw with what the DESIGN says must be
on the wire: ZMTP hops before the delimiter (ROUTER/DEALER responders see the peer identity and,
through the gateway, the gateway's own hops: one 4-byte frame per SP hop with the top bit set on
the last), SP headers as nng's raw REP hands them over (pipe id with the top bit clear, then the
request id with the top bit set; the request id of a cooked requester counts up by one per
request), replies byte for byte (the raw nng REQ gets back exactly the header it sent).
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

from gateway.patterns.pairing import sp_protocol, zmtp_socket_type
from gateway.tools.harness import security as sec_material
from gateway.tools.harness.gateway import Gateway, Zygote
from gateway.tools.harness.peers import (
    GATEWAY_ID,
    HEARTBEAT,
    SERVER_ID,
    Peer,
    Reply,
    Seen,
    make_peer,
)
from gateway.tools.harness.peers.cli import CliPeer
from gateway.tools.harness.procs import Unavailable, lib_url
from gateway.tools.matrix.cells import (
    CLI_IMPLS,
    DYNAMIC_SHAPES,
    HEARTBEAT_IDLE,
    IMPLS,
    JEROMQ,
    ONE_PORT,
    PUBSUB_ROUND,
    SECURITY,
    SHAPE_CHANGE,
    SHAPE_TOPICS,
    SHAPES,
    STREAM_ROUND,
    Cell,
    delivery_expected,
    executor,
    expected,
    expected_reason,
    limits_on_path,
    pattern_sender,
)
from gateway.tools.matrix.probe import wire_probe

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
    return _bind_url(cell.net, workdir, name)


class Outcome:
    def __init__(self) -> None:
        self.observed = "error"
        self.details: list[str] = []
        self.envelope_problems: list[str] = []
        self.rtts: list[float] = []
        self.bytes_seen: list[str] = []  # what each side received, for people (hex, cut)
        #: the cell's gateway once started: stopped even when the play raises after it (an
        #: unavailable client left it running, outside the cell's process group)
        self.gateway: Gateway | None = None

    def saw(self, who: str, messages: list[bytes] | tuple[bytes, ...]) -> None:
        """Record (cut short) the messages ``who`` received."""
        shown = " ".join(m[:24].hex() + ("…" if len(m) > 24 else "") for m in messages[:6])
        more = f" (+{len(messages) - 6})" if len(messages) > 6 else ""
        self.bytes_seen.append(f"{who}: {shown or '(nothing)'}{more}")

    def note(self, text: str) -> None:
        self.details.append(text)

    def bad(self, text: str) -> None:
        self.envelope_problems.append(text)


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


def _check_reply(cell: Cell, requester: Peer, rep: Reply, want: bytes, peer_id: bytes,
                 out: Outcome, what: str) -> None:
    if what in ("probe", "round 1"):
        out.saw(f"{requester.label} ({what} reply)", rep.frames or (rep.body,))
    if rep.body != want:
        out.bad(f"{what}: reply body {len(rep.body)} B != expected {len(want)} B")
        return
    kind = requester.kind
    if requester.wire == "zmq" and kind == "DEALER" and rep.frames != (b"", want):
        out.bad(f"{what}: DEALER reply frames {[f[:8] for f in rep.frames]}")
    if requester.wire == "zmq" and kind == "ROUTER" and rep.frames != (peer_id, b"", want):
        out.bad(f"{what}: ROUTER reply frames {[f[:8] for f in rep.frames]}")
    if requester.impl == "nng-raw" and (rep.header is None or len(rep.header) != 4
                                        or not rep.header[0] & 0x80):
        out.bad(f"{what}: raw REQ reply header {rep.header!r}")


def expected_hops(cell: Cell, responder: Peer) -> int | None:
    """ZMTP: frames before the delimiter a ROUTER responder sees; SP raw: header words."""
    if responder.wire == "zmq":
        if responder.kind not in ("ROUTER", "DEALER"):
            return None
        n = 1 if cell.direct else (2 if cell.client_wire == "zmq" else 3)
        return n if responder.kind == "ROUTER" else n - 1
    if responder.impl != "nng-raw":
        return None
    if cell.direct or cell.client_wire == "zmq":
        return 2  # [pipe id, request id] / [pipe id, gateway token]
    return 3  # [pipe id, gateway pipe id, request id]


def _check_responder(cell: Cell, responder: Peer, payload: bytes, probe: bytes, out: Outcome) -> None:
    if out.observed == "exchanged":  # a CLI prints the request about when it answers: let it
        deadline = time.monotonic() + 1.0
        while not responder.seen and time.monotonic() < deadline:
            time.sleep(0.01)
    allowed = {payload, probe}
    want = expected_hops(cell, responder)
    seen = list(responder.seen)
    if seen:
        out.saw(f"{responder.label} (requests)", [b"|".join((*x.frames, x.body)) if x.frames
                                                  else (x.header or b"") + x.body
                                                  for x in seen[:3]])
    rids: list[int] = []
    for i, s in enumerate(list(responder.seen)):
        if s.body not in allowed:
            out.bad(f"{responder.label} saw a body of {len(s.body)} B that was never sent")
        if responder.wire == "zmq" and want is not None:
            _check_zmtp_hops(cell, responder, s, want, out, i)
        if s.header is not None and want is not None:
            rid = _check_sp_header(responder, s.header, want, out, i)
            if rid is not None:
                rids.append(rid)
    if out.observed == "exchanged" and not responder.seen:
        out.bad(f"{responder.label} recorded no request")
    if (out.observed == "refused-handshake" and responder.seen and cell.direct):
        out.bad(f"{responder.label} received a request on a refused pairing")
    if out.observed == "refused-limit":
        lim = [s for s in responder.seen if s.body == payload]
        side = cell.responder or "server"
        refuser = f"{side} {cell.impl_of(side)} (request,"  # limits_on_path's own words
        if lim and any(x.startswith(refuser) for x in limits_on_path(cell)):
            out.bad(f"{responder.label} accepted the oversize request despite its limit")
    # a cooked SP requester counts its request ids up by one (nng, nanomsg, DESIGN section 3)
    requester_impl = cell.impl_of(cell.requester or "client")
    if (cell.direct and len(rids) > 1 and requester_impl in ("nng", "native")):
        steps = {(b - a) & 0x7FFFFFFF for a, b in zip(rids, rids[1:], strict=False)}
        if steps != {1}:
            out.bad(f"request ids do not count up by one: {[hex(r) for r in rids]}")


def _check_zmtp_hops(cell: Cell, responder: Peer, s: Seen, want: int, out: Outcome, i: int) -> None:
    frames = s.frames
    if len(frames) != want + 1 or frames[-1] != b"":
        out.bad(f"{responder.label} request {i}: {len(frames) - 1} hops + delimiter? "
                f"{[f.hex() for f in frames]} (want {want} hops then an empty delimiter)")
        return
    hops = frames[:-1]
    if responder.kind == "ROUTER" and not hops[0]:
        out.bad(f"{responder.label}: empty routing id")
    if not cell.direct and cell.client_wire == "sp":
        sp_hops = hops[-2:]
        if any(len(h) != 4 for h in sp_hops) or not sp_hops[-1][0] & 0x80 or sp_hops[0][0] & 0x80:
            out.bad(f"{responder.label}: SP hops as frames {[h.hex() for h in sp_hops]} "
                    "(want 4-byte frames, top bit set on the last only)")


def _check_sp_header(responder: Peer, header: bytes, want: int, out: Outcome, i: int) -> int | None:
    if len(header) != 4 * want:
        out.bad(f"{responder.label} request {i}: header {header.hex()} is not {want} words")
        return None
    words = [int.from_bytes(header[k:k + 4], "big") for k in range(0, len(header), 4)]
    if not words[-1] & 0x80000000 or any(w & 0x80000000 for w in words[:-1]):
        out.bad(f"{responder.label} request {i}: header {header.hex()}: top bit must be set "
                "on the request id only")
        return None
    return words[-1] & 0x7FFFFFFF


def _check_wire(wire: str, kind: str, impl: str, url: str, who: str, out: Outcome,
                sp_first: bool = False) -> None:
    """The handshake bytes a listening peer sends, decoded from a raw connection (docs/design.md, "Pairings"):
    ZMTP greeting (signature, version 3.x, NULL) and READY with its Socket-Type (and Identity for
    REQ/DEALER/ROUTER, as libzmq sends it); SP header ``00 53 50 00`` + protocol + ``00 00``."""
    try:
        w = wire_probe(url, wire, sp_first=sp_first)
    except Exception as exc:  # noqa: BLE001
        out.bad(f"wire probe of {who} at {url} failed: {exc!r}")
        return
    if not w["ok_magic"]:
        out.bad(f"{who}: bad {wire} signature {w['raw']}")
        return
    if wire == "sp":
        if w["protocol"] != sp_protocol(kind):
            out.bad(f"{who}: SP header announces protocol {w['protocol']:#x}, want {sp_protocol(kind):#x}")
        return
    if "zmtp2_type" in w:  # RFC 15: the socket-type byte instead of READY
        from gateway.wire.zmtp import ZMTP2_SOCKET_TYPES

        got = ZMTP2_SOCKET_TYPES.get(w["zmtp2_type"], hex(w["zmtp2_type"]))
        if impl != JEROMQ or got != kind:
            out.bad(f"{who}: a ZMTP 2.0 greeting with socket type {got} ({impl}, want {kind} "
                    "on ZMTP 3.x)")
        return
    props = w["properties"]
    if w["version"][0] != 3 or w["mechanism"] != "NULL" or w["command"] != "READY":
        out.bad(f"{who}: greeting {w['version']} {w['mechanism']} then {w['command']!r}")
    if props.get("socket-type") != kind.encode():
        out.bad(f"{who}: READY Socket-Type {props.get('socket-type')!r}, want {kind}")
    if impl in ("libzmq", "native") and ("identity" in props) != (kind in ("REQ", "DEALER", "ROUTER")):
        out.bad(f"{who}: READY properties {sorted(props)} (Identity only for REQ/DEALER/ROUTER)")


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
        got = [m for m in peer.drain(quiet=quiet, deadline=time.monotonic() + 3 * timeout + 2)
               if not m.endswith(b"probe")]
        want = delivery_expected(cell, topics_held)
        out.saw(f"{peer.label}{' ' + what if what else ''}", got)
        if got != want:
            out.note(f"{peer.label}{' ' + what if what else ''}: expected {want!r}, got {got!r}")
            verdict = "bad-delivery"
    return verdict
