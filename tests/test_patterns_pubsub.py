"""PUB, SUB, XPUB, XSUB (ZMTP) and pub0, sub0 (SP) as sans-IO patterns, with exact bytes.

RFC 29 (PUBSUB): filtering at the publisher by prefix of the first frame, subscriptions additive
and counted at the subscriber. RFC 23 section "The Publish-Subscribe Pattern" (ZMTP 3.0): the
subscription is a one-frame message ``01|00 + topic``. RFC 37 "The SUBSCRIBE Command" / "The
CANCEL Command" (ZMTP 3.1): commands. nng ``sub.md``: sub0 filters locally, nothing on the wire.
"""

from __future__ import annotations

import pytest

from gateway.engine.codecs import sp_role, zmtp_role
from gateway.errors import Drop, LocalProtocolError, StateError
from gateway.message import Message
from gateway.patterns import SP, ZMTP, Publisher, Subscriber, make_pattern
from gateway.patterns.pubsub import parse_subscription, subscription_message
from gateway.wire.events import HandshakeComplete, Subscription
from gateway.wire.sp import SpCodec, sp_header
from gateway.wire.zmtp import ZmtpCodec

P1, P2, S1 = b"\x00\x00\x00\x00\x01", b"\x00\x00\x00\x00\x02", b"\x00\x00\x00\x09"
GREETING_30 = b"\xff" + b"\x00" * 8 + b"\x7f\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" * 32
GREETING_31 = GREETING_30[:11] + b"\x01" + GREETING_30[12:]
READY_PUB = b"\x04\x19\x05READY\x0bSocket-Type\x00\x00\x00\x03PUB"


def sub_of(topic: bytes) -> Subscription:
    return Subscription(subscribe=True, topic=topic)


def cancel_of(topic: bytes) -> Subscription:
    return Subscription(subscribe=False, topic=topic)


def publisher(raw: bool = False, **kw: object) -> Publisher:
    p = make_pattern("PUB", raw, **kw)  # type: ignore[arg-type]
    assert isinstance(p, Publisher)
    return p


def subscriber(raw: bool = False, **kw: object) -> Subscriber:
    p = make_pattern("SUB", raw, **kw)  # type: ignore[arg-type]
    assert isinstance(p, Subscriber)
    return p


# -- the subscriber: counted subscriptions -------------------------------------------------------


def test_subscriptions_are_counted_at_the_subscriber() -> None:
    """RFC 29: subscribing twice takes two unsubscribes; every subscribe goes upstream, the
    cancel only with the last (libzmq's trie)."""
    s = subscriber()
    assert s.subscribe(b"a.") == sub_of(b"a.")
    assert s.subscribe(b"a.") == sub_of(b"a.")
    assert s.topics == (b"a.",)
    assert s.unsubscribe(b"a.") is None  # one count left: the publisher keeps sending
    assert s.matches(b"a.x")
    assert s.unsubscribe(b"a.") == cancel_of(b"a.")
    assert not s.matches(b"a.x")
    with pytest.raises(Drop) as info:
        s.unsubscribe(b"a.")
    assert info.value.reason == "unknown-cancel"


def test_a_new_publisher_gets_each_prefix_once_in_its_versions_form() -> None:
    """libzmq's xsub_t::xattach_pipe: each held prefix once, whatever its count. The bytes are
    RFC 37 commands for a 3.1 publisher and RFC 23 messages for a 3.0 one."""
    s = subscriber()
    for t in (b"b", b"a", b"a", b""):
        s.subscribe(t)
    subs = s.attach(P1, ZMTP)
    assert subs == (sub_of(b""), sub_of(b"a"), sub_of(b"b"))
    assert s.attach(S1, SP) == ()  # SP: no subscription traffic at all
    for greeting, wire in (
        (GREETING_31, b"\x04\x0a\x09SUBSCRIBE" + b"\x04\x0b\x09SUBSCRIBEa" + b"\x04\x0b\x09SUBSCRIBEb"),
        (GREETING_30, b"\x00\x01\x01" + b"\x00\x02\x01a" + b"\x00\x02\x01b"),
    ):
        codec = ZmtpCodec(zmtp_role("SUB", False))
        codec.receive_data(greeting + READY_PUB)
        assert isinstance(codec.next_event(), HandshakeComplete)
        assert b"".join(codec.subscription_frame(x.subscribe, x.topic) for x in subs) == wire


@pytest.mark.parametrize(
    ("topics", "message", "delivered"),
    [
        ((b"a.",), b"a.1", True),  # subscribed
        ((b"a.",), b"b.1", False),  # not subscribed
        ((b"a.",), b"a", False),  # shorter than the prefix
        ((b"a",), b"a.1", True),  # a prefix of another topic matches it
        ((b"a.", b"a.b"), b"a.b.c", True),  # overlapping prefixes: once
        ((b"",), b"anything", True),  # the empty subscription: everything
        ((b"",), b"", True),
        ((), b"a.1", False),  # nothing held: nothing received
    ],
)
def test_sub_filters_by_prefix_on_both_wires(topics: tuple[bytes, ...], message: bytes,
                                            delivered: bool) -> None:
    s = subscriber()
    for t in topics:
        s.subscribe(t)
    for family in (ZMTP, SP):
        got = s.receive(P1, family, (message,))
        assert (got == Message((), (message,))) is delivered
    assert s.filtered == (0 if delivered else 2)


def test_sub_matches_the_first_frame_of_a_multipart_message() -> None:
    s = subscriber()
    s.subscribe(b"topic")
    assert s.receive(P1, ZMTP, (b"topic", b"body")) == Message((), (b"topic", b"body"))
    assert s.receive(P1, ZMTP, (b"other", b"topic")) is None


def test_xsub_passes_everything_unless_asked_to_filter() -> None:
    """libzmq's XSUB sets no filter (options.filter is SUB's); nng's raw sub0 neither."""
    x = subscriber(raw=True)
    assert x.receive(P1, ZMTP, (b"z",)) == Message((), (b"z",))
    assert x.receive(S1, SP, (b"z",)) == Message((), (b"z",))
    f = subscriber(raw=True, filter=True)
    f.subscribe(b"a")
    assert f.receive(S1, SP, (b"z",)) is None
    assert f.receive(S1, SP, (b"ab",)) == Message((), (b"ab",))


def test_xsub_sends_subscriptions_as_messages_and_upstream_messages() -> None:
    x = subscriber(raw=True)
    assert x.prepare_fanout(Message((), (b"\x01a",))) == sub_of(b"a")
    assert x.prepare_fanout(Message((), (b"\x01a",))) == sub_of(b"a")
    assert x.prepare_fanout(Message((), (b"\x00a",))) is None  # counted
    assert x.prepare_fanout(Message((), (b"\x00a",))) == cancel_of(b"a")
    with pytest.raises(Drop):
        x.prepare_fanout(Message((), (b"\x00a",)))
    first, up, same = x.prepare_fanout(Message((), (b"hello", b"\x01x")))
    assert first == b"hello" and same is up
    assert up == Message((), (b"hello", b"\x01x"))  # not a subscription: goes upstream
    assert x.counts == {}
    assert x.attach(P1, ZMTP) == () and x.filters[P1] == (b"",)
    assert x.attach(S1, SP) == () and x.filters[S1] == ()  # pub0 takes nothing from us


def test_cooked_sub_cannot_send() -> None:
    with pytest.raises(StateError):
        subscriber().prepare_fanout(Message((), (b"\x01a",)))


# -- the publisher: a set of prefixes per pipe, the union counted across pipes ------------------


def test_publisher_filters_per_pipe_and_sends_all_to_sp_pipes() -> None:
    p = publisher()
    p.attach(P1, ZMTP)
    p.attach(P2, ZMTP)
    p.attach(S1, SP)
    assert p.subscription(P1, sub_of(b"a.")) is None  # PUB tells the application nothing
    assert p.receive(P2, ZMTP, (b"\x01b.",)) is None  # RFC 23 message form, same effect
    table = {b"a.1": {P1, S1}, b"b.1": {P2, S1}, b"c.1": {S1}, b"a": {S1}}
    for topic, pipes in table.items():
        assert {rid for rid, f in p.filters.items() if topic.startswith(f)} == pipes, topic
    assert p.subscribed(P1) == {b"a."} and p.subscribed(S1) == {b""}


def test_one_pipe_holds_a_prefix_once() -> None:
    """libzmq's mtrie: a pipe that subscribes twice is held once and one cancel removes it (a
    libzmq SUB counts on its side and sends the cancel with its last unsubscribe)."""
    p = publisher()
    p.attach(P1, ZMTP)
    p.subscription(P1, sub_of(b"a"))
    p.subscription(P1, sub_of(b"a"))
    assert p.holders == {b"a": 1}
    p.subscription(P1, cancel_of(b"a"))
    assert p.subscribed(P1) == frozenset() and p.holders == {}
    with pytest.raises(Drop) as info:
        p.subscription(P1, cancel_of(b"a"))
    assert info.value.reason == "unknown-cancel"


def test_xpub_reports_the_first_holder_and_the_last() -> None:
    """libzmq's XPUB (not verbose): 01+prefix when a prefix gets its first subscriber, 00+prefix
    when it loses its last: exactly what a device must pass upstream."""
    x = publisher(raw=True)
    x.attach(P1, ZMTP)
    x.attach(P2, ZMTP)
    assert x.subscription(P1, sub_of(b"a")) == Message((), (b"\x01a",))
    assert x.subscription(P2, sub_of(b"a")) is None  # a second holder
    assert x.receive(P2, ZMTP, (b"\x01",)) == Message((), (b"\x01",))  # the empty prefix
    assert x.subscription(P1, cancel_of(b"a")) is None  # P2 still holds it
    assert x.subscription(P2, cancel_of(b"a")) == Message((), (b"\x00a",))


def test_xpub_verbose_reports_every_subscribe() -> None:
    x = publisher(raw=True, verbose=True)
    x.attach(P1, ZMTP)
    x.attach(P2, ZMTP)
    assert x.subscription(P1, sub_of(b"a")) == Message((), (b"\x01a",))
    assert x.subscription(P2, sub_of(b"a")) == Message((), (b"\x01a",))
    assert x.subscription(P2, sub_of(b"a")) == Message((), (b"\x01a",))
    assert x.subscription(P1, cancel_of(b"a")) is None


def test_xpub_reports_the_cancels_of_a_departing_subscriber() -> None:
    x = publisher(raw=True)
    x.attach(P1, ZMTP)
    x.attach(P2, ZMTP)
    for t in (b"b", b"a", b"c"):
        x.subscription(P1, sub_of(t))
    x.subscription(P2, sub_of(b"c"))
    assert x.detach(P1, ZMTP) == (Message((), (b"\x00a",)), Message((), (b"\x00b",)))
    assert x.holders == {b"c": 1}
    assert P1 not in x.filters
    p = publisher()  # a cooked PUB keeps the books but tells nobody
    p.attach(P1, ZMTP)
    p.subscription(P1, sub_of(b"a"))
    assert p.detach(P1, ZMTP) == () and p.holders == {}


def test_publisher_receives() -> None:
    x = publisher(raw=True)
    x.attach(P1, ZMTP)
    x.attach(S1, SP)
    # libzmq's XPUB hands an XSUB's upstream messages to the application; PUB drops them
    assert x.receive(P1, ZMTP, (b"up", b"stream")) == Message((), (b"up", b"stream"))
    assert x.receive(P1, ZMTP, (b"\x02x",)) == Message((), (b"\x02x",))
    p = publisher()
    p.attach(P1, ZMTP)
    for family, rid in ((ZMTP, P1), (SP, S1)):
        with pytest.raises(Drop) as info:
            p.receive(rid, family, (b"data",))
        assert info.value.reason == "unexpected-message"
    with pytest.raises(Drop):  # sub0 never sends, and cannot subscribe
        x.receive(S1, SP, (b"\x01a",))
    with pytest.raises(StateError):
        p.check_recv()
    x.check_recv()


def test_subscriptions_per_peer_are_bounded() -> None:
    p = publisher(max_subscriptions=2)
    p.attach(P1, ZMTP)
    p.subscription(P1, sub_of(b"a"))
    p.subscription(P1, sub_of(b"b"))
    p.subscription(P1, sub_of(b"b"))  # held already: no new entry
    with pytest.raises(Drop) as info:
        p.subscription(P1, sub_of(b"c"))
    assert info.value.reason == "too-many-subscriptions"
    s = subscriber(max_subscriptions=1)
    s.subscribe(b"a")
    with pytest.raises(LocalProtocolError):
        s.subscribe(b"b")


def test_subscription_bytes_per_peer_are_bounded() -> None:
    """Issue 20, finding 8: the cap counted prefixes, not bytes; one peer pinned 79-100 MB with
    256 KiB prefixes. Now a peer's prefixes hold at most max_subscription_bytes together."""
    from gateway.patterns.pubsub import MAX_SUBSCRIPTION_BYTES

    p = publisher()
    p.attach(P1, ZMTP)
    big = b"x" * (64 * 1024)
    for i in range(MAX_SUBSCRIPTION_BYTES // len(big)):
        p.subscription(P1, sub_of(bytes([i]) + big[1:]))
    with pytest.raises(Drop) as info:
        p.subscription(P1, sub_of(b"one more"))
    assert info.value.reason == "too-many-subscriptions"
    p.subscription(P1, cancel_of(bytes([0]) + big[1:]))  # a cancel gives its bytes back
    p.subscription(P1, sub_of(b"one more"))
    p.attach(P2, ZMTP)  # another peer has its own budget
    p.subscription(P2, sub_of(big))
    s = subscriber(max_subscription_bytes=10)
    s.subscribe(b"12345")
    s.subscribe(b"12345")  # counted, no new bytes
    with pytest.raises(LocalProtocolError, match="over 10 bytes"):
        s.subscribe(b"abcdef")


def test_subscription_changes_cost_no_rebuild_until_a_message_needs_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream of SUBSCRIBE/CANCEL rebuilds nothing (49db3ab rebuilt the peer's prefix tuple,
    O(n), on each); the next published message rebuilds once; the match is unchanged."""
    p = publisher()
    p.attach(P1, ZMTP)
    for i in range(5000):
        p.subscription(P1, sub_of(b"t%d." % i))
    for i in range(0, 5000, 2):
        p.subscription(P1, cancel_of(b"t%d." % i))
    assert p._filters[P1] == ()  # nothing rebuilt yet (the engine reads filters per message)
    assert len(p.filters[P1]) == 2500 and b"t1.".startswith(p.filters[P1])
    assert not b"t0.".startswith(p.filters[P1]) and p._filters[P1] is p.filters[P1]
    s = subscriber()
    for i in range(5000):
        s.subscribe(b"t%d." % i)
    assert s._prefixes == () and s.matches(b"t4999.x") and len(s._prefixes) == 5000
    s.unsubscribe(b"t4999.")
    assert not s.matches(b"t4999.x") and s.receive(S1, SP, (b"t4998.y",)) is not None


def test_published_message_shapes_on_each_wire() -> None:
    """ZMTP carries the frames; SP one body: topic frame + body concatenated, so the topic is
    still the prefix an SP subscriber matches. Exact bytes through both codecs."""
    p = publisher()
    first, zmsg, smsg = p.prepare_fanout(Message((), (b"a.", b"payload")))
    assert first == b"a."
    assert zmsg == Message((), (b"a.", b"payload"))
    assert smsg == Message((), (b"a.payload",))
    zc = ZmtpCodec(zmtp_role("PUB", False))
    zc.receive_data(GREETING_31 + b"\x04\x19\x05READY\x0bSocket-Type\x00\x00\x00\x03SUB")
    assert isinstance(zc.next_event(), HandshakeComplete)
    assert zc.send_message(zmsg.frames) == b"\x01\x02a.\x00\x07payload"
    sc = SpCodec(sp_role("PUB"))
    assert sc.initiate() == b"\x00SP\x00\x00\x20\x00\x00"
    sc.receive_data(sp_header(0x21))
    assert isinstance(sc.next_event(), HandshakeComplete)
    assert sc.send_message(smsg.frames) == b"\x00" * 7 + b"\x09a.payload"
    with pytest.raises(LocalProtocolError):
        p.prepare_fanout(Message((), ()))


def test_subscription_message_helpers() -> None:
    assert subscription_message(True, b"t") == Message((), (b"\x01t",))
    assert subscription_message(False, b"") == Message((), (b"\x00",))
    assert parse_subscription((b"\x01t",)) == sub_of(b"t")
    assert parse_subscription((b"\x00",)) == cancel_of(b"")
    assert parse_subscription((b"",)) is None
    assert parse_subscription((b"\x02t",)) is None
    assert parse_subscription((b"\x01t", b"more")) is None  # one frame only


def test_a_zmtp20_publisher_gets_the_message_form() -> None:
    """RFC 15 (ZMTP 2.0, JeroMQ 0.3, libzmq 3.x) has no commands: subscriptions go as the
    message ``01 + topic`` in 2.0 framing (flags, 1-byte size); an XPUB announces byte 9
    (libzmq's ZMQ_XPUB) and an XSUB byte 10 in the 2.0 greeting."""
    codec = ZmtpCodec(zmtp_role("SUB", False))
    codec.initiate()
    codec.receive_data(b"\xff" + b"\x00" * 8 + b"\x7f\x01\x01" + b"\x00\x00")  # a 2.0 PUB
    assert isinstance(codec.next_event(), HandshakeComplete)
    assert not codec.subscription_commands
    assert codec.subscription_frame(True, b"ab") == b"\x00\x03\x01ab"
    assert codec.subscription_frame(False, b"ab") == b"\x00\x03\x00ab"
    for kind, byte in (("PUB", 1), ("SUB", 2)):
        peer = 2 if kind == "PUB" else 1
        for raw, expect in ((False, byte), (True, byte + 8)):
            c = ZmtpCodec(zmtp_role(kind, raw))
            c.initiate()
            c.receive_data(b"\xff" + b"\x00" * 8 + b"\x7f\x01" + bytes((peer,)) + b"\x00\x00")
            assert isinstance(c.next_event(), HandshakeComplete)
            assert c.data_to_send()[:1] == bytes((expect,))
