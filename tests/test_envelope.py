"""gateway.envelope: table tests with exact bytes, the seed walk-through, the token table."""

from __future__ import annotations

import ast
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gateway.envelope as envelope
from gateway.envelope import (
    EnvelopeError,
    MixedTranslator,
    PatternTranslator,
    Subscriptions,
    TableFull,
    TokenTable,
    UnknownToken,
    cancel,
    flatten,
    pair1_add,
    pair1_strip,
    relay_to_sp,
    sp_to_zmtp,
    sp_to_zmtp_reply,
    subscription,
    zmtp_to_sp_reply,
    zmtp_to_sp_request,
)
from gateway.errors import DROP_REASONS, Drop, GatewayError, ProtocolError, RemoteProtocolError
from gateway.message import Message

PIPE1 = b"\x00\x00\x00\x11"  # nng pipe ids: top bit clear
PIPE0 = b"\x00\x00\x00\x07"
RID = b"\x80\x00\x00\x01"  # request id: top bit set
ZID = b"\x00k\x8bEg"  # libzmq generated ROUTER identity: 00 + uint32


# --- purity -------------------------------------------------------------------------------------


PACKAGE = pathlib.Path(envelope.__file__).parent


def test_envelope_module_is_pure() -> None:
    imported: set[str] = set()
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
    forbidden = {"socket", "asyncio", "zmq", "pynng", "threading", "selectors", "time", "trio"}
    assert not imported & forbidden, imported & forbidden


def test_error_tree() -> None:
    assert issubclass(EnvelopeError, RemoteProtocolError)
    assert issubclass(UnknownToken, EnvelopeError)
    assert issubclass(EnvelopeError, GatewayError)
    e = EnvelopeError("not-4-bytes", "frame 0 is 5 bytes")
    assert e.reason == "not-4-bytes" and "frame 0" in str(e)
    # a full table is our own limit: one message dropped and counted, not the peer's fault
    assert issubclass(TableFull, Drop) and not issubclass(TableFull, ProtocolError)
    assert TableFull().reason == "table-full"
    assert UnknownToken().reason == "unknown-token"


def _raised_reasons() -> set[str]:
    """Every reason word the package's source raises: ``EnvelopeError("...")``,
    ``UnknownToken("...")`` and :class:`TableFull`'s own."""
    found = {TableFull().reason, UnknownToken().reason}
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("EnvelopeError", "UnknownToken") and node.args
                    and isinstance(node.args[0], ast.Constant)):
                found.add(node.args[0].value)
    return found


def test_the_package_doc_names_exactly_the_reasons_it_raises() -> None:
    doc = envelope.__doc__ or ""
    rows = doc[doc.index("reason   "):].split("====\n")[1]  # between the 2nd and 3rd rules
    listed = {line.split()[0] for line in rows.splitlines() if line and line[0].isalpha()}
    raised = _raised_reasons()
    assert listed == raised, (listed - raised, raised - listed)
    assert raised <= set(DROP_REASONS), raised - set(DROP_REASONS)  # the one table's words


# --- SP clients -> ZMTP servers (stateless) -----------------------------------------------------


@pytest.mark.parametrize(
    ("sp", "zmtp"),
    [
        (Message((PIPE1, RID), (b"hi",)), Message((PIPE1, RID, b""), (b"hi",))),
        (Message((RID,), (b"",)), Message((RID, b""), (b"",))),
        (
            Message((PIPE1, PIPE0, b"\xff\xff\xff\xff"), (b"x" * 3,)),
            Message((PIPE1, PIPE0, b"\xff\xff\xff\xff", b""), (b"xxx",)),
        ),
    ],
)
def test_sp_to_zmtp_and_back(sp: Message, zmtp: Message) -> None:
    assert sp_to_zmtp(sp) == zmtp
    assert zmtp_to_sp_reply(zmtp) == sp
    # frames exactly as a ZeroMQ DEALER puts them on the wire
    assert sp_to_zmtp(sp).frames == sp.hops + (b"",) + sp.body


@pytest.mark.parametrize(
    ("sp", "reason"),
    [
        (Message((), (b"x",)), "no-request-id"),
        (Message((PIPE1,), (b"x",)), "no-request-id"),
        (Message((PIPE1, b"\x80\x00\x01"), (b"x",)), "no-request-id"),
    ],
)
def test_sp_to_zmtp_refuses(sp: Message, reason: str) -> None:
    with pytest.raises(EnvelopeError) as ei:
        sp_to_zmtp(sp)
    assert ei.value.reason == reason


@pytest.mark.parametrize(
    ("zmtp", "reason"),
    [
        (Message((PIPE1, RID), (b"x",)), "no-delimiter"),  # REP server lost the delimiter
        (Message((), (b"x",)), "no-delimiter"),
        (Message((b"",), (b"x",)), "no-request-id"),  # only a delimiter
        (Message((PIPE1, b""), (b"x",)), "no-request-id"),  # last word lacks the top bit
        (Message((ZID, RID, b""), (b"x",)), "not-4-bytes"),  # a 5-byte identity frame
        (Message((PIPE1, b"\x80\x00\x01", b""), (b"x",)), "not-4-bytes"),
        (Message((RID, RID, b""), (b"x",)), "bad-backtrace"),  # top bit before the end
        (Message((PIPE1, RID, b""), (b"a", b"b")), "multi-frame-body"),
        (Message((PIPE1, RID), (b"a", b"b")), "multi-frame-body"),  # the body says it first
        (Message((PIPE1, RID, b""), ()), "no-body"),
    ],
)
def test_zmtp_to_sp_reply_refuses(zmtp: Message, reason: str) -> None:
    with pytest.raises(EnvelopeError) as ei:
        zmtp_to_sp_reply(zmtp)
    assert ei.value.reason == reason


# --- the token table ----------------------------------------------------------------------------


def test_mint_exact_tokens_and_pop() -> None:
    t = TokenTable(max_entries=10, ttl=5.0, start=5)
    a = t.mint((ZID, b""), now=100.0)
    b = t.mint((b"id2",), now=100.5)
    assert (a, b) == (b"\x80\x00\x00\x05", b"\x80\x00\x00\x06")
    assert len(t) == 2 and a in t
    assert t.pop(b, now=101.0) == (b"id2",)
    assert t.pop(a, now=104.9) == (ZID, b"")
    assert len(t) == 0
    with pytest.raises(UnknownToken) as ei:
        t.pop(a, now=105.0)  # answered already
    assert ei.value.reason == "unknown-token"


def test_token_counter_wraps_and_keeps_top_bit() -> None:
    t = TokenTable(start=0x7FFF_FFFE)
    toks = [t.mint((b"i",), 0.0) for _ in range(3)]
    assert toks == [b"\xff\xff\xff\xfe", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00"]


def test_random_start_has_top_bit() -> None:
    for _ in range(50):
        tok = TokenTable().mint((b"i",), 0.0)
        assert len(tok) == 4 and tok[0] & 0x80


def test_mint_skips_tokens_in_use() -> None:
    t = TokenTable(max_entries=10, start=0x7FFF_FFFF)
    held = t.mint((b"held",), 0.0)  # 0xffffffff stays pending
    assert held == b"\xff\xff\xff\xff"
    t._counter = 0x7FFF_FFFF  # as if 2**31 mints later the counter came round to it again
    nxt = t.mint((b"next",), 0.0)
    assert nxt == b"\x80\x00\x00\x00"  # skipped the held one
    assert t.pop(held, 0.0) == (b"held",) and t.pop(nxt, 0.0) == (b"next",)


def test_tokens_unique_while_pending() -> None:
    t = TokenTable(max_entries=5000, start=123)
    toks = [t.mint((i.to_bytes(2, "big"),), 0.0) for i in range(5000)]
    assert len(set(toks)) == 5000
    assert all(len(x) == 4 and x[0] & 0x80 for x in toks)


def test_ttl_expiry() -> None:
    t = TokenTable(max_entries=100, ttl=10.0, start=1)
    a = t.mint((b"a",), now=0.0)
    b = t.mint((b"b",), now=4.0)
    c = t.mint((b"c",), now=8.0)
    assert t.expire(9.9) == 0
    assert t.expire(10.0) == 1  # a's deadline is 10.0
    assert len(t) == 2 and a not in t
    with pytest.raises(UnknownToken) as ei:
        t.pop(a, now=10.0)
    assert ei.value.reason == "unknown-token"
    # b is still held but past its deadline when the reply comes: refused as expired
    with pytest.raises(UnknownToken) as ei:
        t.pop(b, now=14.0)
    assert ei.value.reason == "expired-token"
    assert b not in t
    assert t.expire(100.0) == 1 and c not in t
    # a, c swept by expire(); b removed by pop() past its deadline: all three expired
    assert t.expired_total == 3 and len(t) == 0


def test_table_full_then_expiry_makes_room() -> None:
    t = TokenTable(max_entries=3, ttl=1.0, start=0)
    for i in range(3):
        t.mint((bytes([i]),), now=0.0)
    with pytest.raises(TableFull) as ei:
        t.mint((b"x",), now=0.5)
    assert ei.value.reason == "table-full"
    assert len(t) == 3
    tok = t.mint((b"x",), now=1.0)  # mint expires the old ones first
    assert len(t) == 1 and t.expired_total == 3
    assert t.pop(tok, 1.5) == (b"x",)


def test_table_validates_arguments() -> None:
    with pytest.raises(ValueError):
        TokenTable(max_entries=0)
    with pytest.raises(ValueError):
        TokenTable(ttl=0)


# --- ZMTP clients -> SP servers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("zmtp", "sp_body"),
    [
        (Message((ZID, b""), (b"hi",)), (b"hi",)),  # REQ client through a ROUTER
        (Message((ZID, b"app1", b"app2", b""), (b"hi",)), (b"hi",)),  # DEALER + app envelope
        (Message((ZID,), (b"raw",)), (b"raw",)),  # DEALER client, no delimiter
        (Message((b"\x00" * 255, b""), (b"",)), (b"",)),  # long identity, empty body frame
    ],
)
def test_zmtp_request_round_trip(zmtp: Message, sp_body: tuple[bytes, ...]) -> None:
    t = TokenTable(start=0x10)
    sp = zmtp_to_sp_request(zmtp, t, now=1.0)
    assert sp == Message((b"\x80\x00\x00\x10",), sp_body)
    assert len(t) == 1
    reply = sp_to_zmtp_reply(Message(sp.hops, (b"ok",)), t, now=2.0)
    assert reply == Message(zmtp.hops, (b"ok",))
    assert len(t) == 0


def test_dealer_without_delimiter_gets_its_frames_back() -> None:
    t = TokenTable(start=0)
    sp = zmtp_to_sp_request(Message((ZID,), (b"body",)), t, 0.0)
    back = sp_to_zmtp_reply(Message(sp.hops, (b"answer",)), t, 0.0)
    assert back.frames == (ZID, b"answer")  # ROUTER pops ZID: the DEALER reads [b"answer"]


@pytest.mark.parametrize(("body", "reason"), [((b"a", b"b"), "multi-frame-body"), ((), "probe")])  # [id][empty]: a probe
def test_zmtp_request_refuses_bodies(body: tuple[bytes, ...], reason: str) -> None:
    t = TokenTable()
    with pytest.raises(EnvelopeError) as ei:
        zmtp_to_sp_request(Message((ZID, b""), body), t, 0.0)
    assert ei.value.reason == reason
    assert len(t) == 0  # nothing parked for a refused request


@pytest.mark.parametrize(
    ("hops", "reason", "exc"),
    [
        ((), "no-request-id", EnvelopeError),
        ((b"\x80\x00\x00\x01", b"\x80\x00\x00\x02"), "bad-backtrace", EnvelopeError),
        ((b"\x80\x00\x01",), "not-4-bytes", EnvelopeError),
        ((b"\x00\x00\x00\x01",), "no-request-id", EnvelopeError),
        ((b"\x80\x00\x00\x63",), "unknown-token", UnknownToken),
    ],
)
def test_sp_reply_refuses(hops: tuple[bytes, ...], reason: str, exc: type) -> None:
    t = TokenTable(start=0)
    t.mint((ZID, b""), 0.0)
    with pytest.raises(exc) as ei:
        sp_to_zmtp_reply(Message(hops, (b"x",)), t, 0.0)
    assert ei.value.reason == reason
    assert len(t) == 1  # the pending request is untouched


# --- the seed walk-through, across families -----------------------------------------------------
# Small byte-level models of what the sockets do (seed notes 000/001), so that every step can be
# checked with the exact bytes: nng raw REP recv/send, cooked REP, ZeroMQ REP and ROUTER.


def raw_rep_recv(pipe_id: bytes, wire: bytes) -> Message:
    """D-REP::recv: push the pipe id, move 4-byte words to the header up to the top-bit one."""
    hops = [pipe_id]
    while True:
        word, wire = wire[:4], wire[4:]
        hops.append(word)
        if word[0] & 0x80:
            return Message(tuple(hops), (wire,))


def raw_rep_send(msg: Message) -> tuple[bytes, bytes]:
    """D-REP::send: pop the first hop as the pipe id; the rest + body go on that pipe."""
    return msg.hops[0], b"".join(msg.hops[1:]) + msg.body[0]


def raw_req_send(msg: Message) -> bytes:
    return b"".join(msg.hops) + msg.body[0]


def raw_req_recv(wire: bytes) -> Message:
    hops = []
    while True:
        word, wire = wire[:4], wire[4:]
        hops.append(word)
        if word[0] & 0x80:
            return Message(tuple(hops), (wire,))


def zmq_rep_serve(frames: tuple[bytes, ...], reply: bytes) -> tuple[bytes, ...]:
    """A ZeroMQ REP: store everything up to and including the delimiter, echo it back."""
    i = frames.index(b"")
    return frames[: i + 1] + (reply,)


def test_seed_walk_through_sp_client_to_zmtp_server() -> None:
    # User -> REQ::send: rid pushed, wire rid;req-body
    wire = RID + b"req-body"
    # gateway frontend raw REP (the seed's D-REP): ([eid1;rid][req-body])
    req = raw_rep_recv(PIPE1, wire)
    assert req == Message((PIPE1, RID), (b"req-body",))
    # DEVICE translates: one frame per hop + delimiter; the DEALER backend sends these frames
    frames = sp_to_zmtp(req).frames
    assert frames == (PIPE1, RID, b"", b"req-body")
    # the ZeroMQ REP server echoes the envelope with its reply; the DEALER reads it back
    back = zmq_rep_serve(frames, b"rep-body")
    assert back == (PIPE1, RID, b"", b"rep-body")
    reply = zmtp_to_sp_reply(Message(back[:3], back[3:]))
    assert reply == Message((PIPE1, RID), (b"rep-body",))
    # D-REP::send: pops eid1 to find the pipe, writes rid;rep-body; REQ::recv checks rid
    assert raw_rep_send(reply) == (PIPE1, RID + b"rep-body")


def test_seed_walk_through_with_an_sp_device_in_front() -> None:
    # client -> nng device (eid0) -> gateway (eid1): the backtrace grows, the envelope too
    wire_from_device = PIPE0 + RID + b"q"
    req = raw_rep_recv(PIPE1, wire_from_device)
    assert req.hops == (PIPE1, PIPE0, RID)
    frames = sp_to_zmtp(req).frames
    assert frames == (PIPE1, PIPE0, RID, b"", b"q")
    back = zmq_rep_serve(frames, b"a")
    reply = zmtp_to_sp_reply(Message(back[:-1], back[-1:]))
    assert raw_rep_send(reply) == (PIPE1, PIPE0 + RID + b"a")  # the device pops eid0 next


def test_seed_walk_through_zmtp_client_to_sp_server() -> None:
    t = TokenTable(start=0x2A)
    # ZeroMQ REQ client sends ["", "req-body"]; the ROUTER frontend pushes the identity
    req = Message((ZID, b""), (b"req-body",))
    sp = zmtp_to_sp_request(req, t, now=0.0)
    token = b"\x80\x00\x00\x2a"
    assert sp == Message((token,), (b"req-body",))
    # D-REQ::send (raw): header + body untouched on the wire
    wire = raw_req_send(sp)
    assert wire == token + b"req-body"
    # the nng REP server (cooked): push eid2, move up to the top-bit word, keep it as backtrace
    server_view = raw_rep_recv(b"\x00\x00\x00\x02", wire)
    assert server_view.hops == (b"\x00\x00\x00\x02", token)
    # REP::send: restores the backtrace, pops eid2: wire token;rep-body to the gateway
    _, back_wire = raw_rep_send(Message(server_view.hops, (b"rep-body",)))
    assert back_wire == token + b"rep-body"
    # D-REQ::recv: ([token][rep-body]) -> the ZeroMQ envelope again
    rep = raw_req_recv(back_wire)
    assert rep == Message((token,), (b"rep-body",))
    out = sp_to_zmtp_reply(rep, t, now=0.1)
    assert out == Message((ZID, b""), (b"rep-body",))
    # ROUTER::send pops the identity; the REQ client reads ["", "rep-body"]
    assert out.frames[1:] == (b"", b"rep-body")
    assert len(t) == 0


# --- properties ---------------------------------------------------------------------------------

frame = st.binary(min_size=1, max_size=40)
zmtp_envelopes = st.tuples(
    frame,  # ROUTER identity
    st.lists(frame, max_size=6),  # app envelope frames
    st.booleans(),  # delimiter present
).map(lambda t: (t[0], *t[1], *((b"",) if t[2] else ())))
sp_backtraces = st.tuples(
    st.lists(st.integers(0, 0x7FFF_FFFF), max_size=7),
    st.integers(0x8000_0000, 0xFFFF_FFFF),
).map(lambda t: tuple(w.to_bytes(4, "big") for w in (*t[0], t[1])))


@settings(max_examples=300, deadline=None)
@given(
    envs=st.lists(st.tuples(zmtp_envelopes, st.binary(max_size=64)), min_size=1, max_size=20),
    order=st.randoms(use_true_random=False),
    start=st.integers(0, 0x7FFF_FFFF),
)
def test_zmtp_round_trip_property(envs, order, start) -> None:  # type: ignore[no-untyped-def]
    t = TokenTable(max_entries=100, start=start)
    pending = []
    for hops, body in envs:
        msg = Message(hops, (body,))
        sp = zmtp_to_sp_request(msg, t, now=0.0)
        assert len(sp.hops) == 1 and len(sp.hops[0]) == 4 and sp.hops[0][0] & 0x80
        assert sp.body == (body,)
        pending.append((msg, sp))
    assert len({sp.hops for _, sp in pending}) == len(pending)  # tokens unique
    order.shuffle(pending)  # replies come back in any order
    for msg, sp in pending:
        assert sp_to_zmtp_reply(Message(sp.hops, sp.body), t, now=1.0) == msg
    assert len(t) == 0


@settings(max_examples=300, deadline=None)
@given(bt=sp_backtraces, body=st.binary(max_size=64))
def test_sp_round_trip_property(bt, body) -> None:  # type: ignore[no-untyped-def]
    msg = Message(bt, (body,))
    z = sp_to_zmtp(msg)
    assert z.has_delimiter and z.frames == bt + (b"", body)
    assert zmtp_to_sp_reply(z) == msg


def test_pop_of_an_expired_token_counts_as_expired() -> None:
    """The device decrements its in-flight count from expired_total: late replies count too."""
    table = TokenTable(max_entries=4, ttl=1.0, start=5)
    token = table.mint((b"id", b""), now=0.0)
    with pytest.raises(UnknownToken) as info:
        table.pop(token, now=2.0)
    assert info.value.reason == "expired-token"
    assert table.expired_total == 1 and len(table) == 0


# ---------------------------------------------------------------------------------------------
# pub/sub, pipeline, pair (docs/patterns.md)


def _sub(frame: bytes) -> Message:
    return Message((), (frame,))


def test_subscription_messages_are_rfc29_bytes() -> None:
    # ZMTP 3.0 (RFC 29 "PUB-SUB", RFC 23 §3): subscribe = 0x01 + prefix, cancel = 0x00 + prefix
    assert subscription(b"a.") == Message((), (b"\x01a.",))
    assert cancel(b"a.") == Message((), (b"\x00a.",))
    assert subscription(b"") == Message((), (b"\x01",))


@pytest.mark.parametrize(("frames", "upstream"), [
    # (what subscribers send, in order) -> what the publisher hears (None: nothing)
    ([b"\x01a."], [b"\x01a."]),
    ([b"\x01a.", b"\x01a."], [b"\x01a.", None]),  # counted: the union did not change
    ([b"\x01a.", b"\x01a.", b"\x00a."], [b"\x01a.", None, None]),  # one holder is left
    ([b"\x01a.", b"\x01a.", b"\x00a.", b"\x00a."], [b"\x01a.", None, None, b"\x00a."]),
    ([b"\x01a", b"\x01a."], [b"\x01a", b"\x01a."]),  # a prefix of another is its own entry
    ([b"\x01", b"\x00"], [b"\x01", b"\x00"]),  # the empty subscription: everything
])
def test_subscriptions_are_counted_and_only_the_union_changes_go_up(
        frames: list[bytes], upstream: list[bytes | None]) -> None:
    subs = Subscriptions()
    out = [subs.apply(_sub(f)) for f in frames]
    assert [m[1][0] if m is not None else None for m in out] == upstream


def test_standing_subscriptions_are_sent_first_and_never_cancelled() -> None:
    subs = Subscriptions((b"a.", b"b.", b"a."))
    assert subs.initial() == [subscription(b"a."), subscription(b"b.")]
    assert subs.apply(_sub(b"\x01a.")) is None  # already held
    assert subs.apply(_sub(b"\x00a.")) is None  # back to the standing one
    with pytest.raises(EnvelopeError) as info:
        subs.apply(_sub(b"\x00a."))
    assert info.value.reason == "unknown-subscription"
    assert subs.union() == [b"a.", b"b."]


@pytest.mark.parametrize(("msg", "reason"), [
    (Message((), (b"\x00nobody",)), "unknown-subscription"),
    (Message((), (b"\x02x",)), "not-a-subscription"),
    (Message((), (b"",)), "not-a-subscription"),
    (Message((), (b"\x01a", b"b")), "not-a-subscription"),
])
def test_bad_subscription_messages(msg: Message, reason: str) -> None:
    with pytest.raises(EnvelopeError) as info:
        Subscriptions().apply(msg)
    assert info.value.reason == reason


def test_flatten_concatenates_topic_and_body_for_sp() -> None:
    assert flatten(Message((), (b"a.", b"body"))) == Message((), (b"a.body",))
    assert flatten(Message((), (b"one",))) == Message((), (b"one",))
    codec = lambda frames, d: (b"|".join(frames),)  # noqa: E731
    assert flatten(Message((), (b"a.", b"b")), codec) == Message((), (b"a.|b",))
    with pytest.raises(EnvelopeError):
        flatten(Message((), ()))


def test_relay_never_merges_frames() -> None:
    assert relay_to_sp(Message((), (b"x",))) == Message((), (b"x",))
    with pytest.raises(EnvelopeError) as info:
        relay_to_sp(Message((), (b"a", b"b")))
    assert info.value.reason == "multi-frame-body"


def test_pair1_hop_word() -> None:
    # nng pair1 (src/sp/protocol/pair1/pair.c): a 32-bit big-endian hop count ahead of the body;
    # the originator sends 0 in the header and nng adds one as it writes the pipe
    assert pair1_add(Message((), (b"x",))) == Message((b"\x00\x00\x00\x00",), (b"x",))
    assert pair1_strip(Message((b"\x00\x00\x00\x03",), (b"x",))) == Message((), (b"x",))
    assert pair1_strip(Message((), (b"x",))) == Message((), (b"x",))  # nng kept none
    with pytest.raises(EnvelopeError) as info:
        pair1_strip(Message((b"\x00\x01",), (b"x",)))
    assert info.value.reason == "bad-hop-header"


def test_pattern_translator_directions() -> None:
    t = PatternTranslator("pubsub", "zmtp", "sp")
    assert (t.up, t.down, t.pairs_replies) == (True, True, False)
    assert t.initial() == []  # a ZeroMQ front: only the clients' union
    assert t.request(_sub(b"\x01a."), 0.0) == subscription(b"a.")
    assert t.reply(Message((), (b"a.1",)), 0.0) == Message((), (b"a.1",))
    t = PatternTranslator("pubsub", "sp", "zmtp")
    assert not t.up and t.initial() == [subscription(b"")]  # an SP front: everything
    assert t.reply(Message((), (b"a.", b"x")), 0.0) == Message((), (b"a.x",))
    t = PatternTranslator("pubsub", "sp", "zmtp", subscribe=(b"a.", b"b."))
    assert t.initial() == [subscription(b"a."), subscription(b"b.")]
    t = PatternTranslator("pipeline", "zmtp", "sp")
    assert (t.up, t.down) == (True, False)
    t = PatternTranslator("pair", "zmtp", "sp", sp_pair1=True)
    assert t.request(Message((), (b"x",)), 0.0) == Message((b"\x00\x00\x00\x00",), (b"x",))
    assert t.reply(Message((b"\x00\x00\x00\x01",), (b"y",)), 0.0) == Message((), (b"y",))
    t = PatternTranslator("pair", "sp", "sp", sp_pair1=True)  # pair1 -> pair1: count goes on
    assert t.request(Message((b"\x00\x00\x00\x02",), (b"x",)), 0.0) == Message(
        (b"\x00\x00\x00\x02",), (b"x",))
    assert t.reply(Message((), (b"y",)), 0.0) == Message((b"\x00\x00\x00\x00",), (b"y",))
    with pytest.raises(ValueError):
        PatternTranslator("bus", "sp", "sp")


def test_a_probe_router_message_is_reason_probe_not_no_body() -> None:
    """ZMQ_PROBE_ROUTER: a DEALER's empty frame arrives as [identity][empty] with no body."""
    table = TokenTable()
    with pytest.raises(EnvelopeError) as info:
        zmtp_to_sp_request(Message((b"\x00\x01\x02\x03\x04", b""), ()), table, 0.0)
    assert info.value.reason == "probe"
    with pytest.raises(EnvelopeError) as info:  # an app envelope, then nothing: a real mistake
        zmtp_to_sp_request(Message((b"\x00id", b"app", b""), ()), table, 0.0)
    assert info.value.reason == "no-body"
    assert len(table) == 0


# --- one port, both wires (any+): MixedTranslator ---------------------------------------------

M_ZID = b"\x00\x00\x00\x00\x07"  # a ZeroMQ client's routing id on the front (00 + uint32)
M_PIPE = b"\x00\x00\x00\x09"  # an SP client's pipe id on the front (top bit clear)
M_RID = b"\x80\x00\x00\x2a"  # its request id (top bit set)


def _mixed(back: str) -> MixedTranslator:
    t = MixedTranslator(back, TokenTable(start=5))
    t.family_of = {M_ZID: "zmtp", M_PIPE: "sp"}.get
    return t


def test_mixed_to_sp_tokens_for_zeromq_and_backtraces_for_sp() -> None:
    t = _mixed("sp")
    assert t.mode == "any->sp"
    zreq = t.request(Message((M_ZID, b"env", b""), (b"z",)), 0.0)
    assert zreq == Message((b"\x80\x00\x00\x05",), (b"z",))  # a minted token
    sreq = t.request(Message((M_PIPE, M_RID), (b"s",)), 0.0)
    assert sreq == Message((M_PIPE, M_RID), (b"s",))  # SP -> SP: the backtrace, untouched
    # replies: one hop is a token (the ZeroMQ client), more is an SP backtrace
    assert t.reply(Message((M_PIPE, M_RID), (b"S",)), 1.0) == Message((M_PIPE, M_RID), (b"S",))
    assert t.reply(Message((b"\x80\x00\x00\x05",), (b"Z",)), 1.0) == Message(
        (M_ZID, b"env", b""), (b"Z",))
    assert len(t.table) == 0


def test_mixed_to_zmtp_by_the_client_pipes_wire() -> None:
    t = _mixed("zmtp")
    assert t.request(Message((M_ZID, b""), (b"z",)), 0.0) == Message((M_ZID, b""), (b"z",))
    sreq = t.request(Message((M_PIPE, M_RID), (b"s",)), 0.0)
    assert sreq == Message((M_PIPE, M_RID, b""), (b"s",))  # 4-byte frames + the delimiter
    assert t.reply(Message((M_ZID, b""), (b"Z",)), 1.0) == Message((M_ZID, b""), (b"Z",))
    assert t.reply(Message((M_PIPE, M_RID, b""), (b"S",)), 1.0) == Message((M_PIPE, M_RID), (b"S",))
    with pytest.raises(EnvelopeError) as bad:  # an SP client's reply keeps SP's rules
        t.reply(Message((M_PIPE, M_RID), (b"S",)), 1.0)
    assert bad.value.reason == "no-delimiter"


def test_mixed_refusals() -> None:
    from gateway.errors import PeerGone

    t = _mixed("zmtp")
    with pytest.raises(PeerGone):  # the client's pipe left: counted as client-gone
        t.request(Message((b"\x00\x00\x00\x00\x08", b""), (b"x",)), 0.0)
    with pytest.raises(PeerGone):
        t.reply(Message((b"\x00\x00\x00\x00\x08", b""), (b"x",)), 0.0)
    with pytest.raises(EnvelopeError):
        t.request(Message((), (b"x",)), 0.0)
    s = _mixed("sp")
    with pytest.raises(EnvelopeError) as bad:  # ZeroMQ body rules still apply toward SP
        s.request(Message((M_ZID, b""), (b"a", b"b")), 0.0)
    assert bad.value.reason == "multi-frame-body"


def test_mixed_expiry_frees_tokens_and_counts_none() -> None:
    """The device's in-flight table counts every expired request once, whatever its client's
    wire; the translator only frees the tokens."""
    t = MixedTranslator("sp", TokenTable(ttl=1.0, start=1))
    t.family_of = {M_ZID: "zmtp"}.get
    t.request(Message((M_ZID, b""), (b"z",)), 0.0)
    assert t.expire(5.0) == 0 and len(t.table) == 0
    token = t.request(Message((M_ZID, b""), (b"z",)), 6.0)[0]
    t.forget([token])
    assert len(t.table) == 0
