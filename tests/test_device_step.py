"""gateway.device.step: the one forwarding step, per direction. A busy back end leaves a
request untranslated (no token minted and forgotten); every refusal is counted by its reason
and takes its token with it."""

from __future__ import annotations

import uuid

from gateway.device.inflight import LossTracker
from gateway.device.ledger import Ledger
from gateway.device.step import ReplyStep, RequestStep, SendNow
from gateway.envelope import PatternTranslator, Translator
from gateway.errors import PeerBusy, PeerGone
from gateway.message import Message

CLIENT = b"\x00\x6b\x8b\x45\x67"  # a ZeroMQ ROUTER's routing id for the client
PIPE = b"\x00\x00\x00\x07"


def _bridge() -> tuple[Translator, Ledger, LossTracker]:
    translator = Translator("zmtp", "sp")
    ledger = Ledger(f"step-{uuid.uuid4().hex[:8]}")
    return translator, ledger, LossTracker(translator, ledger, peers=lambda: 1)


def _recorder(into: list[Message]) -> SendNow:
    def send_now(out: Message) -> bytes | None:
        into.append(out)
        return PIPE
    return send_now


def _request(body: bytes = b"hi") -> Message:
    return Message((CLIENT, b""), (body,))


def test_a_busy_back_end_leaves_the_request_untranslated() -> None:
    translator, ledger, loss = _bridge()
    sent: list[Message] = []
    room = [False]

    def send_now(out: Message) -> bytes | None:
        sent.append(out)
        return PIPE

    step = RequestStep(translator, ledger, loss, send_now, room=room)
    assert step.forward(_request()) is False
    assert (len(translator.table), sent, ledger.forwarded("request")) == (0, [], 0)
    room[0] = True
    assert step.forward(_request()) is True
    assert len(translator.table) == 1 and ledger.forwarded("request") == 1
    (out,) = sent
    assert out.body == (b"hi",) and len(out.hops) == 1 and out.hops[0][0] & 0x80


def test_no_room_found_by_the_send_itself_takes_the_token_back() -> None:
    translator, ledger, loss = _bridge()
    step = RequestStep(translator, ledger, loss, lambda out: None)
    assert step.forward(_request()) is False
    assert len(translator.table) == 0 and ledger.forwarded("request") == 0


def test_a_held_forwarder_leaves_every_message_until_its_loop_lets_go() -> None:
    """The callback path's forwarder (made with a ``hold`` cell): no room sets the cell, and
    while it is set even a message the back end has room for is left (to the loop, which
    holds earlier ones); the loop's own forwarder (no cell) is never held."""
    translator, ledger, loss = _bridge()
    sent: list[Message] = []
    room, hold = [False], [False]
    step = RequestStep(translator, ledger, loss, _recorder(sent), room=room)
    held = step.forwarder(hold)
    assert held(_request()) is False and hold == [True]
    room[0] = True
    assert held(_request()) is False and sent == [] and len(translator.table) == 0
    assert step.forward(_request(b"loop")) is True and hold == [True]  # the loop's own
    hold[0] = False  # the loop caught up
    assert held(_request(b"next")) is True
    assert [m.body for m in sent] == [(b"loop",), (b"next",)]
    assert ledger.forwarded("request") == 2

    nowhere = RequestStep(translator, ledger, loss, lambda out: None).forwarder(hold)
    assert nowhere(_request()) is False and hold == [True]  # the send found no room
    assert len(translator.table) == 2  # (its token went back)

    front_hold = [False]
    full = ReplyStep(translator, ledger, loss, lambda out: None).forwarder(front_hold)
    assert full(Message(sent[0].hops, (b"re",))) is False and front_hold == [True]
    replies: list[Message] = []
    reply = ReplyStep(translator, ledger, loss, _recorder(replies)).forwarder(front_hold)
    assert reply(Message(sent[1].hops, (b"re",))) is False and replies == []
    front_hold[0] = False
    assert reply(Message(sent[1].hops, (b"re",))) is True and len(replies) == 1


def test_a_refused_send_is_counted_and_its_token_goes() -> None:
    translator, ledger, loss = _bridge()

    def busy(out: Message) -> bytes | None:
        raise PeerBusy("full")

    assert RequestStep(translator, ledger, loss, busy).forward(_request()) is True
    assert len(translator.table) == 0 and ledger.dropped_count("hwm") == 1


def test_a_request_the_translation_refuses_is_counted_not_sent() -> None:
    translator, ledger, loss = _bridge()
    sent: list[Message] = []
    step = RequestStep(translator, ledger, loss, _recorder(sent))
    assert step.forward(Message((CLIENT, b""), (b"a", b"b"))) is True
    assert sent == [] and ledger.dropped_count("multi-frame-body") == 1


def test_a_reply_gets_its_envelope_back_and_a_departed_client_is_counted() -> None:
    translator, ledger, loss = _bridge()
    requests: list[Message] = []
    RequestStep(translator, ledger, loss, _recorder(requests)).forward(_request())
    replies: list[Message] = []
    reply = ReplyStep(translator, ledger, loss, _recorder(replies))
    assert reply.forward(Message(requests[0].hops, (b"re",))) is True
    assert replies == [Message((CLIENT, b""), (b"re",))]
    assert ledger.forwarded("reply") == 1 and len(translator.table) == 0

    def gone(out: Message) -> bytes | None:
        raise PeerGone("left")

    RequestStep(translator, ledger, loss, _recorder(requests)).forward(_request())
    assert ReplyStep(translator, ledger, loss, gone).forward(Message(requests[1].hops, (b"re",))) is True
    assert ledger.dropped_count("client-gone") == 1


def test_a_reply_for_no_token_is_counted() -> None:
    translator, ledger, loss = _bridge()
    reply = ReplyStep(translator, ledger, loss, lambda out: CLIENT)
    assert reply.forward(Message((b"\x80\x00\x00\x01",), (b"re",))) is True
    assert ledger.dropped_count("unknown-token") == 1


def _state(translator: Translator, ledger: Ledger, loss: LossTracker) -> tuple[object, ...]:
    return (len(translator.table), len(loss.inflight), ledger.in_flight,
            ledger.forwarded("request"), ledger.forwarded("reply"),
            ledger.dropped_count("multi-frame-body"), ledger.dropped_count("unknown-token"))


def test_forward_is_prepare_send_and_done_in_one_call() -> None:
    """The one-call path (``forward``, what the pure engine runs per message) and the three
    parts the awaited loops call leave the same tables, in-flight entries and ledger."""
    runs = []
    for fused in (True, False):
        translator, ledger, loss = _bridge()
        sent: list[Message] = []
        replies: list[Message] = []
        request = RequestStep(translator, ledger, loss, _recorder(sent))
        reply = ReplyStep(translator, ledger, loss, _recorder(replies))
        inputs = [_request(b"a"), _request(b"b"), Message((CLIENT, b""), (b"x", b"y"))]
        for msg in inputs:
            if fused:
                assert request.forward(msg) is True
            else:
                out = request.prepare(msg, 1.0)
                if out is not None:
                    request.done(out, _recorder(sent)(out), 1.0)
        for msg in [Message(sent[0].hops, (b"re",)), Message((b"\x80\x00\x00\x09",), (b"?",))]:
            if fused:
                assert reply.forward(msg) is True
            else:
                out = reply.prepare(msg, 1.0)
                if out is not None:
                    reply.done(1.0)
                    replies.append(out)
        runs.append((_state(translator, ledger, loss), [m.body for m in sent], replies))
    assert runs[0] == runs[1]
    assert runs[0][0] == (1, 1, 0, 2, 1, 1, 1)  # the unknown token ends one in flight too


def test_a_subscription_that_changes_nothing_upstream_sends_nothing() -> None:
    """A translation may return None (a second subscriber to a topic): the step sends nothing
    and counts nothing, and the message is done."""
    translator = PatternTranslator("pubsub", "zmtp", "zmtp")
    ledger = Ledger(f"step-{uuid.uuid4().hex[:8]}")
    loss = LossTracker(translator, ledger, peers=lambda: 1)
    sent: list[Message] = []
    step = RequestStep(translator, ledger, loss, _recorder(sent))
    subscribe = Message((b"peer",), (b"\x01news",))
    assert step.forward(subscribe) is True and step.forward(subscribe) is True
    assert [m.body for m in sent] == [(b"\x01news",)]
    assert ledger.forwarded("request") == 1
