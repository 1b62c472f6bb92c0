"""PUSH, PULL (RFC 30; SP push0/pull0), PAIR (RFC 31; SP pair0) and SP pair1 as sans-IO
patterns, the pairing tables for them, and the kind names, with exact bytes.

pair1: nng ``src/sp/protocol/pair1/pair1.c`` (32-bit header, low byte the hop count, checked
against the TTL on receive, incremented on send; the SP protocol ids from
``sp-protocol-ids-01.txt``: pair0 0x10, pair1 0x11, pub0 0x20, sub0 0x21, push0 0x50, pull0 0x51).
"""

from __future__ import annotations

import pytest

from gateway.engine.codecs import sp_role
from gateway.errors import Drop, LocalProtocolError, RemoteProtocolError, StateError
from gateway.message import Message
from gateway.patterns import SP, ZMTP, Pair, Pair1, Pull, Push, canonical_kind, make_pattern
from gateway.patterns.pairing import (
    PATTERN_TYPES,
    SP_PAIR0,
    SP_PAIR1,
    SP_PUB0,
    SP_PULL0,
    SP_PUSH0,
    SP_SUB0,
    ZMTP_PEERS,
    sp_legal,
    sp_protocol,
    zmtp_legal,
    zmtp_socket_type,
)
from gateway.wire.events import HandshakeComplete
from gateway.wire.sp import SpCodec, sp_header

RID = b"\x00\x00\x00\x07"


def sp_open(kind: str, peer: int) -> SpCodec:
    codec = SpCodec(sp_role(kind))
    codec.receive_data(sp_header(peer))
    assert isinstance(codec.next_event(), HandshakeComplete)
    return codec


# -- pipeline ---------------------------------------------------------------------------------


def test_push_sends_frames_as_they_are_and_never_receives() -> None:
    push = make_pattern("PUSH")
    assert isinstance(push, Push) and not push.enveloped and push.strategy == "balanced"
    target, rest = push.prepare_send(Message((b"ignored",), (b"", b"job")))
    assert target is None  # load-balanced by the engine
    assert rest == Message((), (b"", b"job"))  # an empty frame is body, not a delimiter
    with pytest.raises(Drop) as info:
        push.receive(RID, ZMTP, (b"x",))
    assert info.value.reason == "unexpected-message"
    with pytest.raises(StateError):
        push.check_recv()
    with pytest.raises(LocalProtocolError):
        push.prepare_send(Message((), ()))
    codec = sp_open("PUSH", SP_PULL0)
    assert codec.send_message(rest.frames[1:]) == b"\x00" * 7 + b"\x03job"  # no SP header


def test_pull_receives_every_frame_as_body_and_never_sends() -> None:
    pull = make_pattern("PULL")
    assert isinstance(pull, Pull)
    assert pull.receive(RID, ZMTP, (b"", b"a", b"")) == Message((), (b"", b"a", b""))
    assert pull.receive(RID, SP, (b"\x80\x00\x00\x01x",)) == Message((), (b"\x80\x00\x00\x01x",))
    with pytest.raises(StateError):
        pull.check_send()
    with pytest.raises(StateError):
        pull.prepare_send(Message.of(b"x"))


# -- pair ---------------------------------------------------------------------------------------


def test_pair0_is_exclusive_and_plain() -> None:
    pair = make_pattern("PAIR")
    assert isinstance(pair, Pair) and pair.exclusive
    assert pair.receive(RID, SP, (b"hello",)) == Message((), (b"hello",))
    assert pair.prepare_send(Message.of(b"a", b"b")) == (None, Message((), (b"a", b"b")))
    assert make_pattern("pair0").kind == "PAIR"


@pytest.mark.parametrize(
    ("wire", "cooked", "raw"),
    [
        (b"\x00\x00\x00\x01hello", Message((), (b"hello",)), Message((b"\x00\x00\x00\x01",), (b"hello",))),
        (b"\x00\x00\x00\x08", Message((), (b"",)), Message((b"\x00\x00\x00\x08",), (b"",))),  # = ttl
    ],
)
def test_pair1_receive(wire: bytes, cooked: Message, raw: Message) -> None:
    assert make_pattern("PAIR1").receive(RID, SP, (wire,)) == cooked
    assert make_pattern("pair1", raw=True).receive(RID, SP, (wire,)) == raw


@pytest.mark.parametrize("wire", [b"", b"\x00\x00\x01", b"\x00\x00\x01\x00x", b"\x01\x00\x00\x01x"])
def test_pair1_malformed_header_closes_the_pipe(wire: bytes) -> None:
    """nng: shorter than 4 bytes or a header above 0xff is malformed: the pipe is closed."""
    with pytest.raises(RemoteProtocolError):
        make_pattern("PAIR1").receive(RID, SP, (wire,))


def test_pair1_over_the_hop_limit_is_dropped() -> None:
    p = make_pattern("PAIR1", ttl=3)
    assert p.receive(RID, SP, (b"\x00\x00\x00\x03x",)) == Message((), (b"x",))
    with pytest.raises(Drop) as info:
        p.receive(RID, SP, (b"\x00\x00\x00\x04x",))
    assert info.value.reason == "ttl"


def test_pair1_send_increments_the_hop_count_exact_bytes() -> None:
    """nng's pair1_pipe_send adds one to the header as the message leaves: a cooked sender's
    message carries 1; a raw (device) sender's header goes on one hop further."""
    codec = sp_open("PAIR1", SP_PAIR1)
    assert codec.initiate() == b"\x00SP\x00\x00\x11\x00\x00"
    cooked = make_pattern("PAIR1")
    _, rest = cooked.prepare_send(Message.of(b"hi"))
    on_wire = cooked.envelope(rest, SP)
    assert codec.send_message(on_wire.frames) == b"\x00" * 7 + b"\x06" + b"\x00\x00\x00\x01hi"
    raw = make_pattern("PAIR1", raw=True)
    _, rest = raw.prepare_send(Message((b"\x00\x00\x00\x03",), (b"hi",)))
    assert raw.envelope(rest, SP) == Message((b"\x00\x00\x00\x04",), (b"hi",))
    for bad in ((), (b"\x00\x00\x00\xff",), (b"\x00\x00\x01\x00",), (b"\x00\x01",),
                (b"\x00\x00\x00\x01", b"\x00\x00\x00\x01")):
        with pytest.raises(LocalProtocolError):
            raw.prepare_send(Message(bad, (b"x",)))
    with pytest.raises(LocalProtocolError):
        cooked.prepare_send(Message.of(b"a", b"b"))  # SP: one body frame
    with pytest.raises(LocalProtocolError):
        cooked.envelope(Message((b"\x00\x00\x00\x00",), (b"x",)), ZMTP)
    assert isinstance(cooked, Pair1)


# -- pairing tables and names --------------------------------------------------------------------

LEGAL_ZMTP = {("PUB", "SUB"), ("PUB", "XSUB"), ("XPUB", "SUB"), ("XPUB", "XSUB"),
              ("PUSH", "PULL"), ("PAIR", "PAIR")}


@pytest.mark.parametrize("a", [*PATTERN_TYPES, "REQ", "REP", "DEALER", "ROUTER"])
@pytest.mark.parametrize("b", PATTERN_TYPES)
def test_zmtp_pairing_table_beyond_reqrep(a: str, b: str) -> None:
    """RFC 37 "Socket-Type compatibility"; everything else is refused at READY."""
    legal = (a, b) in LEGAL_ZMTP or (b, a) in LEGAL_ZMTP
    assert zmtp_legal(a, b) == legal == zmtp_legal(b, a)
    assert (b in ZMTP_PEERS[a]) == legal


def test_sp_pairing_table_beyond_reqrep() -> None:
    legal = {(SP_PUB0, SP_SUB0), (SP_PUSH0, SP_PULL0), (SP_PAIR0, SP_PAIR0), (SP_PAIR1, SP_PAIR1)}
    ids = (0x10, 0x11, 0x20, 0x21, 0x30, 0x31, 0x50, 0x51, 0x62, 0x63, 0x70)
    for a in ids:
        for b in ids:
            expect = (a, b) in legal or (b, a) in legal or {a, b} == {0x30, 0x31}
            assert sp_legal(a, b) == expect, (hex(a), hex(b))
    assert not sp_legal(SP_PAIR0, SP_PAIR1)  # pair1's header: they do not interoperate


@pytest.mark.parametrize(
    ("name", "raw", "canonical", "zmtp", "sp"),
    [
        ("PUB", False, ("PUB", False), "PUB", 0x20), ("pub0", False, ("PUB", False), "PUB", 0x20),
        ("XPUB", False, ("PUB", True), "XPUB", 0x20), ("PUB", True, ("PUB", True), "XPUB", 0x20),
        ("SUB", False, ("SUB", False), "SUB", 0x21), ("xsub", False, ("SUB", True), "XSUB", 0x21),
        ("PUSH", False, ("PUSH", False), "PUSH", 0x50), ("pull0", False, ("PULL", False), "PULL", 0x51),
        ("PAIR", False, ("PAIR", False), "PAIR", 0x10), ("pair0", True, ("PAIR", True), "PAIR", 0x10),
        ("pair1", False, ("PAIR1", False), None, 0x11),
    ],
)
def test_kind_names(name: str, raw: bool, canonical: tuple[str, bool], zmtp: str | None,
                    sp: int) -> None:
    assert canonical_kind(name, raw) == canonical
    if zmtp is not None:
        assert zmtp_socket_type(name, raw) == zmtp
    assert sp_protocol(name) == sp
    assert sp_role(canonical[0]).protocol == sp
