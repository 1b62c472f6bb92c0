"""The sans-IO socket patterns: the seed walk-through row by row on SP, libzmq's envelopes on
ZMTP, the hop limit, the REQ/REP state machines and the pairing tables.

Pattern objects are driven directly (``make_pattern`` then ``receive`` / ``deliver`` /
``prepare_send`` / ``envelope``) with literal bytes: no engine, no I/O.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.errors import Drop, LocalProtocolError, RemoteProtocolError, StateError
from gateway.message import DELIMITER, Message
from gateway.patterns import (
    SOCKET_TYPES,
    SP,
    SP_PEERS,
    ZMTP,
    ZMTP_PEERS,
    make_pattern,
    sp_legal,
    split_sp,
    split_zmtp,
    zmtp_legal,
)
from gateway.patterns.pairing import SP_REP0, SP_REQ0, sp_protocol, zmtp_socket_type

EID1 = b"\x00\x00\x00\x11"  # the device REP's pipe id for the client (top bit clear)
EID2 = b"\x00\x00\x00\x22"  # the server REP's pipe id for the device
DEV_PIPE = b"\x00\x00\x00\x33"  # the device REQ's pipe id for the server (unused by raw REQ)
CLIENT_PIPE = b"\x00\x00\x00\x44"  # the client REQ's pipe to the device
RID = b"\x80\x00\x00\x07"  # the request id the client REQ mints (top bit set)


def sp_wire(msg: Message) -> bytes:
    """What the SP wire carries for a message: the hop words then the one body frame."""
    assert len(msg.body) == 1
    return b"".join(msg.hops) + msg.body[0]


# -- the seed walk-through (shared/seeds/000 and 001), on SP -------------------------------------


def test_seed_walkthrough_row_by_row() -> None:
    req = make_pattern("REQ")
    req._next_id = 6  # white box: make the minted request id the literal RID (0x80000007)
    d_rep = make_pattern("REP", raw=True)
    d_req = make_pattern("REQ", raw=True)
    rep = make_pattern("REP")

    # User -> ([][req-body])
    app_request = Message((), (b"req-body",))

    # REQ::send, pending=rid -> ([rid][req-body])
    target, rest = req.prepare_send(app_request)
    assert target is None  # REQ load-balances
    on_pipe = req.envelope(rest, SP)
    assert on_pipe == Message((RID,), (b"req-body",))
    assert req.pending == RID
    req.sent(CLIENT_PIPE)

    # NETWORK -> ([][rid;req-body])
    wire1 = sp_wire(on_pipe)
    assert wire1 == b"\x80\x00\x00\x07req-body"

    # D-REP::recv appends eid1 -> ([eid1][rid;req-body]); moves the head -> ([eid1;rid][req-body])
    assert split_sp(wire1, 8) == ((RID,), b"req-body")  # the 4 bytes moved to the header
    received = d_rep.receive(EID1, SP, (wire1,))
    assert received == Message((EID1, RID), (b"req-body",))
    # D-REP does NOT store the header as a backtrace: it is raw
    delivered = d_rep.deliver(received)
    assert delivered == Message((EID1, RID), (b"req-body",))
    assert not hasattr(d_rep, "backtrace")

    # DEVICE forwards untouched; D-REQ::send generates nothing, stores nothing
    target, rest = d_req.prepare_send(delivered)
    assert target is None
    on_pipe = d_req.envelope(rest, SP)
    assert on_pipe == Message((EID1, RID), (b"req-body",))
    assert not hasattr(d_req, "pending")

    # NETWORK -> ([][eid1;rid;req-body])
    wire2 = sp_wire(on_pipe)
    assert wire2 == EID1 + RID + b"req-body"

    # REP::recv appends eid2, moves the backtrace -> ([eid2;eid1;rid][req-body])
    received = rep.receive(EID2, SP, (wire2,))
    assert received == Message((EID2, EID1, RID), (b"req-body",))
    # REP moves the header into its state (bt=eid2;eid1;rid) -> ([][req-body])
    app = rep.deliver(received)
    assert app == Message((), (b"req-body",))
    assert rep.backtrace == (EID2, EID1, RID)

    # User -> ([][rep-body]); REP::send restores the backtrace -> ([eid2;eid1;rid][rep-body]),
    # removes 4 bytes to find the pipe -> ([eid1;rid][rep-body])
    target, rest = rep.prepare_send(Message((), (b"rep-body",)))
    assert target == EID2
    assert rest == Message((EID1, RID), (b"rep-body",))
    assert rep.backtrace is None
    on_pipe = rep.envelope(rest, SP)

    # NETWORK -> ([][eid1;rid;rep-body])
    wire3 = sp_wire(on_pipe)
    assert wire3 == EID1 + RID + b"rep-body"

    # D-REQ::recv moves the head to the header; does not check a pending rid (raw).
    # The seed (nanomsg) moves 4 bytes only -> ([eid1][rid;rep-body]); we move words up to the
    # top-bit one, as nng does -> ([eid1;rid][rep-body]). Same wire bytes either way:
    received = d_req.receive(DEV_PIPE, SP, (wire3,))
    assert received == Message((EID1, RID), (b"rep-body",))
    nanomsg_view = Message((EID1,), (RID + b"rep-body",))
    assert sp_wire(received) == sp_wire(nanomsg_view) == wire3
    delivered = d_req.deliver(received)
    assert delivered == received

    # DEVICE forwards untouched; D-REP::send keeps no backtrace, removes 4 bytes to find the
    # endpoint -> ([][rid;rep-body])
    target, rest = d_rep.prepare_send(delivered)
    assert target == EID1
    assert rest == Message((RID,), (b"rep-body",))
    on_pipe = d_rep.envelope(rest, SP)

    # NETWORK -> ([][rid;rep-body])
    wire4 = sp_wire(on_pipe)
    assert wire4 == b"\x80\x00\x00\x07rep-body"

    # REQ::recv moves 4 bytes to the header -> ([rid][rep-body]), checks the pending rid
    req.check_recv()
    received = req.receive(CLIENT_PIPE, SP, (wire4,))
    assert received == Message((RID,), (b"rep-body",))
    assert req.deliver(received) == Message((), (b"rep-body",))
    assert req.pending is None  # the request is answered


def test_seed_device_also_accepts_the_nanomsg_header_split() -> None:
    """A raw REP given ([eid1][rid;rep-body]) (nanomsg's D-REQ view) routes identically."""
    d_rep = make_pattern("REP", raw=True)
    for msg in (Message((EID1, RID), (b"rep-body",)), Message((EID1,), (RID + b"rep-body",))):
        target, rest = d_rep.prepare_send(msg)
        assert target == EID1
        assert sp_wire(d_rep.envelope(rest, SP)) == RID + b"rep-body"


def test_req_request_ids_random_start_increment_top_bit() -> None:
    req = make_pattern("REQ")
    rids = []
    for i in range(5):
        _, rest = req.prepare_send(Message.of(b"q%d" % i))
        msg = req.envelope(rest, SP)
        rid = msg.hops[0]
        assert len(rid) == 4 and rid[0] & 0x80
        rids.append(int.from_bytes(rid, "big") & 0x7FFFFFFF)
        req.sent(CLIENT_PIPE)
        assert req.deliver(req.receive(CLIENT_PIPE, SP, (rid + b"a",))) == Message.of(b"a")
    assert [b - a for a, b in zip(rids, rids[1:], strict=False)] == [1, 1, 1, 1]
    # random start: fresh sockets do not all start at the same id (a clash of all three
    # has a chance of 1 in 2**62)
    firsts = set()
    for _ in range(3):
        fresh = make_pattern("REQ")
        fresh.prepare_send(Message.of(b"x"))
        firsts.add(fresh.pending)
    assert len(firsts) > 1


def test_req_sp_drops_a_reply_with_another_rid() -> None:
    req = make_pattern("REQ")
    req.prepare_send(Message.of(b"q"))
    rid = req.pending
    assert rid is not None
    other = (int.from_bytes(rid, "big") ^ 1).to_bytes(4, "big")
    with pytest.raises(Drop) as info:
        req.receive(CLIENT_PIPE, SP, (other + b"late",))
    assert info.value.reason == "stale-reply"
    assert req.pending == rid  # still waiting
    assert req.deliver(req.receive(CLIENT_PIPE, SP, (rid + b"ok",))) == Message.of(b"ok")


def test_req_sp_short_reply_is_a_protocol_error() -> None:
    req = make_pattern("REQ")
    req.prepare_send(Message.of(b"q"))
    with pytest.raises(RemoteProtocolError):
        req.receive(CLIENT_PIPE, SP, (b"\x80\x00",))


# -- libzmq envelopes on ZMTP -------------------------------------------------------------------

ZID = b"\x00\x12\x34\x56\x78"  # a libzmq-style generated routing id (00 + uint32)


@pytest.mark.parametrize(
    ("body", "wire_frames"),
    [
        ((b"hello",), (b"", b"hello")),
        ((b"a", b"b"), (b"", b"a", b"b")),
        ((b"",), (b"", b"")),
    ],
)
def test_zmtp_req_sends_a_delimiter(body: tuple[bytes, ...], wire_frames: tuple[bytes, ...]) -> None:
    req = make_pattern("REQ")
    target, rest = req.prepare_send(Message((), body))
    assert target is None
    assert req.envelope(rest, ZMTP).frames == wire_frames


@pytest.mark.parametrize(
    ("parts", "delivered"),
    [
        ((b"", b"world"), (b"world",)),
        ((b"", b"a", b"b"), (b"a", b"b")),
    ],
)
def test_zmtp_req_reply(parts: tuple[bytes, ...], delivered: tuple[bytes, ...]) -> None:
    req = make_pattern("REQ")
    req.prepare_send(Message.of(b"hello"))
    req.sent(ZID)
    msg = req.receive(ZID, ZMTP, parts)
    assert msg.hops == (DELIMITER,)
    assert req.deliver(msg) == Message((), delivered)
    assert req.pending is None


@pytest.mark.parametrize(
    ("pipe", "parts", "reason"),
    [
        (b"\x00other", (b"", b"x"), "wrong-pipe"),  # libzmq REQ reads replies from its pipe only
        (ZID, (b"x",), "no-delimiter"),
        (ZID, (b"",), "no-delimiter"),
        (ZID, (b"id", b"", b"x"), "no-delimiter"),
    ],
)
def test_zmtp_req_drops_bad_replies(pipe: bytes, parts: tuple[bytes, ...], reason: str) -> None:
    req = make_pattern("REQ")
    req.prepare_send(Message.of(b"hello"))
    req.sent(ZID)
    with pytest.raises(Drop) as info:
        req.receive(pipe, ZMTP, parts)
    assert info.value.reason == reason


def test_zmtp_req_drops_a_reply_with_nothing_pending() -> None:
    with pytest.raises(Drop) as info:
        make_pattern("REQ").receive(ZID, ZMTP, (b"", b"x"))
    assert info.value.reason == "unexpected-reply"


@pytest.mark.parametrize(
    ("parts", "backtrace", "body", "reply_frames"),
    [
        # from a REQ: generated routing id + delimiter
        ((b"", b"req"), (ZID, b""), (b"req",), (b"", b"rep")),
        # from a DEALER sending app envelope frames before its delimiter
        ((b"env1", b"env2", b"", b"req"), (ZID, b"env1", b"env2", b""), (b"req",),
         (b"env1", b"env2", b"", b"rep")),
        # through a ROUTER/DEALER broker: the broker's ROUTER pushed the client identity
        ((b"client-7", b"", b"req"), (ZID, b"client-7", b""), (b"req",),
         (b"client-7", b"", b"rep")),
        # multi-frame body
        ((b"", b"a", b"b"), (ZID, b""), (b"a", b"b"), (b"", b"rep")),
    ],
)
def test_zmtp_rep_backtrace(parts: tuple[bytes, ...], backtrace: tuple[bytes, ...],
                            body: tuple[bytes, ...], reply_frames: tuple[bytes, ...]) -> None:
    rep = make_pattern("REP")
    msg = rep.receive(ZID, ZMTP, parts)
    assert msg == Message(backtrace, body)
    assert rep.deliver(msg) == Message((), body)
    assert rep.backtrace == backtrace
    target, rest = rep.prepare_send(Message.of(b"rep"))
    assert target == ZID
    assert rep.envelope(rest, ZMTP).frames == reply_frames


@pytest.mark.parametrize("parts", [(b"req",), (b"id", b"req"), (b"",), (b"id", b"")])
def test_zmtp_rep_drops_without_delimiter_or_body(parts: tuple[bytes, ...]) -> None:
    with pytest.raises(Drop) as info:
        make_pattern("REP").receive(ZID, ZMTP, parts)
    assert info.value.reason == "no-delimiter"


@pytest.mark.parametrize("raw", [False, True], ids=["ROUTER", "xrep"])
@pytest.mark.parametrize(
    ("routing_id", "parts", "hops", "body"),
    [
        (ZID, (b"", b"req"), (ZID, b""), (b"req",)),  # from a REQ
        (b"peer-chosen", (b"x",), (b"peer-chosen",), (b"x",)),  # from a DEALER with Identity
        (ZID, (b"e1", b"", b"x", b"y"), (ZID, b"e1", b""), (b"x", b"y")),
    ],
)
def test_zmtp_router_prepends_identity(raw: bool, routing_id: bytes, parts: tuple[bytes, ...],
                                       hops: tuple[bytes, ...], body: tuple[bytes, ...]) -> None:
    router = make_pattern("ROUTER") if not raw else make_pattern("REP", raw=True)
    msg = router.receive(routing_id, ZMTP, parts)
    assert msg == Message(hops, body)
    assert msg.frames == (routing_id, *parts)
    assert router.deliver(msg) is msg  # nothing stored
    target, rest = router.prepare_send(msg)
    assert target == routing_id
    assert router.envelope(rest, ZMTP).frames == parts


def test_router_send_without_hops_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        make_pattern("ROUTER").prepare_send(Message.of(b"x"))


@pytest.mark.parametrize("kind,raw", [("DEALER", False), ("REQ", True)], ids=["DEALER", "xreq"])
@pytest.mark.parametrize(
    ("parts", "hops", "body"),
    [
        ((b"a",), (), (b"a",)),  # no delimiter: lossless, all body
        ((b"a", b"b"), (), (b"a", b"b")),
        ((b"", b"a"), (b"",), (b"a",)),
        ((b"e", b"", b"a"), (b"e", b""), (b"a",)),
        ((b"a", b"", b""), (b"a", b""), (b"",)),  # first empty frame splits
    ],
)
def test_zmtp_dealer_lossless(kind: str, raw: bool, parts: tuple[bytes, ...],
                              hops: tuple[bytes, ...], body: tuple[bytes, ...]) -> None:
    dealer = make_pattern(kind, raw=raw)
    msg = dealer.receive(ZID, ZMTP, parts)
    assert msg == Message(hops, body)
    assert msg.frames == parts
    assert msg.has_delimiter == bool(hops)
    assert dealer.deliver(msg) is msg
    target, rest = dealer.prepare_send(msg)
    assert target is None  # load-balanced
    assert dealer.envelope(rest, ZMTP).frames == parts


# -- the hop limit (TTL) and bad backtraces on SP ----------------------------------------------

HOP = b"\x00\x00\x00\x01"


def backtrace(words: int) -> bytes:
    """``words`` 4-byte words: ``words - 1`` hops and a request id."""
    return HOP * (words - 1) + RID


@pytest.mark.parametrize("kind,raw", [("REP", False), ("REP", True), ("ROUTER", False)])
def test_ttl_default_8(kind: str, raw: bool) -> None:
    """The hop limit is checked where nng checks it: on the rep side (cooked or raw)."""
    pattern = make_pattern(kind, raw=raw)
    assert pattern.ttl == 8
    msg = pattern.receive(EID1, SP, (backtrace(8) + b"body",))
    assert msg.body == (b"body",)
    assert msg.hops == (EID1,) + (HOP,) * 7 + (RID,)
    with pytest.raises(Drop) as info:
        pattern.receive(EID1, SP, (backtrace(9) + b"body",))
    assert info.value.reason == "ttl"


@pytest.mark.parametrize("kind,raw", [("REQ", True), ("DEALER", False)])
def test_reply_side_moves_the_whole_stack(kind: str, raw: bool) -> None:
    """nng's xreq0 moves the whole backtrace of a reply to the header, without a hop limit."""
    pattern = make_pattern(kind, raw=raw)
    for words in (1, 8, 9, 20):
        msg = pattern.receive(EID1, SP, (backtrace(words) + b"body",))
        assert msg == Message((HOP,) * (words - 1) + (RID,), (b"body",))
    with pytest.raises(RemoteProtocolError):
        pattern.receive(EID1, SP, (HOP * 3,))


@pytest.mark.parametrize("ttl", [1, 2, 8, 15])
def test_ttl_settable(ttl: int) -> None:
    pattern = make_pattern("REP", raw=True, ttl=ttl)
    assert pattern.receive(EID1, SP, (backtrace(ttl) + b"x",)).hops == (EID1, *split_sp(backtrace(ttl), ttl)[0])
    with pytest.raises(Drop):
        pattern.receive(EID1, SP, (backtrace(ttl + 1) + b"x",))


@pytest.mark.parametrize("ttl", [0, 16, -1, 255])
def test_ttl_out_of_range_refused(ttl: int) -> None:
    for kind in ("REQ", "REP", "DEALER", "ROUTER"):
        with pytest.raises(LocalProtocolError):
            make_pattern(kind, ttl=ttl)
    with pytest.raises(LocalProtocolError):
        make_pattern("REP", raw=True, ttl=ttl)


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00", b"\x80\x00\x00", HOP, HOP + b"\x80\x00", HOP * 3, HOP + b"abc"],
    ids=["empty", "1-byte", "3-bytes", "no-top-bit", "truncated-rid", "hops-only", "ascii"],
)
def test_short_backtrace_is_a_remote_protocol_error(payload: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        make_pattern("REP").receive(EID1, SP, (payload,))
    with pytest.raises(RemoteProtocolError):
        make_pattern("REP", raw=True).receive(EID1, SP, (payload,))


def test_split_sp_examples() -> None:
    assert split_sp(RID, 8) == ((RID,), b"")
    assert split_sp(RID + b"body", 8) == ((RID,), b"body")
    assert split_sp(EID1 + RID + RID, 8) == ((EID1, RID), RID)  # stops at the first top-bit word


# -- REQ and REP state machines ---------------------------------------------------------------


@pytest.mark.parametrize("family", [ZMTP, SP])
def test_req_efsm(family: str) -> None:
    req = make_pattern("REQ")
    with pytest.raises(StateError):
        req.check_recv()  # no request yet
    req.prepare_send(Message.of(b"one"))
    req.sent(ZID)
    with pytest.raises(StateError):
        req.prepare_send(Message.of(b"two"))  # libzmq: EFSM
    req.check_recv()
    reply = (b"", b"r") if family == ZMTP else (req.pending + b"r",)
    assert req.deliver(req.receive(ZID, family, reply)) == Message.of(b"r")
    req.prepare_send(Message.of(b"two"))  # alternation restored


def test_req_relaxed_sp_drops_the_stale_reply() -> None:
    req = make_pattern("REQ", relaxed=True)
    req.prepare_send(Message.of(b"one"))
    first = req.pending
    req.sent(CLIENT_PIPE)
    req.prepare_send(Message.of(b"two"))  # allowed: replaces the pending request
    second = req.pending
    req.sent(CLIENT_PIPE)
    assert first != second
    with pytest.raises(Drop) as info:
        req.receive(CLIENT_PIPE, SP, (first + b"late",))
    assert info.value.reason == "stale-reply"
    assert req.deliver(req.receive(CLIENT_PIPE, SP, (second + b"fresh",))) == Message.of(b"fresh")


# -- REQ resend timer (sans-IO: deadline in, request out) ------------------------------------


def test_req_sp_resend_deadline_and_timer() -> None:
    req = make_pattern("REQ", resend_interval=2.0)
    assert req.resend_deadline() is None
    req.prepare_send(Message.of(b"q"))
    req.sent(CLIENT_PIPE, SP, 10.0)
    assert req.resend_deadline() == 12.0
    assert req.handle_timer(11.9) is None  # not due yet
    again = req.handle_timer(12.0)
    assert again is not None and again.body == (b"q",)
    assert req.envelope(again, SP).hops == (req.pending,)  # same request id: nng resends as is
    req.sent(DEV_PIPE, SP, 12.0)
    assert req.resend_deadline() == 14.0
    req.deliver(req.receive(DEV_PIPE, SP, (req.pending + b"r",)))
    assert req.resend_deadline() is None and req.handle_timer(99.0) is None


def test_req_zmtp_never_resends() -> None:
    req = make_pattern("REQ", resend_interval=2.0)
    req.prepare_send(Message.of(b"q"))
    req.sent(ZID, ZMTP, 10.0)
    assert req.resend_deadline() is None and req.handle_timer(1e9) is None
    assert req.on_pipe_lost(ZID, ZMTP) is False


def test_req_sp_pipe_lost_makes_the_resend_due_at_once() -> None:
    req = make_pattern("REQ", resend_interval=60.0)
    req.prepare_send(Message.of(b"q"))
    req.sent(CLIENT_PIPE, SP, 10.0)
    assert req.on_pipe_lost(DEV_PIPE, SP) is False  # another pipe: nothing to do
    assert req.on_pipe_lost(CLIENT_PIPE, SP) is True
    again = req.handle_timer(10.0)
    assert again is not None and again.body == (b"q",)


@pytest.mark.parametrize(("kind", "raw"), [("REQ", True), ("REP", False), ("REP", True),
                                           ("DEALER", False), ("ROUTER", False)])
def test_other_patterns_have_no_timer(kind: str, raw: bool) -> None:
    pattern = make_pattern(kind, raw)
    assert pattern.resend_deadline() is None and pattern.handle_timer(1e9) is None
    assert pattern.on_pipe_lost(CLIENT_PIPE, SP) is False


def test_req_relaxed_zmtp_drops_the_reply_from_the_old_pipe() -> None:
    req = make_pattern("REQ", relaxed=True)
    req.prepare_send(Message.of(b"one"))
    req.sent(b"\x00pipeA")
    req.prepare_send(Message.of(b"two"))
    req.sent(b"\x00pipeB")
    with pytest.raises(Drop):
        req.receive(b"\x00pipeA", ZMTP, (b"", b"late"))
    assert req.deliver(req.receive(b"\x00pipeB", ZMTP, (b"", b"fresh"))) == Message.of(b"fresh")


def test_req_relaxed_queued_old_reply_is_skipped_on_delivery() -> None:
    req = make_pattern("REQ", relaxed=True)
    req.prepare_send(Message.of(b"one"))
    req.sent(CLIENT_PIPE)
    queued = req.receive(CLIENT_PIPE, SP, (req.pending + b"old",))  # queued, not taken yet
    req.prepare_send(Message.of(b"two"))
    assert req.deliver(queued) is None  # the engine then takes the next message
    assert req.pending is not None


def test_rep_efsm() -> None:
    rep = make_pattern("REP")
    with pytest.raises(StateError):
        rep.prepare_send(Message.of(b"reply before request"))
    rep.check_recv()
    rep.deliver(rep.receive(ZID, ZMTP, (b"", b"q1")))
    with pytest.raises(StateError):
        rep.check_recv()  # must reply first
    target, _ = rep.prepare_send(Message.of(b"r1"))
    assert target == ZID
    rep.check_recv()
    with pytest.raises(StateError):
        rep.prepare_send(Message.of(b"r1 again"))


def test_make_pattern_kinds() -> None:
    cases = {
        ("REQ", False): (False, True), ("REQ", True): (False, False),
        ("REP", False): (True, True), ("REP", True): (True, False),
        ("DEALER", False): (False, False), ("ROUTER", False): (True, False),
    }
    for (kind, raw), (routed, cooked) in cases.items():
        p = make_pattern(kind.lower(), raw=raw)
        assert (p.routed, p.cooked) == (routed, cooked), (kind, raw)
        assert p.kind == kind
    with pytest.raises(LocalProtocolError):
        make_pattern("STREAM")  # PUB, SUB, ... are tests/test_patterns_pubsub.py's


# -- pairing tables ------------------------------------------------------------------------------

LEGAL_ZMTP = {
    ("REQ", "REP"), ("REQ", "ROUTER"), ("REP", "REQ"), ("REP", "DEALER"),
    ("DEALER", "REP"), ("DEALER", "DEALER"), ("DEALER", "ROUTER"),
    ("ROUTER", "REQ"), ("ROUTER", "DEALER"), ("ROUTER", "ROUTER"),
}


@pytest.mark.parametrize("a", SOCKET_TYPES)
@pytest.mark.parametrize("b", SOCKET_TYPES)
def test_zmtp_pairing_table(a: str, b: str) -> None:
    assert zmtp_legal(a, b) == ((a, b) in LEGAL_ZMTP)
    assert zmtp_legal(a, b) == zmtp_legal(b, a)
    assert (b in ZMTP_PEERS[a]) == zmtp_legal(a, b)


def test_sp_pairing_table() -> None:
    assert sp_legal(SP_REQ0, SP_REP0) and sp_legal(SP_REP0, SP_REQ0)
    assert not sp_legal(SP_REQ0, SP_REQ0) and not sp_legal(SP_REP0, SP_REP0)
    assert not sp_legal(SP_REQ0, 0x10)
    assert set(SP_PEERS) == {SP_REQ0, SP_REP0, 0x10, 0x11, 0x20, 0x21, 0x50, 0x51}
    assert [sp_protocol(k) for k in SOCKET_TYPES] == [SP_REQ0, SP_REP0, SP_REQ0, SP_REP0]
    assert zmtp_socket_type("REQ", raw=True) == "DEALER"
    assert zmtp_socket_type("REP", raw=True) == "ROUTER"
    assert zmtp_socket_type("REQ") == "REQ"


# -- properties ------------------------------------------------------------------------------------

frames_st = st.lists(st.binary(max_size=8), max_size=8).map(tuple)


@given(frames_st)
def test_split_zmtp_roundtrip(frames: tuple[bytes, ...]) -> None:
    hops, body = split_zmtp(frames)
    assert hops + body == frames
    assert Message(hops, body).frames == frames
    if hops:
        assert hops[-1] == b"" and all(hops[:-1])  # up to and including the first empty frame
    else:
        assert all(frames)  # no delimiter at all: everything is body


@given(st.sampled_from(["DEALER", "ROUTER", "REP-raw", "REQ-raw"]), frames_st.filter(bool))
def test_raw_patterns_zmtp_lossless(kind: str, frames: tuple[bytes, ...]) -> None:
    name, _, raw = kind.partition("-")
    pattern = make_pattern(name, raw=bool(raw))
    msg = pattern.deliver(pattern.receive(ZID, ZMTP, frames))
    assert msg is not None
    target, rest = pattern.prepare_send(msg)
    assert target == (ZID if pattern.routed else None)
    assert pattern.envelope(rest, ZMTP).frames == frames


@given(st.binary(max_size=48), st.integers(1, 15))
def test_split_sp_total(payload: bytes, ttl: int) -> None:
    """Arbitrary payloads: a split that rebuilds the payload, or Drop / RemoteProtocolError."""
    try:
        hops, rest = split_sp(payload, ttl)
    except Drop as drop:
        assert drop.reason == "ttl"
        return
    except RemoteProtocolError:
        return
    assert b"".join(hops) + rest == payload
    assert 1 <= len(hops) <= ttl
    assert all(len(h) == 4 for h in hops)
    assert hops[-1][0] & 0x80 and not any(h[0] & 0x80 for h in hops[:-1])


@given(st.lists(st.integers(0, 0x7FFFFFFF), max_size=6), st.integers(0, 0x7FFFFFFF),
       st.binary(max_size=16))
def test_sp_backtrace_roundtrip_through_xrep_and_rep(hops: list[int], rid: int, body: bytes) -> None:
    """Whatever backtrace arrives, REP puts exactly it back on the reply (minus its pipe id)."""
    words = tuple(h.to_bytes(4, "big") for h in hops) + ((rid | 0x80000000).to_bytes(4, "big"),)
    payload = b"".join(words) + body
    for pattern in (make_pattern("REP"), make_pattern("REP", raw=True)):
        msg = pattern.deliver(pattern.receive(EID2, SP, (payload,)))
        assert msg is not None
        target, rest = pattern.prepare_send(msg if pattern.raw else Message.of(body))
        assert target == EID2
        assert sp_wire(pattern.envelope(rest, SP)) == payload
