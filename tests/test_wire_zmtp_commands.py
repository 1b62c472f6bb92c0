"""ZMTP commands (gateway.wire.zmtp.commands): READY details, PING/PONG, ERROR, SUBSCRIBE/CANCEL."""

from __future__ import annotations

import pytest
from _zmtp import GREETING, READY_REP, drain, opened, pump, ready, zmtp_codec

from gateway.errors import LocalProtocolError, PairingError, RemoteProtocolError
from gateway.wire.events import HandshakeComplete, PeerError, Ping, Pong, Subscription
from gateway.wire.zmtp import ZmtpCodec

# -- READY details --------------------------------------------------------------------------


def test_property_names_case_insensitive() -> None:
    codec = zmtp_codec("REQ")
    codec.receive_data(GREETING + ready(b"ROUTER", b"me", name=b"sOcKeT-tYpE"))
    ev = codec.next_event()
    assert isinstance(ev, HandshakeComplete)
    assert ev.peer_type == "ROUTER" and ev.identity == b"me"
    assert ev.properties == {"socket-type": b"ROUTER", "identity": b"me"}


def test_extra_properties_kept() -> None:
    body = b"\x05READY\x0bSocket-Type\x00\x00\x00\x03REP\x06X-Name\x00\x00\x00\x02hi"
    codec = zmtp_codec("REQ")
    codec.receive_data(GREETING + bytes((4, len(body))) + body)
    ev = codec.next_event()
    assert isinstance(ev, HandshakeComplete)
    assert ev.properties == {"socket-type": b"REP", "x-name": b"hi"}


@pytest.mark.parametrize(
    "after_greeting",
    [
        b"\x04\x06\x05READY",  # no Socket-Type
        b"\x04\x13\x05READY\x08Identity\x00\x00\x00\x00",  # Identity but no Socket-Type
        b"\x04\x0a\x05READY\x0bSock",  # truncated property
        b"\x00\x05hello",  # data before READY
        b"\x04\x07\x04PING\x00\x00",  # PING before READY
        b"\x05\x06\x05READY",  # command with MORE
        b"\x04\x00",  # empty command
        b"\x04\x02\x09A",  # name longer than the command
    ],
)
def test_bad_handshake(after_greeting: bytes) -> None:
    codec = zmtp_codec("REQ")
    codec.receive_data(GREETING + after_greeting)
    with pytest.raises(RemoteProtocolError):
        codec.next_event()


def test_second_ready_refused() -> None:
    codec = opened()
    codec.receive_data(READY_REP)
    with pytest.raises(RemoteProtocolError):
        codec.next_event()


# -- commands -------------------------------------------------------------------------------


def test_ping_answered_with_pong() -> None:
    codec = opened()
    codec.receive_data(b"\x04\x0a\x04PING\x00\x64abc")
    assert codec.next_event() == Ping(ttl=100, context=b"abc")
    assert codec.data_to_send() == b"\x04\x08\x04PONGabc"
    assert codec.data_to_send() == b""


def test_ping_context_truncated_like_libzmq() -> None:
    codec = opened()
    body = b"\x04PING\x00\x00" + b"c" * 20
    codec.receive_data(bytes((4, len(body))) + body)
    assert codec.next_event() == Ping(ttl=0, context=b"c" * 16)
    assert codec.data_to_send() == b"\x04\x15\x04PONG" + b"c" * 16


def test_ping_roundtrip_between_codecs() -> None:
    a, b = zmtp_codec("REQ"), zmtp_codec("REP")
    pump(a, b)
    b.receive_data(a.ping(10, b"hb"))
    assert b.next_event() == Ping(ttl=10, context=b"hb")
    a.receive_data(b.data_to_send())
    assert a.next_event() == Pong(context=b"hb")


def test_pong_event() -> None:
    codec = opened()
    codec.receive_data(b"\x04\x07\x04PONGxy")
    assert codec.next_event() == Pong(context=b"xy")


# RFC 37 (ZMTP 3.1) "Connection Heartbeating": ping = command-size %d4 "PING" ping-ttl
# ping-context; ping-ttl = 2OCTET (network order, tenths of a second); ping-context = 0*16OCTET;
# pong = command-size %d4 "PONG" ping-context. libzmq's HEARTBEAT_TTL 6553500 ms = 0xFFFF.
@pytest.mark.parametrize(("wire", "ttl", "context", "pong"), [
    ("0407 0450494e47 ffff", 0xFFFF, b"", "0405 04504f4e47"),
    ("0417 0450494e47 0001 " + "41" * 16, 1, b"A" * 16, "0415 04504f4e47" + "41" * 16),
])
def test_ping_pong_bytes_both_ways(wire: str, ttl: int, context: bytes, pong: str) -> None:
    assert opened().ping(ttl, context) == bytes.fromhex(wire)
    peer = opened()
    peer.receive_data(bytes.fromhex(wire))
    assert peer.next_event() == Ping(ttl=ttl, context=context)
    assert peer.data_to_send() == bytes.fromhex(pong)


@pytest.mark.parametrize("ttl", [-1, 0x10000])
def test_ping_ttl_must_fit_16_bits(ttl: int) -> None:
    with pytest.raises(LocalProtocolError):
        opened().ping(ttl)


def test_ping_without_ttl_is_malformed() -> None:
    codec = opened()
    codec.receive_data(b"\x04\x06\x04PING\x00")  # one TTL byte of two
    with pytest.raises(RemoteProtocolError, match="PING"):
        codec.next_event()


@pytest.mark.parametrize("ready_first", [True, False])
def test_error_command(ready_first: bool) -> None:
    codec = opened() if ready_first else zmtp_codec("REQ")
    if not ready_first:
        codec.receive_data(GREETING)
    codec.receive_data(b"\x04\x0e\x05ERROR\x07go away" + b"\x00\x01x")
    assert codec.next_event() == PeerError(reason="go away")
    assert codec.next_event() is None  # the connection is dead


def test_unknown_commands_skipped_subscribe_and_cancel_are_events() -> None:
    """RFC 37 section "The SUBSCRIBE Command" / "The CANCEL Command": name + topic, the topic
    is the rest of the command body (may be empty)."""
    codec = opened("PUB", b"SUB")
    codec.receive_data(b"\x04\x06\x05HELLO" + b"\x04\x0b\x09SUBSCRIBEx" + b"\x00\x02ok"
                       + b"\x04\x0a\x09SUBSCRIBE" + b"\x04\x09\x06CANCELab")
    assert drain(codec) == [Subscription(subscribe=True, topic=b"x"), (b"ok",),
                            Subscription(subscribe=True, topic=b""),
                            Subscription(subscribe=False, topic=b"ab")]


def _opened_with_version(minor: int, kind: str = "SUB", peer: bytes = b"PUB") -> ZmtpCodec:
    codec = zmtp_codec(kind)
    codec.initiate()
    codec.receive_data(GREETING[:11] + bytes((minor,)) + GREETING[12:] + ready(peer))
    [hs] = drain(codec)
    assert isinstance(hs, HandshakeComplete) and hs.version == (3, minor)
    return codec


@pytest.mark.parametrize(
    ("minor", "subscribe", "topic", "wire"),
    [
        # RFC 37 (ZMTP 3.1): SUBSCRIBE / CANCEL commands (flags 0x04, size, name-len, name, topic)
        (1, True, b"a.", b"\x04\x0c\x09SUBSCRIBEa."),
        (1, False, b"a.", b"\x04\x09\x06CANCELa."),
        (1, True, b"", b"\x04\x0a\x09SUBSCRIBE"),
        # RFC 23 (ZMTP 3.0) section "The Publish-Subscribe Pattern": a one-frame message 01|00+topic
        (0, True, b"a.", b"\x00\x03\x01a."),
        (0, False, b"a.", b"\x00\x03\x00a."),
        (0, True, b"", b"\x00\x01\x01"),
    ],
)
def test_subscription_form_follows_the_peers_version(minor: int, subscribe: bool, topic: bytes,
                                                     wire: bytes) -> None:
    codec = _opened_with_version(minor)
    assert codec.subscription_commands == (minor >= 1)
    assert codec.subscription_frame(subscribe, topic) == wire


def test_subscription_before_handshake_refused() -> None:
    with pytest.raises(LocalProtocolError):
        zmtp_codec("SUB").subscription_frame(True, b"a")


@pytest.mark.parametrize(
    ("kind", "raw", "announced"),
    [("PUB", False, b"PUB"), ("PUB", True, b"XPUB"), ("XPUB", False, b"XPUB"),
     ("SUB", False, b"SUB"), ("SUB", True, b"XSUB"), ("PUSH", False, b"PUSH"),
     ("PULL", False, b"PULL"), ("PAIR", False, b"PAIR")],
)
def test_ready_of_the_new_socket_types(kind: str, raw: bool, announced: bytes) -> None:
    """READY carries the Socket-Type (RFC 37 "The READY Command"), no Identity for these."""
    codec = zmtp_codec(kind, raw)
    assert codec.ready_command() == ready(announced)


def test_command_inside_multipart_refused() -> None:
    codec = opened()
    codec.receive_data(b"\x01\x01a" + b"\x04\x05\x04PONG")
    with pytest.raises(RemoteProtocolError):
        codec.next_event()


def test_a_ping_flood_leaves_one_pong_pending() -> None:
    """Finding 4: libzmq's engine keeps one pending PONG (zmtp_engine.cpp); the codec too: a
    later PING's PONG replaces one not yet taken, and the engine can drop it (the peer does
    not read)."""
    codec = opened()
    for i in range(1000):
        codec.receive_data(b"\x04\x07\x04PING\x00\x00" if i % 2 else
                           b"\x04\x09\x04PING\x00\x00ab")
        assert isinstance(codec.next_event(), Ping)
    assert codec.data_to_send() == b"\x04\x05\x04PONG"  # the last PING's, once
    assert codec.data_to_send() == b""
    codec.receive_data(b"\x04\x09\x04PING\x00\x00ab")
    codec.next_event()
    codec.discard_pong()
    assert codec.data_to_send() == b""


def test_a_huge_socket_type_is_cut_in_the_error() -> None:
    """Finding 3: what a peer announces is cut before it reaches a log line."""
    codec = zmtp_codec("REQ")
    codec.initiate()
    codec.receive_data(GREETING + b"\x06" + (6 + 16 + 60000).to_bytes(8, "big") + b"\x05READY"
                       + b"\x0bSocket-Type" + (60000).to_bytes(4, "big") + b"Z" * 60000)
    with pytest.raises(PairingError) as info:
        codec.next_event()
    assert len(str(info.value)) < 200 and len(info.value.theirs) < 100
    assert "60000 bytes" in info.value.theirs
