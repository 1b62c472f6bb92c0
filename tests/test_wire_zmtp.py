"""ZmtpCodec (gateway.wire.zmtp.codec): exact bytes, pairing, properties, libzmq interop, the kernel
seam. The greeting, the commands and the readers have their own modules (test_wire_zmtp_*)."""

from __future__ import annotations

import socket

import pytest
from _zmtp import (
    GREETING,
    ILLEGAL,
    LEGAL,
    LIBZMQ_GREETING,
    READY_REP,
    READY_REQ,
    REST,
    SIGNATURE,
    drain,
    frames,
    full_greeting,
    opened,
    pump,
    ready,
    zmtp_codec,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.engine.codecs import zmtp_role
from gateway.errors import LocalProtocolError, PairingError, RemoteProtocolError
from gateway.patterns import pairing
from gateway.testing.codec_checks import chunked, feed_garbage
from gateway.wire.events import HandshakeComplete
from gateway.wire.zmtp import ZmtpCodec, ZmtpRole
from gateway.wire.zmtp import readers as states

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


# -- pairing --------------------------------------------------------------------------------



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


def test_streaming_is_the_open_state_between_plain_messages() -> None:
    """The kernel seam: ``streaming`` only between whole messages of an open stream;
    ``rx`` is the buffer a reader outside the codec takes them from."""
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


def _seam_holds(codec: ZmtpCodec) -> bool:
    """``streaming`` (a plain attribute the codec keeps) is what it stands for: the open
    state, no multipart message begun, no refusal."""
    return codec.streaming == (codec._state in (states.OPEN, states.SEALED)
                               and not codec._parts and codec._error is None)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 400), max_size=12), st.integers(1, 4))
def test_streaming_kept_through_any_split(cuts: list[int], batch: int) -> None:
    """The attribute follows the state through any split of a stream of multipart messages,
    a PING between them and a refused frame at the end, read by ``next_messages`` and
    ``next_event`` in turn."""
    codec = zmtp_codec("REQ")
    codec.initiate()
    assert _seam_holds(codec)
    stream = (GREETING + ready(b"REP") + b"\x01\x00\x00\x02hi" + b"\x01\x01a\x01\x01b\x00\x01c"
              + b"\x04\x07\x04PING\x00\x0a" + b"\x00\x00" + b"\x81\x00")
    for i, chunk in enumerate(chunked(stream, cuts)):
        codec.receive_data(chunk)
        try:
            if i % 2:
                codec.next_messages(batch)
                assert _seam_holds(codec)
            while codec.next_event() is not None:
                assert _seam_holds(codec)
        except RemoteProtocolError:
            assert _seam_holds(codec) and not codec.streaming
            return
        assert _seam_holds(codec)
    raise AssertionError("the reserved flags were not refused")
