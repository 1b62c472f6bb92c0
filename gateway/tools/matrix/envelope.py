"""What a played cell observed (:class:`Outcome`) and the envelope checks
(``envelope_ok``) of :mod:`gateway.tools.matrix.runner`.

Envelope checks compare what each side saw with what the DESIGN says must be on the wire: ZMTP
hops before the delimiter (ROUTER/DEALER responders see the peer identity and, through the
gateway, the gateway's own hops: one 4-byte frame per SP hop with the top bit set on the last),
SP headers as nng's raw REP hands them over (pipe id with the top bit clear, then the request
id with the top bit set; the request id of a cooked requester counts up by one per request),
replies byte for byte (the raw nng REQ gets back exactly the header it sent).
"""

from __future__ import annotations

import time

from gateway.patterns.pairing import sp_protocol
from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers import Peer, Reply, Seen
from gateway.tools.matrix.cells import JEROMQ, Cell
from gateway.tools.matrix.outcomes import limits_on_path
from gateway.tools.matrix.probe import wire_probe


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
