"""ZmtpCodec: exact bytes, handshake, pairing, commands, limits, properties, libzmq interop."""

from __future__ import annotations

import itertools
import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.engine.codecs import zmtp_role
from gateway.errors import (
    LocalProtocolError,
    MechanismError,
    MessageTooLarge,
    PairingError,
    RemoteProtocolError,
    VersionError,
    WrongWireError,
)
from gateway.patterns import pairing
from gateway.testing.codec_checks import chunked, feed_garbage, same_in_batches
from gateway.wire.events import HandshakeComplete, PeerError, Ping, Pong, Subscription
from gateway.wire.zmtp import ZmtpCodec, ZmtpRole

GREETING = (
    b"\xff" + b"\x00" * 8 + b"\x7f"  # signature
    + b"\x03\x01"  # version 3.1
    + b"NULL" + b"\x00" * 16  # mechanism, padded to 20
    + b"\x00"  # as-server
    + b"\x00" * 31  # filler
)  # fmt: skip
# What libzmq 4.3.5 sends (captured): padding ends in 01 (its routing id length + 1).
LIBZMQ_GREETING = bytes.fromhex("ff00000000000000017f03014e554c4c") + b"\x00" * 48
#: RFC 37 "Version Negotiation": what goes out first (signature + major), and the rest of the
#: greeting (minor, mechanism, as-server, filler), sent once the peer's major is known.
SIGNATURE = LIBZMQ_GREETING[:11]
REST = LIBZMQ_GREETING[11:]

READY_REP = b"\x04\x19\x05READY\x0bSocket-Type\x00\x00\x00\x03REP"
READY_REQ = b"\x04\x26\x05READY\x0bSocket-Type\x00\x00\x00\x03REQ\x08Identity\x00\x00\x00\x00"


def ready(socket_type: bytes, identity: bytes | None = None, name: bytes = b"Socket-Type") -> bytes:
    props = bytes((len(name),)) + name + len(socket_type).to_bytes(4, "big") + socket_type
    if identity is not None:
        props += b"\x08Identity" + len(identity).to_bytes(4, "big") + identity
    body = b"\x05READY" + props
    return bytes((0x04, len(body))) + body


def zmtp_codec(kind: str, raw: bool = False, **kw: Any) -> ZmtpCodec:
    """A codec with the identity the engine gives a native ``kind`` socket."""
    return ZmtpCodec(zmtp_role(kind, raw), **kw)


def drain(codec: ZmtpCodec) -> list:
    events = []
    while (ev := codec.next_event()) is not None:
        events.append(ev)
    return events


def opened(kind: str = "REQ", peer: bytes = b"REP", **kw) -> ZmtpCodec:
    """A codec past the handshake with a fake peer of type ``peer``."""
    codec = zmtp_codec(kind, **kw)
    codec.initiate()
    codec.receive_data(GREETING + ready(peer))
    [hs] = drain(codec)
    assert isinstance(hs, HandshakeComplete)
    codec.data_to_send()
    return codec


def full_greeting(codec: ZmtpCodec) -> bytes:
    """The whole 64-byte greeting ``codec`` sends to a 3.x peer (it is consumed: use a twin)."""
    first = codec.initiate()
    codec.receive_data(GREETING[:11])
    assert codec.next_event() is None
    return first + codec.data_to_send()


def pump(a: ZmtpCodec, b: ZmtpCodec) -> tuple[list, list]:
    """Run the handshake between two in-memory codecs; return each side's events."""
    ea: list = []
    eb: list = []
    b.receive_data(a.initiate())
    a.receive_data(b.initiate())
    for _ in range(4):
        eb += drain(b)
        ea += drain(a)
        b.receive_data(a.data_to_send())
        a.receive_data(b.data_to_send())
    return ea, eb


# -- exact bytes ----------------------------------------------------------------------------


def test_greeting_bytes() -> None:
    """RFC 37 "Version Negotiation": the signature and major version go first (11 bytes), the
    rest once the peer's major version says 3.x; together they are libzmq's greeting."""
    codec = zmtp_codec("REQ")
    first = codec.initiate()
    assert first == bytes.fromhex("ff 0000000000000001 7f 03") == SIGNATURE
    assert codec.data_to_send() == b""  # nothing more before the peer's version is known
    codec.receive_data(GREETING[:10])
    assert codec.next_event() is None and codec.data_to_send() == b""
    codec.receive_data(GREETING[10:11])
    assert codec.next_event() is None
    rest = codec.data_to_send()
    assert rest == bytes.fromhex("01 4e554c4c" + "00" * 16 + "00" + "00" * 31) == REST
    assert first + rest == LIBZMQ_GREETING and len(first + rest) == 64
    assert codec.data_to_send() == b""
    codec.receive_data(GREETING[11:])
    assert codec.next_event() is None
    assert codec.data_to_send() == READY_REQ  # the rest is sent once only


@pytest.mark.parametrize(("identity", "pad"), [(b"", 1), (b"abc", 4), (b"x" * 255, 256)])
def test_signature_padding_is_identity_length(identity: bytes, pad: int) -> None:
    """RFC 37 "Detecting ZMTP 1.0 and 2.0 Peers": the padding is the identity size + 1, 8 octets
    in network byte order (libzmq's ``plug_internal``)."""
    first = zmtp_codec("DEALER", identity=identity).initiate()
    assert first == b"\xff" + pad.to_bytes(8, "big") + b"\x7f\x03"


def test_greeting_as_server_byte() -> None:
    assert full_greeting(zmtp_codec("REP", as_server=True))[32] == 1


@pytest.mark.parametrize(
    ("kind", "raw", "identity", "expected"),
    [
        ("REQ", False, b"", READY_REQ),
        ("REP", False, b"", READY_REP),
        ("REP", False, b"ignored", READY_REP),  # libzmq: no Identity for REP
        (
            "DEALER",
            False,
            b"",
            bytes.fromhex("0429055245414459") + b"\x0bSocket-Type\x00\x00\x00\x06DEALER"
            b"\x08Identity\x00\x00\x00\x00",
        ),
        (
            "ROUTER",
            False,
            b"ab",
            b"\x04\x2b\x05READY\x0bSocket-Type\x00\x00\x00\x06ROUTER\x08Identity\x00\x00\x00\x02ab",
        ),
        ("REQ", True, b"", ready(b"DEALER", b"")),  # raw REQ announces DEALER
        ("REP", True, b"", ready(b"ROUTER", b"")),  # raw REP announces ROUTER
    ],
)
def test_ready_bytes(kind: str, raw: bool, identity: bytes, expected: bytes) -> None:
    codec = zmtp_codec(kind, raw, identity=identity)
    codec.initiate()
    assert codec.data_to_send() == b""  # READY waits for the peer's greeting
    codec.receive_data(GREETING)
    assert codec.next_event() is None
    assert codec.data_to_send() == REST + expected
    assert codec.data_to_send() == b""


@pytest.mark.parametrize(
    ("parts", "wire"),
    [
        ((b"",), "0000"),
        ((b"hello",), "000568656c6c6f"),
        ((b"", b"hello"), "0100 000568656c6c6f"),
        ((b"a", b"b", b"c"), "010161 010162000163"),
        ((b"a", b"", b"x" * 256), "010161 0100 020000000000000100" + "78" * 256),
        ((b"a", b"b", b"", b"c"), "010161 010162 0100 000163"),
        ((b"a", b"b", b"", b"x" * 256), "010161 010162 0100 020000000000000100" + "78" * 256),
        ((b"a", b"b", b"c", b"d", b""), "010161 010162 010163 010164 0000"),
        ((b"x" * 255,), "00ff" + "78" * 255),
        ((b"x" * 256,), "020000000000000100" + "78" * 256),
        ((b"x" * 256, b"y"), "030000000000000100" + "78" * 256 + "000179"),
    ],
)
def test_frames(parts: tuple[bytes, ...], wire: str) -> None:
    data = bytes.fromhex(wire)
    assert opened().send_message(parts) == data
    rx = opened()
    rx.receive_data(data)
    msg = rx.next_event()
    assert msg == parts
    assert all(type(p) is bytes for p in msg)
    assert rx.next_event() is None


def test_long_form_small_frame_accepted() -> None:
    rx = opened()
    rx.receive_data(bytes.fromhex("020000000000000003") + b"abc")
    assert rx.next_event() == (b"abc",)


@pytest.mark.parametrize(
    ("ttl", "context", "wire"),
    [
        (0, b"", "0407 0450494e470000"),
        (300, b"ctx", "040a 0450494e47012c 637478"),
    ],
)
def test_ping_bytes(ttl: int, context: bytes, wire: str) -> None:
    assert opened().ping(ttl, context) == bytes.fromhex(wire)


def test_ping_context_too_long() -> None:
    with pytest.raises(LocalProtocolError):
        opened().ping(0, b"x" * 17)


# -- greeting parsing -----------------------------------------------------------------------


def test_staged_greeting_like_libzmq() -> None:
    codec = zmtp_codec("REQ")
    codec.initiate()
    codec.receive_data(LIBZMQ_GREETING[:10])
    assert codec.next_event() is None
    codec.receive_data(LIBZMQ_GREETING[10:11])
    assert codec.next_event() is None
    assert codec.data_to_send() == REST
    codec.receive_data(LIBZMQ_GREETING[11:])
    assert codec.next_event() is None
    assert codec.data_to_send() == READY_REQ
    codec.receive_data(READY_REP)
    ev = codec.next_event()
    assert ev == HandshakeComplete(
        peer_type="REP", identity=b"", version=(3, 1), properties={"socket-type": b"REP"}
    )
    assert codec.handshake_done and codec.peer_type == "REP"


def test_byte_by_byte() -> None:
    codec = zmtp_codec("DEALER")
    codec.initiate()
    stream = (
        LIBZMQ_GREETING
        + ready(b"ROUTER", b"id")
        + b"\x01\x00\x00\x02hi"
        + b"\x04\x07\x04PING\x00\x05"
        + b"\x02"
        + (300).to_bytes(8, "big")
        + b"z" * 300
    )
    events = []
    for i in range(len(stream)):
        codec.receive_data(stream[i : i + 1])
        events += drain(codec)
    assert events == [
        HandshakeComplete(
            peer_type="ROUTER",
            identity=b"id",
            version=(3, 1),
            properties={"socket-type": b"ROUTER", "identity": b"id"},
        ),
        (b"", b"hi"),
        Ping(ttl=5, context=b""),
        (b"z" * 300,),
    ]
    assert codec.peer_identity == b"id"
    assert codec.data_to_send() == REST + ready(b"DEALER", b"") + b"\x04\x05\x04PONG"


@pytest.mark.parametrize("version", [b"\x03\x00", b"\x03\x01", b"\x03\x07", b"\x04\x00"])
def test_version_accepted(version: bytes) -> None:
    codec = zmtp_codec("REQ")
    codec.receive_data(LIBZMQ_GREETING[:10] + version + LIBZMQ_GREETING[12:] + READY_REP)
    ev = codec.next_event()
    assert isinstance(ev, HandshakeComplete)
    assert ev.version == (version[0], version[1])


@pytest.mark.parametrize(
    ("data", "match", "error"),
    [
        # ZMTP 1.0, versioned (revision 0): refused at byte 11
        (b"\xff" + b"\x00" * 8 + b"\x7f\x00", "1.0", VersionError),
        (b"\x01\x00", "1.0", VersionError),  # ZMTP 1.0 short identity frame (RFC 13)
        (b"\xff" + b"\x00" * 7 + b"\x01\x7e", "1.0", VersionError),  # byte 9 bit 0 clear
        (b"\xfe\x01", "not a ZMTP greeting", RemoteProtocolError),
        (b"GET / HTTP/1.1\r\n", "not a ZMTP greeting", RemoteProtocolError),
        (b"\x00\x01", "not a ZMTP greeting", RemoteProtocolError),  # 1.0 length 0 is invalid
        (b"\x00SP\x00\x00\x30\x00\x00", "SP", WrongWireError),  # an nng req0 peer
        (GREETING[:12] + b"PLAIN".ljust(20, b"\x00") + GREETING[32:], "PLAIN", MechanismError),
        (GREETING[:12] + b"CURVE".ljust(20, b"\x00") + GREETING[32:], "CURVE", MechanismError),
    ],
)
def test_bad_greeting(data: bytes, match: str, error: type[Exception]) -> None:
    codec = zmtp_codec("REQ")
    codec.receive_data(data)
    with pytest.raises(error, match=match) as info:
        codec.next_event()
    assert isinstance(info.value, RemoteProtocolError)
    with pytest.raises(RemoteProtocolError):  # the error sticks
        codec.next_event()


def test_mechanism_error_says_what_is_missing() -> None:
    codec = zmtp_codec("REP")
    codec.receive_data(GREETING[:12] + b"CURVE".ljust(20, b"\x00") + b"\x01" + GREETING[33:])
    with pytest.raises(MechanismError) as info:
        codec.next_event()
    assert str(info.value) == ("the peer wants CURVE security; this endpoint has no security "
                               "configured (NULL)")
    assert info.value.peer_mechanism == "CURVE" and info.value.handshake_reason == "mechanism"


@pytest.mark.parametrize(("data", "ready"), [(b"\x01", False), (b"\x00S", False),
                                             (b"\xff" + b"\x00" * 8, False)])
def test_greeting_needs_more(data: bytes, ready: bool) -> None:
    """Too few bytes to tell: no verdict yet, no bytes queued."""
    codec = zmtp_codec("REQ")
    codec.receive_data(data)
    assert codec.next_event() is None and codec.data_to_send() == b""


@pytest.mark.parametrize("padding", [b"\x00" * 8, b"\x00" * 7 + b"\x01", b"\xff" * 8])
def test_padding_not_validated(padding: bytes) -> None:
    codec = zmtp_codec("REQ")
    codec.receive_data(b"\xff" + padding + GREETING[9:] + READY_REP)
    assert isinstance(codec.next_event(), HandshakeComplete)


# -- pairing --------------------------------------------------------------------------------

PAIRS = list(itertools.product(pairing.SOCKET_TYPES, repeat=2))
LEGAL = [(a, b) for a, b in PAIRS if pairing.zmtp_legal(a, b)]
ILLEGAL = [(a, b) for a, b in PAIRS if not pairing.zmtp_legal(a, b)]


def test_pairing_table_shape() -> None:
    assert len(LEGAL) == 10 and len(ILLEGAL) == 6
    assert {("REQ", "REQ"), ("REQ", "DEALER"), ("REP", "REP"), ("REP", "ROUTER")} <= set(ILLEGAL)


@pytest.mark.parametrize(("a", "b"), LEGAL)
def test_legal_pair(a: str, b: str) -> None:
    ca, cb = zmtp_codec(a, identity=b"A"), zmtp_codec(b, identity=b"B")
    ea, eb = pump(ca, cb)
    assert ea == [
        HandshakeComplete(
            peer_type=b,
            identity=b"B" if b != "REP" else b"",
            properties={"socket-type": b.encode()} | ({"identity": b"B"} if b != "REP" else {}),
        )
    ]
    assert isinstance(eb[0], HandshakeComplete) and eb[0].peer_type == a
    assert ca.handshake_done and cb.handshake_done
    cb.receive_data(ca.send_message((b"", b"ping")))
    assert cb.next_event() == (b"", b"ping")


@pytest.mark.parametrize(("a", "b"), ILLEGAL)
def test_illegal_pair(a: str, b: str) -> None:
    ca, cb = zmtp_codec(a), zmtp_codec(b)
    cb.receive_data(ca.initiate())
    ca.receive_data(cb.initiate())
    for _ in range(2):  # the rest of the greeting, then READY
        assert ca.next_event() is None and cb.next_event() is None
        ca.receive_data(cb.data_to_send())
        cb.receive_data(ca.data_to_send())
    with pytest.raises(PairingError):
        ca.next_event()
    with pytest.raises(PairingError):
        cb.next_event()
    assert not ca.handshake_done
    with pytest.raises(LocalProtocolError):
        ca.send_message((b"x",))


@pytest.mark.parametrize(
    ("kind", "raw", "peer", "ok"),
    [
        ("REQ", True, b"REQ", False),  # raw REQ announces DEALER, which refuses REQ
        ("REQ", True, b"ROUTER", True),
        ("REQ", True, b"DEALER", True),
        ("REP", True, b"REQ", True),
        ("REP", True, b"REP", False),
        ("REP", True, b"ROUTER", True),
    ],
)
def test_raw_pairing(kind: str, raw: bool, peer: bytes, ok: bool) -> None:
    codec = zmtp_codec(kind, raw)
    codec.receive_data(GREETING + ready(peer))
    if ok:
        assert isinstance(codec.next_event(), HandshakeComplete)
    else:
        with pytest.raises(PairingError):
            codec.next_event()


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


# -- limits and bad frames ------------------------------------------------------------------


@pytest.mark.parametrize("flags", [0x08, 0x10, 0x20, 0x40, 0x80, 0xF8, 0x09])
def test_reserved_flag_bits(flags: int) -> None:
    codec = opened()
    codec.receive_data(bytes((flags, 0)))
    with pytest.raises(RemoteProtocolError, match="reserved"):
        codec.next_event()


def test_oversize_single_frame_refused_at_header() -> None:
    codec = opened(max_message_size=1000)
    codec.receive_data(b"\x02" + (1001).to_bytes(8, "big"))  # no payload yet
    with pytest.raises(MessageTooLarge):
        codec.next_event()


def test_oversize_total_refused() -> None:
    codec = opened(max_message_size=300)
    codec.receive_data(b"\x01\xc8" + b"a" * 200)
    assert codec.next_event() is None
    codec.receive_data(b"\x00\xc8")
    with pytest.raises(MessageTooLarge):
        codec.next_event()


def test_exact_limit_accepted() -> None:
    codec = opened(max_message_size=300)
    codec.receive_data(b"\x01\xc8" + b"a" * 200 + b"\x00\x64" + b"b" * 100)
    assert codec.next_event() == (b"a" * 200, b"b" * 100)


def test_oversize_command_refused() -> None:
    codec = opened(max_message_size=100)
    codec.receive_data(b"\x06" + (101).to_bytes(8, "big"))
    with pytest.raises(MessageTooLarge):
        codec.next_event()


def test_huge_long_size() -> None:
    codec = opened()
    codec.receive_data(b"\x02\xff\xff\xff\xff\xff\xff\xff\xff")
    with pytest.raises(MessageTooLarge):
        codec.next_event()


def test_send_errors() -> None:
    with pytest.raises(LocalProtocolError):
        zmtp_codec("REQ").send_message((b"x",))
    with pytest.raises(LocalProtocolError):
        opened().send_message(())


def test_unknown_kind() -> None:
    with pytest.raises(ValueError):
        zmtp_role("STREAM", False)
    with pytest.raises(ValueError):
        zmtp_role("PAIR1", False)  # SP's pair1 has no ZMTP socket type


def test_identity_is_data() -> None:
    """The codec announces and checks what its role says, whatever the name."""
    codec = ZmtpCodec(ZmtpRole("REP", frozenset({"DEALER"})))  # no Identity property
    codec.receive_data(GREETING)
    assert codec.next_event() is None
    assert codec.data_to_send() == REST + ready(b"REP")
    codec.receive_data(ready(b"REQ", b""))
    with pytest.raises(PairingError):
        codec.next_event()
    codec = ZmtpCodec(ZmtpRole("REP", frozenset({"DEALER"})))
    codec.receive_data(GREETING + ready(b"DEALER", b""))
    assert isinstance(codec.next_event(), HandshakeComplete)


def test_data_to_send_any_time() -> None:
    codec = zmtp_codec("REQ")
    assert codec.data_to_send() == b""
    assert codec.initiate() == SIGNATURE
    assert codec.data_to_send() == b""


# -- properties -----------------------------------------------------------------------------

frames = st.lists(st.binary(max_size=300), min_size=1, max_size=6).map(tuple)


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(frames, min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=20),
    pings=st.booleans(),
)
def test_roundtrip_random_chunks(
    messages: list[tuple[bytes, ...]], cuts: list[int], pings: bool
) -> None:
    a, b = zmtp_codec("DEALER"), zmtp_codec("ROUTER", identity=b"r")
    stream = a.initiate()
    b.initiate()
    b_greeting = full_greeting(zmtp_codec("ROUTER", identity=b"r"))  # what b sends a 3.x peer
    a.receive_data(b_greeting)
    assert a.next_event() is None
    stream += a.data_to_send()  # READY
    wire = b""
    # b's handshake must finish before a may send, so build the stream after a's handshake.
    a.receive_data(b.ready_command())
    assert isinstance(a.next_event(), HandshakeComplete)
    for m in messages:
        wire += a.send_message(m)
        if pings:
            wire += a.ping(1, b"c")
    got: list = []
    for chunk in chunked(stream + wire, cuts):
        b.receive_data(chunk)
        got += drain(b)
    assert isinstance(got[0], HandshakeComplete) and got[0].peer_type == "DEALER"
    msgs = [e for e in got[1:] if isinstance(e, tuple)]
    assert msgs == messages
    assert all(type(f) is bytes for m in msgs for f in m)
    assert len(got) == 1 + len(messages) * (2 if pings else 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=6))
def test_garbage_without_handshake(chunks: list[bytes]) -> None:
    feed_garbage(zmtp_codec("REQ"), chunks)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=6), st.sampled_from(pairing.SOCKET_TYPES))
def test_garbage_after_handshake(chunks: list[bytes], kind: str) -> None:
    peer = next(iter(sorted(pairing.ZMTP_PEERS[kind])))
    codec = zmtp_codec(kind, max_message_size=1000)
    codec.receive_data(GREETING + ready(peer.encode(), b""))
    assert isinstance(codec.next_event(), HandshakeComplete)
    feed_garbage(codec, chunks)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_garbage_after_greeting(data: bytes) -> None:
    codec = zmtp_codec("REQ", max_message_size=1000)
    feed_garbage(codec, [GREETING, data])


# -- interop with libzmq --------------------------------------------------------------------


def _recv_event(sock: socket.socket, codec: ZmtpCodec):
    while True:
        ev = codec.next_event()
        out = codec.data_to_send()
        if out:
            sock.sendall(out)
        if ev is not None:
            return ev
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("peer closed")
        codec.receive_data(data)


def test_interop_pyzmq_rep() -> None:
    zmq = pytest.importorskip("zmq")
    ctx = zmq.Context()
    rep = ctx.socket(zmq.REP)
    rep.linger = 0
    rep.rcvtimeo = rep.sndtimeo = 5000
    try:
        port = rep.bind_to_random_port("tcp://127.0.0.1")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.settimeout(5)
            codec = zmtp_codec("REQ")
            sock.sendall(codec.initiate())
            hs = _recv_event(sock, codec)
            assert isinstance(hs, HandshakeComplete)
            assert hs.peer_type == "REP" and hs.version == (3, 1)
            sock.sendall(codec.send_message((b"", b"hello")))
            assert rep.recv_multipart() == [b"hello"]
            rep.send_multipart([b"wor", b"ld"])
            assert _recv_event(sock, codec) == (b"", b"wor", b"ld")
            big = b"B" * 70_000
            sock.sendall(codec.send_message((b"", big)))
            assert rep.recv() == big
            rep.send(big[::-1])
            assert _recv_event(sock, codec) == (b"", big[::-1])
    finally:
        rep.close()
        ctx.term()


def test_interop_pyzmq_refuses_illegal_pair() -> None:
    zmq = pytest.importorskip("zmq")
    ctx = zmq.Context()
    rep = ctx.socket(zmq.REP)
    rep.linger = 0
    try:
        port = rep.bind_to_random_port("tcp://127.0.0.1")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.settimeout(5)
            codec = zmtp_codec("REP")  # REP-REP: both sides refuse at READY
            sock.sendall(codec.initiate())
            with pytest.raises((PairingError, ConnectionError)):
                _recv_event(sock, codec)
    finally:
        rep.close()
        ctx.term()


@pytest.mark.parametrize("kind", pairing.SOCKET_TYPES)
def test_interop_ready_matches_libzmq(kind: str) -> None:
    """libzmq's READY for each type equals ours, byte for byte."""
    zmq = pytest.importorskip("zmq")
    ctx = zmq.Context()
    zs = ctx.socket(getattr(zmq, kind))
    zs.linger = 0
    try:
        with socket.socket() as ls:
            ls.bind(("127.0.0.1", 0))
            ls.listen(1)
            ls.settimeout(5)
            zs.connect(f"tcp://127.0.0.1:{ls.getsockname()[1]}")
            conn, _ = ls.accept()
            with conn:
                conn.settimeout(5)
                peer = next(iter(sorted(pairing.ZMTP_PEERS[kind])))
                codec = zmtp_codec(peer)
                conn.sendall(full_greeting(zmtp_codec(peer)))
                data = b""
                expected = zmtp_codec(kind).ready_command()
                while len(data) < 64 + len(expected):
                    chunk = conn.recv(4096)
                    assert chunk, "libzmq closed"
                    data += chunk
                assert data[:64] == LIBZMQ_GREETING
                assert data[64:] == expected
                codec.receive_data(data)
                hs = codec.next_event()
                assert isinstance(hs, HandshakeComplete) and hs.peer_type == kind
    finally:
        zs.close()
        ctx.term()


# -- partial: an incomplete message is buffered (the engine's per-message deadline) -----------


@pytest.mark.parametrize(
    ("chunks", "partial"),
    [
        ([], False),
        ([b"\x00"], True),  # one byte of a frame header
        ([b"\x02\x00\x00\x00\x00\x00\x10"], True),  # part of a long header
        ([b"\x02" + (1 << 20).to_bytes(8, "big") + b"x" * 1000], True),  # half a 1 MiB frame
        ([b"\x00\x03abc"], False),  # one whole message
        ([b"\x00\x03abc\x00\x02d"], True),  # a whole message, then part of the next
        ([b"\x01\x03one"], True),  # a whole frame with MORE: the message is not complete
        ([b"\x01\x03one\x01\x03two"], True),
        ([b"\x01\x03one", b"\x00\x03two"], False),  # its last frame came
        ([b"\x04\x06\x04PI"], True),  # part of a command
        ([b"\x04\x07\x04PING\x00\x00"], False),  # a whole PING
    ],
)
def test_partial(chunks: list[bytes], partial: bool) -> None:
    codec = opened("DEALER", b"ROUTER")
    assert codec.partial is False
    for chunk in chunks:
        codec.receive_data(chunk)
        drain(codec)
    assert codec.partial is partial


def test_partial_before_the_handshake() -> None:
    codec = zmtp_codec("REQ")
    codec.receive_data(GREETING[:10])
    assert codec.next_event() is None and codec.partial
    codec.receive_data(GREETING[10:] + ready(b"REP"))
    assert isinstance(codec.next_event(), HandshakeComplete) and not codec.partial


# -- ZMTP 2.0 peers (RFC 15; RFC 37 "Backwards Interoperability") -----------------------------

#: RFC 15 greeting of a ZMTP 2.0 peer: signature, revision 0x01, socket-type byte.
def v2_greeting(socket_type: int, padding: bytes = b"\x00" * 8, sig9: int = 0x7F) -> bytes:
    return b"\xff" + padding + bytes((sig9, 0x01, socket_type))


def test_netmq_v2_vector() -> None:
    """NetMQ ``ZMTPTests.V2Test``: a raw ZMTP 2.0 DEALER against a DEALER. It sends the 12-byte
    greeting, an empty identity (``00 00``) and a one-byte message (``00 01 05``); we answer
    major 3 and our socket-type byte (``03 05``), our identity ``00 00``, then ``00 01 06``."""
    codec = zmtp_codec("DEALER")
    assert codec.initiate()[:10] == b"\xff" + b"\x00" * 7 + b"\x01\x7f"  # "preamble"
    codec.receive_data(v2_greeting(5))
    codec.receive_data(b"\x00\x00")
    codec.receive_data(b"\x00\x01\x05")
    hs = codec.next_event()
    assert hs == HandshakeComplete(peer_type="DEALER", identity=b"", version=(2, 0),
                                   properties={"socket-type": b"DEALER"})
    assert codec.initiate()[10:] + codec.data_to_send() == b"\x03\x05" + b"\x00\x00"
    assert codec.next_event() == (b"\x05",)
    assert codec.send_message((b"\x06",)) == b"\x00\x01\x06"
    assert codec.peer_version == (2, 0) and not codec.commands


@pytest.mark.parametrize(
    ("frame", "payload"),
    [
        (b"\x00\x07abcdefg", b"abcdefg"),  # JeroMQ V2ProtocolTest.testProtocolVersion2short
        (b"\x02" + (8).to_bytes(8, "big") + b"abcdefgh", b"abcdefgh"),  # ...2long
    ],
)
def test_jeromq_v2_protocol_vectors(frame: bytes, payload: bytes) -> None:
    """JeroMQ ``V2ProtocolTest``: signature with byte 9 = 0x01 (only bit 0 counts), revision 1,
    socket type, empty identity ``00 00``, one short or long frame. JeroMQ's test peer is a PUSH
    against a PULL; our sockets are request-reply, so the type byte is DEALER's (5)."""
    codec = zmtp_codec("ROUTER")
    codec.receive_data(v2_greeting(5, sig9=0x01) + b"\x00\x00" + frame)
    hs = codec.next_event()
    assert isinstance(hs, HandshakeComplete) and hs.version == (2, 0)
    assert codec.next_event() == (payload,)


def test_jeromq_v1_protocol_vector_refused() -> None:
    """JeroMQ ``V1ProtocolTest``: revision 0 is ZMTP 1.0 framing, which this end does not
    speak (RFC 37 lets an implementation detect 2.0 peers only)."""
    codec = zmtp_codec("ROUTER")
    codec.receive_data(b"\xff" + b"\x00" * 8 + b"\x01" + b"\x00\x05" + b"\x01\x00")
    with pytest.raises(VersionError) as info:
        codec.next_event()
    assert info.value.peer_version == "1.0" and info.value.handshake_reason == "zmtp-version"


@pytest.mark.parametrize("vector", [
    b"\x01\x00" + b"\x08\x00abcdefg",  # JeroMQ V0ProtocolTest.testProtocolVersion0short
    b"\xff" + b"\x00" * 7 + b"\x09" + b"\x00identity",  # ...0long
])
def test_jeromq_v0_unversioned_refused(vector: bytes) -> None:
    codec = zmtp_codec("ROUTER")
    codec.receive_data(vector)
    with pytest.raises(VersionError, match="1.0"):
        codec.next_event()


@pytest.mark.parametrize(("kind", "identity", "out"), [
    ("REQ", b"", b"\x03\x00\x00"),
    ("REP", b"", b"\x04\x00\x00"),
    ("DEALER", b"me", b"\x05\x00\x02me"),
    ("ROUTER", b"", b"\x06\x00\x00"),
])
def test_v2_answer_bytes(kind: str, identity: bytes, out: bytes) -> None:
    """To a 2.0 peer: socket-type byte (RFC 15 table), then the identity frame ``00 len id``
    (libzmq sends one for every socket type)."""
    codec = zmtp_codec(kind, identity=identity)
    first = codec.initiate()
    assert first[10:] == b"\x03"  # libzmq 4 answers with major 3, then the type byte
    peer = next(iter(sorted(pairing.ZMTP_PEERS[kind])))
    codec.receive_data(v2_greeting(ZMTP2_CODES[peer])[:11])
    assert codec.next_event() is None
    assert codec.data_to_send() == out


ZMTP2_CODES = {"REQ": 3, "REP": 4, "DEALER": 5, "ROUTER": 6}


def test_v2_socket_type_table() -> None:
    from gateway.wire.zmtp import ZMTP2_SOCKET_TYPES

    assert ZMTP2_SOCKET_TYPES == {0: "PAIR", 1: "PUB", 2: "SUB", 3: "REQ", 4: "REP", 5: "DEALER",
                                  6: "ROUTER", 7: "PULL", 8: "PUSH",  # RFC 15 grammar
                                  9: "XPUB", 10: "XSUB"}  # libzmq's ZMQ_XPUB, ZMQ_XSUB


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_v2_pairing(a: str, b: str) -> None:
    """RFC 15 "Socket Compatibility" on the 2.0 socket-type byte, the same table as READY."""
    codec = zmtp_codec(a)
    codec.receive_data(v2_greeting(ZMTP2_CODES[b]) + b"\x00\x01z")
    if pairing.zmtp_legal(a, b):
        ev = codec.next_event()
        assert isinstance(ev, HandshakeComplete) and ev.peer_type == b and ev.identity == b"z"
    else:
        with pytest.raises(PairingError, match=f"{a} cannot talk to {b}") as info:
            codec.next_event()
        assert info.value.handshake_reason == "pairing"


@pytest.mark.parametrize("code", [0, 1, 2, 7, 8, 9, 0xFF])
def test_v2_other_socket_types_refused(code: int) -> None:
    codec = zmtp_codec("ROUTER")
    codec.receive_data(v2_greeting(code) + b"\x00\x00")
    with pytest.raises(PairingError):
        codec.next_event()


def test_v2_revision_2_is_2_0() -> None:
    """RFC 37: "If the peer version number is 1 or 2, the peer is using ZMTP 2.0"."""
    codec = zmtp_codec("REP")
    codec.receive_data(b"\xff" + b"\x00" * 8 + b"\x7f\x02\x03" + b"\x00\x00")
    ev = codec.next_event()
    assert isinstance(ev, HandshakeComplete) and ev.version == (2, 0)


def test_v2_framing() -> None:
    """RFC 15 framing: 0x01 MORE, 0x02 LONG; bits 2-7 reserved, so no COMMAND (and no PING)."""
    codec = zmtp_codec("DEALER")
    codec.receive_data(v2_greeting(6) + b"\x02" + (2).to_bytes(8, "big") + b"id")
    ev = codec.next_event()
    assert isinstance(ev, HandshakeComplete) and ev.identity == b"id"
    codec.receive_data(b"\x01\x00" + b"\x03" + (3).to_bytes(8, "big") + b"abc" + b"\x00\x01z")
    assert codec.next_event() == (b"", b"abc", b"z")
    assert codec.send_message((b"", b"x" * 256)) == b"\x01\x00\x02" + (256).to_bytes(8, "big") + b"x" * 256
    with pytest.raises(LocalProtocolError):
        codec.ping()
    codec.receive_data(b"\x04\x07\x04PING\x00\x00")  # a 3.x command is garbage on 2.0
    with pytest.raises(RemoteProtocolError, match="reserved"):
        codec.next_event()


@pytest.mark.parametrize("identity_frame", [
    b"\x01\x00",  # MORE on the identity
    b"\x04\x00",  # a command flag
    b"\x02" + (256).to_bytes(8, "big"),  # longer than a routing id may be
])
def test_v2_bad_identity(identity_frame: bytes) -> None:
    codec = zmtp_codec("ROUTER")
    codec.receive_data(v2_greeting(5) + identity_frame)
    with pytest.raises(RemoteProtocolError):
        codec.next_event()


def test_v2_byte_by_byte() -> None:
    stream = v2_greeting(3) + b"\x00\x02id" + b"\x01\x00\x00\x05hello"
    codec = zmtp_codec("ROUTER")
    codec.initiate()
    events: list = []
    for i in range(len(stream)):
        codec.receive_data(stream[i : i + 1])
        events += drain(codec)
    assert events == [HandshakeComplete(peer_type="REQ", identity=b"id", version=(2, 0),
                                        properties={"socket-type": b"REQ", "identity": b"id"}),
                      (b"", b"hello")]
    assert codec.data_to_send() == b"\x06\x00\x00"


def test_downgrade_refused_with_security() -> None:
    """RFC 37: with a mechanism other than NULL, a 1.0 or 2.0 peer is closed at once. No
    mechanism exists yet; ``mechanism`` is the hook a CURVE/PLAIN implementation sets."""
    codec = zmtp_codec("ROUTER")
    codec.mechanism = "CURVE"
    assert not codec.downgrade_allowed()
    codec.receive_data(v2_greeting(3))
    with pytest.raises(VersionError, match="downgrade refused") as info:
        codec.next_event()
    assert info.value.peer_version == "2.0"
    assert codec.data_to_send() == b""  # not one byte of the 2.0 greeting went out


def test_two_codecs_both_3x() -> None:
    """Two staged codecs end up on 3.1 (RFC 37's worked example sequence)."""
    a, b = zmtp_codec("DEALER"), zmtp_codec("ROUTER")
    ea, eb = pump(a, b)
    assert ea[0].version == (3, 1) and eb[0].version == (3, 1)
    assert a.commands and b.commands


# -- next_messages: whole messages in one call, the same stream as next_event ----------------


def test_next_messages_stops_before_a_command() -> None:
    rx = opened()
    ping = bytes.fromhex("0407 0450494e470000")
    rx.receive_data(bytes.fromhex("0100 000161 000162") + ping + bytes.fromhex("000163"))
    assert rx.next_messages(10) == [(b"", b"a"), (b"b",)]
    assert rx.next_messages(10) == []  # the PING is next_event's
    assert isinstance(rx.next_event(), Ping)
    assert rx.next_messages(10) == [(b"c",)]
    assert rx.next_event() is None


def test_next_messages_limit_and_missing_bytes() -> None:
    rx = opened()
    rx.receive_data(bytes.fromhex("000161 000162 000163 0101"))  # the last one is cut short
    assert rx.next_messages(0) == []
    assert rx.next_messages(2) == [(b"a",), (b"b",)]
    assert rx.next_messages(2) == [(b"c",)]
    assert rx.partial
    rx.receive_data(bytes.fromhex("64 000165"))
    assert rx.next_messages(2) == [(b"d", b"e")]
    assert not rx.partial


def test_next_messages_long_frames_and_frame_types() -> None:
    rx = opened()
    rx.receive_data(bytes.fromhex("030000000000000100") + b"x" * 256 + bytes.fromhex("000179"))
    [msg] = rx.next_messages(4)
    assert msg == (b"x" * 256, b"y")
    assert all(type(f) is bytes for f in msg)


def test_next_messages_leaves_refusals_to_next_event() -> None:
    rx = opened()
    rx.max_message_size = 4  # (after the handshake: READY itself is longer)
    rx.receive_data(bytes.fromhex("000161 0005") + b"hello")
    assert rx.next_messages(8) == [(b"a",)]
    assert rx.next_messages(8) == []
    with pytest.raises(MessageTooLarge):
        rx.next_event()
    bad = opened()
    bad.receive_data(bytes.fromhex("000161 080162"))  # a reserved flag bit
    assert bad.next_messages(8) == [(b"a",)]
    with pytest.raises(RemoteProtocolError, match="reserved"):
        bad.next_event()


def test_next_messages_before_the_handshake_is_empty() -> None:
    codec = zmtp_codec("REQ")
    codec.initiate()
    codec.receive_data(GREETING + ready(b"REP") + bytes.fromhex("000161"))
    assert codec.next_messages(8) == []
    assert isinstance(codec.next_event(), HandshakeComplete)
    assert codec.next_messages(8) == [(b"a",)]


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(st.tuples(frames, st.sampled_from(["msg", "ping", "garbage", "big"])),
                      max_size=10),
    cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=20),
    limit=st.integers(min_value=1, max_value=5),
)
def test_next_messages_gives_what_next_event_gives(
    messages: list[tuple[tuple[bytes, ...], str]], cuts: list[int], limit: int
) -> None:
    enc = opened()
    wire = b""
    for parts, kind in messages:
        if kind == "ping":
            wire += enc.ping(1, b"c")
        elif kind == "garbage":
            wire += parts[0][:3]
        else:
            wire += enc.send_message(((b"b" * 901,) if kind == "big" else ()) + parts)
    same_in_batches(lambda: opened(max_message_size=900), chunked(wire, cuts), limit)


def test_next_messages_counts_a_message_cut_at_frame_boundaries_towards_the_limit() -> None:
    """Frames of one message in reads of their own: each read alone is far under the size
    limit, the message is not (its earlier frames count), so the fast path must not take it."""
    frame = bytes.fromhex("0132") + b"m" * 50  # 50 bytes, MORE
    last = bytes.fromhex("0032") + b"l" * 50
    chunks = [frame, frame, last, bytes.fromhex("000161")]
    same_in_batches(lambda: opened(max_message_size=120), chunks, 8)
    codec = opened(max_message_size=120)
    for chunk in chunks[:2]:
        codec.receive_data(chunk)
        assert codec.next_messages(8) == []
    codec.receive_data(chunks[2])
    assert codec.next_messages(8) == []
    with pytest.raises(MessageTooLarge, match="150"):
        codec.next_event()
    fits = opened(max_message_size=150)
    for chunk in chunks[:3]:
        fits.receive_data(chunk)
        got = fits.next_messages(8)
    assert got == [(b"m" * 50, b"m" * 50, b"l" * 50)]


# -- issue 20 ----------------------------------------------------------------------------------
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


def test_a_handshake_command_over_64k_is_refused_at_its_header() -> None:
    """Finding 9: before the handshake a frame may be at most 64 KiB (a CURVE HELLO is 200
    bytes), whatever max_message_size says; refused when its size arrives, nothing buffered."""
    from gateway.wire.zmtp import HANDSHAKE_FRAME_LIMIT

    codec = zmtp_codec("REQ")
    codec.initiate()
    size = HANDSHAKE_FRAME_LIMIT + 1
    codec.receive_data(GREETING + b"\x06" + size.to_bytes(8, "big") + b"\x05READY")
    with pytest.raises(RemoteProtocolError, match="handshake command of 65537 bytes"):
        codec.next_event()
    ok = zmtp_codec("REQ")  # a READY up to the limit is fine
    ok.initiate()
    big = b"\x0bSocket-Type\x00\x00\x00\x03REP\x01X" + (60000).to_bytes(4, "big") + b"v" * 60000
    body = b"\x05READY" + big
    ok.receive_data(GREETING + b"\x06" + len(body).to_bytes(8, "big") + body)
    assert isinstance(ok.next_event(), HandshakeComplete)


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


def test_streaming_is_the_open_state_between_plain_messages() -> None:
    """The kernel seam: ``streaming`` only between whole messages of an open, unsealed
    stream; ``rx`` is the buffer a reader outside the codec takes them from."""
    codec = zmtp_codec("REQ")
    codec.initiate()
    assert not codec.streaming
    codec = opened()
    assert codec.streaming and codec.rx.pos == len(codec.rx.data)
    codec.receive_data(b"\x01\x00\x00\x02hi")  # [""][hi]
    assert codec.streaming and codec.next_messages(8) == [(b"", b"hi")]
    codec.receive_data(b"\x01\x00")  # a MORE frame: the message has begun
    assert codec.next_messages(8) == [] and not codec.streaming
    codec.receive_data(b"\x00\x01!")
    assert codec.next_messages(8) == [(b"", b"!")] and codec.streaming
