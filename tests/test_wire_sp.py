"""SpCodec: exact bytes, header check, pairing, framing, limits, properties, nng interop."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.engine.codecs import sp_role
from gateway.errors import (
    LocalProtocolError,
    MessageTooLarge,
    PairingError,
    RemoteProtocolError,
    SpHeaderError,
)
from gateway.testing.codec_checks import chunked, feed_garbage, same_in_batches
from gateway.wire.events import HandshakeComplete
from gateway.wire.sp import SpCodec, SpRole

REQ0 = bytes.fromhex("0053500000300000")
REP0 = bytes.fromhex("0053500000310000")


def sp_codec(kind: str, raw: bool = False, **kw: Any) -> SpCodec:
    """A codec with the identity the engine gives a native ``kind`` socket (``raw``: same)."""
    return SpCodec(sp_role(kind), **kw)


def opened(kind: str = "REQ", **kw) -> SpCodec:
    codec = sp_codec(kind, **kw)
    codec.initiate()
    codec.receive_data(REP0 if codec.protocol == 0x30 else REQ0)
    assert isinstance(codec.next_event(), HandshakeComplete)
    return codec


@pytest.mark.parametrize(
    ("kind", "raw", "header"),
    [
        ("REQ", False, REQ0),
        ("REQ", True, REQ0),
        ("DEALER", False, REQ0),
        ("REP", False, REP0),
        ("REP", True, REP0),
        ("ROUTER", False, REP0),
    ],
)
def test_header_bytes(kind: str, raw: bool, header: bytes) -> None:
    codec = sp_codec(kind, raw)
    assert codec.initiate() == header
    assert codec.data_to_send() == b""


@pytest.mark.parametrize(
    ("kind", "peer_header", "peer_type"),
    [
        ("REQ", REP0, "rep0"),
        ("REP", REQ0, "req0"),
        ("DEALER", REP0, "rep0"),
        ("ROUTER", REQ0, "req0"),
    ],
)
def test_handshake(kind: str, peer_header: bytes, peer_type: str) -> None:
    codec = sp_codec(kind)
    codec.receive_data(peer_header)
    ev = codec.next_event()
    assert ev == HandshakeComplete(peer_type=peer_type, version=(0, 0))
    assert codec.handshake_done and codec.peer_type == peer_type
    assert codec.next_event() is None


@pytest.mark.parametrize(
    ("kind", "peer_header"),
    [
        ("REQ", REQ0),
        ("REP", REP0),
        ("DEALER", REQ0),
        ("ROUTER", REP0),
        ("REQ", bytes.fromhex("0053500000100000")),  # pair0 (0x10)
        ("REQ", bytes.fromhex("0053500000110000")),  # the RFC's stale rep number (17)
    ],
)
def test_peer_mismatch(kind: str, peer_header: bytes) -> None:
    codec = sp_codec(kind)
    codec.receive_data(peer_header)
    with pytest.raises(PairingError, match="peer mismatch"):
        codec.next_event()
    with pytest.raises(PairingError):
        codec.next_event()
    assert not codec.handshake_done


def test_pairs_between_codecs() -> None:
    for a, b, ok in [
        ("REQ", "REP", True),
        ("REQ", "REQ", False),
        ("REP", "REP", False),
        ("DEALER", "ROUTER", True),
    ]:
        ca, cb = sp_codec(a), sp_codec(b)
        ca.receive_data(cb.initiate())
        cb.receive_data(ca.initiate())
        if ok:
            assert isinstance(ca.next_event(), HandshakeComplete)
            assert isinstance(cb.next_event(), HandshakeComplete)
        else:
            with pytest.raises(PairingError):
                ca.next_event()
            with pytest.raises(PairingError):
                cb.next_event()


# the 8-byte header is 00 53 50 00 | protocol u16 | 00 00: nng's tcp, ipc and tls transports
# refuse a header whose reserved bytes 6-7 are not zero (NNG_EPROTO), and so do we
RESERVED_HEADERS = [
    ("0053500000310000", None),
    ("0053500000310001", "0001"),
    ("0053500000310100", "0100"),
    ("005350000031abcd", "abcd"),
    ("005350000031ffff", "ffff"),
    ("005350000010ff00", "ff00"),  # checked before the protocol (pair0 would be a PairingError)
]


@pytest.mark.parametrize(("header", "reserved"), RESERVED_HEADERS)
@pytest.mark.parametrize("prefix", [b"", b"\x01"], ids=["tcp", "ipc"])
def test_reserved_header_bytes(header: str, reserved: str | None, prefix: bytes) -> None:
    codec = sp_codec("REQ", message_prefix=prefix)
    data = bytes.fromhex(header)
    codec.receive_data(data[:7])
    assert codec.next_event() is None  # nothing is decided before byte 8
    codec.receive_data(data[7:])
    if reserved is None:
        assert codec.next_event() == HandshakeComplete(peer_type="rep0", version=(0, 0))
        return
    with pytest.raises(SpHeaderError, match=f"reserved bytes {reserved}") as info:
        codec.next_event()
    assert isinstance(info.value, RemoteProtocolError) and info.value.reason == "sp-header"
    assert not codec.handshake_done
    with pytest.raises(SpHeaderError):  # the codec stays broken
        codec.next_event()


def test_interop_pynng_closes_on_reserved_header_bytes() -> None:
    """What nng itself does with nonzero reserved bytes: it closes the connection."""
    pynng = pytest.importorskip("pynng")
    with pynng.Rep0(recv_timeout=2000) as rep:
        listener = rep.listen("tcp://127.0.0.1:0")
        port = int(str(listener.local_address).rsplit(":", 1)[1])
        for reserved, kept in ((b"\x00\x00", True), (b"\x00\x01", False), (b"\xab\xcd", False)):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.settimeout(1.0)
                sock.sendall(b"\x00SP\x00\x00\x30" + reserved)
                got = b""
                try:
                    while chunk := sock.recv(64):
                        got += chunk
                    open_ = False  # EOF: nng closed the pipe
                except TimeoutError:
                    open_ = True
                except ConnectionResetError:
                    open_ = False
                assert got in (b"", REP0)  # nng sends its own header first
                assert open_ is kept, reserved.hex()
                if kept:
                    sock.sendall((8).to_bytes(8, "big") + b"\x80\x00\x00\x01ping")
                    assert rep.recv() == b"ping"


@pytest.mark.parametrize(
    "data",
    [
        b"\x01",
        b"\x00T",
        b"\x00SQ",
        b"\x00SP\x01",  # version byte must be 0
        b"GET / HTTP/1.1\r\n",
        b"\xff\x00\x00\x00\x00\x00\x00\x01\x7f",  # a ZMTP greeting
    ],
)
def test_bad_magic(data: bytes) -> None:
    codec = sp_codec("REQ")
    codec.receive_data(data)
    with pytest.raises(RemoteProtocolError):
        codec.next_event()


@pytest.mark.parametrize(
    ("parts", "wire"),
    [
        ((b"",), "0000000000000000"),
        ((b"hello",), "0000000000000005 68656c6c6f"),
        ((b"\x80\x00\x00\x01", b"hi"), "0000000000000006 800000016869"),
        (
            (b"\x00\x00\x00\x07", b"\x80\x00\x00\x01", b"body"),
            "000000000000000c 0000000780000001 626f6479",
        ),
        ((b"x" * 300,), "000000000000012c" + "78" * 300),
    ],
)
def test_framing(parts: tuple[bytes, ...], wire: str) -> None:
    data = bytes.fromhex(wire)
    assert opened("REQ").send_message(parts) == data
    rx = opened("REP")
    rx.receive_data(data)
    ev = rx.next_event()
    assert ev == (b"".join(parts),)
    assert type(ev[0]) is bytes
    assert rx.next_event() is None


def test_split_at_every_offset() -> None:
    stream = REP0 + bytes.fromhex("0000000000000006 800000016869 0000000000000000")
    for cut in range(len(stream) + 1):
        codec = sp_codec("REQ")
        events = []
        for chunk in (stream[:cut], stream[cut:]):
            codec.receive_data(chunk)
            while (ev := codec.next_event()) is not None:
                events.append(ev)
        assert events == [
            HandshakeComplete(peer_type="rep0", version=(0, 0)),
            (b"\x80\x00\x00\x01hi",),
            (b"",),
        ], cut


def test_byte_by_byte() -> None:
    stream = REP0 + b"".join(len(p).to_bytes(8, "big") + p for p in [b"a", b"", b"xyz" * 100])
    codec = sp_codec("REQ")
    events = []
    for i in range(len(stream)):
        codec.receive_data(stream[i : i + 1])
        while (ev := codec.next_event()) is not None:
            events.append(ev)
    assert events[1:] == [(b"a",), (b"",), (b"xyz" * 100,)]


def test_oversize_refused_at_length() -> None:
    codec = opened("REP", max_message_size=1000)
    codec.receive_data((1001).to_bytes(8, "big"))  # no payload yet
    with pytest.raises(MessageTooLarge):
        codec.next_event()


def test_exact_limit_accepted() -> None:
    codec = opened("REP", max_message_size=10)
    codec.receive_data((10).to_bytes(8, "big") + b"0123456789")
    assert codec.next_event() == (b"0123456789",)


def test_huge_length() -> None:
    codec = opened("REP")
    codec.receive_data(b"\xff" * 8)
    with pytest.raises(MessageTooLarge):
        codec.next_event()


def test_send_before_handshake() -> None:
    with pytest.raises(LocalProtocolError):
        sp_codec("REQ").send_message((b"x",))


# -- properties -----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(st.lists(st.binary(max_size=300), min_size=1, max_size=4), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=20),
)
def test_roundtrip_random_chunks(messages: list[list[bytes]], cuts: list[int]) -> None:
    a, b = sp_codec("REQ"), sp_codec("REP")
    a.receive_data(b.initiate())
    assert isinstance(a.next_event(), HandshakeComplete)
    stream = a.initiate() + b"".join(a.send_message(tuple(m)) for m in messages)
    got: list = []
    for chunk in chunked(stream, cuts):
        b.receive_data(chunk)
        while (ev := b.next_event()) is not None:
            got.append(ev)
    assert got[0] == HandshakeComplete(peer_type="req0", version=(0, 0))
    assert got[1:] == [(b"".join(m),) for m in messages]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=6))
def test_garbage_without_handshake(chunks: list[bytes]) -> None:
    feed_garbage(sp_codec("REQ"), chunks)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=6))
def test_garbage_after_handshake(chunks: list[bytes]) -> None:
    feed_garbage(opened("REP", max_message_size=1000), chunks)


# -- interop with nng -----------------------------------------------------------------------


def _recv_event(sock: socket.socket, codec: SpCodec):
    while (ev := codec.next_event()) is None:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("peer closed")
        codec.receive_data(data)
    return ev


def test_interop_pynng_rep0() -> None:
    pynng = pytest.importorskip("pynng")
    with pynng.Rep0(recv_timeout=5000, send_timeout=5000) as rep:
        listener = rep.listen("tcp://127.0.0.1:0")
        port = int(str(listener.local_address).rsplit(":", 1)[1])  # .port is byte-swapped
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.settimeout(5)
            codec = sp_codec("REQ")
            sock.sendall(codec.initiate())
            hs = _recv_event(sock, codec)
            assert hs == HandshakeComplete(peer_type="rep0", version=(0, 0))
            rid = b"\x80\x00\x00\x2a"
            sock.sendall(codec.send_message((rid, b"hello")))
            assert rep.recv() == b"hello"
            rep.send(b"world")
            assert _recv_event(sock, codec) == (rid + b"world",)
            big = bytes(range(256)) * 1000
            rid2 = b"\x80\x00\x00\x2b"
            sock.sendall(codec.send_message((rid2, big)))
            assert rep.recv() == big
            rep.send(big[::-1])
            assert _recv_event(sock, codec) == (rid2 + big[::-1],)


def test_interop_pynng_peer_mismatch() -> None:
    pynng = pytest.importorskip("pynng")
    with pynng.Req0(recv_timeout=5000, send_timeout=5000) as req:
        listener = req.listen("tcp://127.0.0.1:0")
        port = int(str(listener.local_address).rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.settimeout(5)
            codec = sp_codec("REQ")  # req0 <-> req0: both sides refuse
            sock.sendall(codec.initiate())
            with pytest.raises(PairingError, match="peer mismatch"):
                _recv_event(sock, codec)


# -- IPC framing: a message-type byte (1) before each u64 length (nng and nanomsg ipc) --------


def _ipc_pair() -> tuple[SpCodec, SpCodec]:
    a, b = sp_codec("REQ", message_prefix=b"\x01"), sp_codec("REP", message_prefix=b"\x01")
    a.receive_data(b.initiate())
    b.receive_data(a.initiate())
    assert a.next_event() is not None and b.next_event() is not None
    return a, b


def test_ipc_framing_bytes() -> None:
    a, b = _ipc_pair()
    wire = a.send_message((b"\x80\x00\x00\x01", b"hi"))
    assert wire == bytes.fromhex("01" "0000000000000006" "80000001") + b"hi"
    b.receive_data(wire[:3])
    assert b.next_event() is None
    b.receive_data(wire[3:])
    assert b.next_event() == (b"\x80\x00\x00\x01hi",)


def test_identity_is_data() -> None:
    """Protocol numbers and accepted peers come from the role; names only label them."""
    codec = SpCodec(SpRole(0x50, frozenset({0x51})))  # push0 -> pull0, unnamed
    assert codec.initiate() == bytes.fromhex("0053500000500000")
    codec.receive_data(bytes.fromhex("0053500000510000"))
    assert codec.next_event() == HandshakeComplete(peer_type="0x0051", version=(0, 0))
    codec = SpCodec(SpRole(0x50, frozenset({0x51}), names={0x50: "push0", 0x30: "req0"}))
    codec.receive_data(REQ0)
    with pytest.raises(PairingError, match="push0 cannot talk to req0"):
        codec.next_event()


def test_ipc_unknown_message_type_is_remote_error() -> None:
    _, b = _ipc_pair()
    b.receive_data(bytes.fromhex("02" "0000000000000001") + b"x")
    with pytest.raises(RemoteProtocolError):
        b.next_event()


# -- partial: an incomplete message is buffered (the engine's per-message deadline) -----------


def _len(n: int) -> bytes:
    return n.to_bytes(8, "big")


@pytest.mark.parametrize(
    ("chunks", "partial"),
    [
        ([], False),
        ([b"P\x00\x00\x00"], True),  # part of a length ("P": the transport's prefix, if any)
        ([b"P" + _len(1 << 20) + b"x" * 1000], True),  # the start of a 1 MiB message
        ([b"P" + _len(3) + b"abc"], False),
        ([b"P" + _len(3) + b"abcP" + _len(2)], True),  # a whole message, then part of the next
        ([b"P" + _len(3) + b"ab", b"c"], False),
    ],
)
@pytest.mark.parametrize("prefix", [b"", b"\x01"], ids=["tcp", "ipc"])
def test_partial(chunks: list[bytes], partial: bool, prefix: bytes) -> None:
    codec = opened("REP", message_prefix=prefix)
    assert codec.partial is False
    for chunk in chunks:
        codec.receive_data(chunk.replace(b"P", prefix))
        while codec.next_event() is not None:
            pass
    assert codec.partial is partial


def test_partial_header() -> None:
    codec = sp_codec("REQ")
    codec.receive_data(REP0[:5])
    assert codec.next_event() is None and codec.partial
    codec.receive_data(REP0[5:])
    assert isinstance(codec.next_event(), HandshakeComplete) and not codec.partial


@pytest.mark.parametrize("first", [b"\xff", b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f\x03"])
def test_zmtp_greeting_on_sp_is_the_wrong_wire(first: bytes) -> None:
    """A ZMTP signature starts with 0xFF, an SP header never does (sp-tcp-mapping-01): one
    byte tells a ZeroMQ peer on an SP endpoint (handshake reason ``sp-protocol``)."""
    from gateway.errors import WrongWireError

    codec = sp_codec("REP")
    codec.receive_data(first)
    with pytest.raises(WrongWireError, match="ZeroMQ") as info:
        codec.next_event()
    assert info.value.handshake_reason == "sp-protocol" and info.value.reason == "wrong-wire"


def test_pairing_error_names_both_protocols() -> None:
    codec = sp_codec("REP")
    codec.receive_data(REP0)
    with pytest.raises(PairingError) as info:
        codec.next_event()
    assert (info.value.ours, info.value.theirs) == ("rep0", "rep0")
    assert info.value.handshake_reason == "pairing"


# -- next_messages: whole messages in one call, the same stream as next_event ----------------


def test_next_messages_limit_and_missing_bytes() -> None:
    rx = opened("REP")
    msg = bytes.fromhex("0000000000000001")
    rx.receive_data(msg + b"a" + msg + b"b" + msg + b"c" + msg[:5])
    assert rx.next_messages(0) == []
    assert rx.next_messages(2) == [(b"a",), (b"b",)]
    assert rx.next_messages(2) == [(b"c",)]
    assert rx.next_messages(2) == []
    rx.receive_data(msg[5:] + b"d")
    [got] = rx.next_messages(2)
    assert got == (b"d",) and type(got[0]) is bytes


def test_next_messages_leaves_refusals_to_next_event() -> None:
    rx = opened("REP", max_message_size=4)
    rx.receive_data(bytes.fromhex("0000000000000001") + b"a" + bytes.fromhex("0000000000000005"))
    assert rx.next_messages(8) == [(b"a",)]
    assert rx.next_messages(8) == []
    with pytest.raises(MessageTooLarge):
        rx.next_event()


def test_next_messages_on_ipc_checks_the_message_type() -> None:
    rx = opened("REP", message_prefix=b"\x01")
    rx.receive_data(b"\x01" + bytes.fromhex("0000000000000001") + b"a" + b"\x02" + bytes(9))
    assert rx.next_messages(8) == [(b"a",)]
    with pytest.raises(RemoteProtocolError, match="message type"):
        rx.next_event()


def test_next_messages_before_the_header_is_empty() -> None:
    rx = sp_codec("REP")
    rx.receive_data(sp_codec("REQ").initiate() + bytes.fromhex("0000000000000001") + b"a")
    assert rx.next_messages(8) == []
    assert isinstance(rx.next_event(), HandshakeComplete)
    assert rx.next_messages(8) == [(b"a",)]


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(st.tuples(st.binary(max_size=300), st.sampled_from(["msg", "garbage", "big"])),
                      max_size=10),
    cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=20),
    limit=st.integers(min_value=1, max_value=5),
    prefix=st.sampled_from([b"", b"\x01"]),
)
def test_next_messages_gives_what_next_event_gives(
    messages: list[tuple[bytes, str]], cuts: list[int], limit: int, prefix: bytes
) -> None:
    enc = opened("REQ", message_prefix=prefix)
    wire = b""
    for body, kind in messages:
        if kind == "garbage":
            wire += body[:5]
        else:
            wire += enc.send_message((b"b" * (901 if kind == "big" else 0) + body,))
    same_in_batches(lambda: opened("REP", max_message_size=900, message_prefix=prefix),
                    chunked(wire, cuts), limit)


def test_streaming_is_the_open_state() -> None:
    """The kernel seam: ``streaming`` once the header is read, until the codec refuses."""
    codec = sp_codec("REQ")
    codec.initiate()
    assert not codec.streaming
    codec = opened("REQ")
    assert codec.streaming and codec.message_prefix == b""
    codec.receive_data(b"\x00" * 7 + b"\x05" + b"\x80\x00\x00\x01x")
    assert codec.next_messages(4) == [(b"\x80\x00\x00\x01x",)] and codec.streaming
    assert codec.rx.pos == len(codec.rx.data)
