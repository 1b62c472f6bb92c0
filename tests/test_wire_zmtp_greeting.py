"""The ZMTP greeting and version negotiation (gateway.wire.zmtp.greeting): staged and byte-by-byte
greetings, bad ones, ZMTP 2.0 and 1.0 peers."""

from __future__ import annotations

import pytest
from _zmtp import (
    GREETING,
    LIBZMQ_GREETING,
    PAIRS,
    READY_REP,
    READY_REQ,
    REST,
    drain,
    pump,
    ready,
    zmtp_codec,
)

from gateway.errors import (
    LocalProtocolError,
    MechanismError,
    PairingError,
    RemoteProtocolError,
    VersionError,
    WrongWireError,
)
from gateway.patterns import pairing
from gateway.wire.events import HandshakeComplete, Ping

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
