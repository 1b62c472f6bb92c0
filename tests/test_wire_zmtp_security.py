"""ZMTP PLAIN (RFC 24) and CURVE (RFCs 25/26) mechanisms, sans-IO: exact bytes where the specs
fix them, client <-> server round trips, refusals, and fuzzing (only protocol errors escape)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl import bindings as sodium

from gateway.engine.codecs import zmtp_role
from gateway.errors import MechanismError, ProtocolError, RemoteProtocolError
from gateway.wire import z85
from gateway.wire.events import HandshakeComplete, PeerError
from gateway.wire.zmtp import ZmtpCodec
from gateway.wire.zmtp_curve import (
    HELLO_SIZE,
    INITIATE_MIN,
    READY_MIN,
    WELCOME_SIZE,
    CurveClient,
    CurveServer,
    keypair,
)
from gateway.wire.zmtp_mechanism import (
    AuthenticationFailed,
    AuthResult,
    CryptoError,
)
from gateway.wire.zmtp_plain import PlainClient, PlainServer

S_PUB, S_SEC = keypair()
C_PUB, C_SEC = keypair()


def codec(kind: str, mechanism: object = None) -> ZmtpCodec:
    return ZmtpCodec(zmtp_role(kind, False), security=mechanism)  # type: ignore[arg-type]


def frames_of(data: bytes) -> list[tuple[int, bytes]]:
    """Split wire bytes after the greeting into (flags, body) frames."""
    out, pos = [], 0
    while pos < len(data):
        flags = data[pos]
        if flags & 0x02:
            (size,) = struct.unpack_from(">Q", data, pos + 1)
            start = pos + 9
        else:
            size, start = data[pos + 1], pos + 2
        out.append((flags, data[start:start + size]))
        pos = start + size
    return out


def full_greeting(c: ZmtpCodec) -> bytes:
    """The whole 64-byte greeting a codec sends to a 3.x peer (RFC 37: signature and major
    first, the rest once the peer's version byte is in)."""
    first = c.initiate()
    c.receive_data(b"\xff" + b"\x00" * 8 + b"\x7f\x03")
    assert c.next_event() is None
    return first + c.data_to_send()


def greet(a: ZmtpCodec, b: ZmtpCodec) -> None:
    """Both greetings, staged as libzmq sends them (11 bytes, then the rest); afterwards each
    side's ``data_to_send()`` holds what its mechanism sends first."""
    b.receive_data(a.initiate())
    a.receive_data(b.initiate())
    assert a.next_event() is None and b.next_event() is None
    rest_a, rest_b = a.data_to_send(), b.data_to_send()
    b.receive_data(rest_a)
    a.receive_data(rest_b)
    assert a.next_event() is None and b.next_event() is None


def _first_command(c: ZmtpCodec, peer: ZmtpCodec) -> bytes:
    """What ``c`` sends once ``peer``'s whole greeting is in (its own greeting's 53-byte rest
    comes first and is cut off)."""
    c.initiate()
    c.receive_data(full_greeting(peer))
    assert c.next_event() is None
    return c.data_to_send()[53:]


def pump(a: ZmtpCodec, b: ZmtpCodec, log: list[bytes] | None = None) -> tuple[list, list]:
    """Run a handshake to its end; ``log`` gets every chunk a -> b and b -> a."""
    greet(a, b)
    seen: dict[int, list] = {id(a): [], id(b): []}
    for _ in range(8):
        for x, y in ((a, b), (b, a)):
            out = x.data_to_send()
            if out:
                if log is not None:
                    log.append(out)
                y.receive_data(out)
            while (ev := y.next_event()) is not None:
                seen[id(y)].append(ev)
    return seen[id(a)], seen[id(b)]


# -- Z85 (RFC 32) ------------------------------------------------------------------------------
def test_z85_spec_vector() -> None:
    raw = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])  # RFC 32 "Test Case"
    assert z85.encode(raw) == "HelloWorld"
    assert z85.decode("HelloWorld") == raw


@given(st.binary(min_size=0, max_size=64).filter(lambda b: len(b) % 4 == 0))
def test_z85_matches_pyzmq(data: bytes) -> None:
    from zmq.utils import z85 as pyzmq_z85

    assert z85.encode(data).encode() == pyzmq_z85.encode(data)
    assert z85.decode(z85.encode(data)) == data


@pytest.mark.parametrize("bad", ["abc", "Hello\x7forld", "#####"])
def test_z85_refuses_bad_text(bad: str) -> None:
    with pytest.raises(z85.Z85Error):
        z85.decode(bad)


# -- greeting (RFC 23) -------------------------------------------------------------------------
def test_greeting_names_the_mechanism_and_role() -> None:
    g = full_greeting(codec("REP", CurveServer(S_PUB, S_SEC)))
    assert len(g) == 64 and g[12:32] == b"CURVE" + b"\x00" * 15 and g[32] == 1
    g = full_greeting(codec("REQ", PlainClient(b"u", b"p")))
    assert g[12:32] == b"PLAIN" + b"\x00" * 15 and g[32] == 0


@pytest.mark.parametrize(("ours", "theirs"), [
    (lambda: CurveServer(S_PUB, S_SEC), None),  # CURVE against NULL
    (lambda: PlainServer(), lambda: CurveClient(C_PUB, C_SEC, S_PUB)),
    (lambda: PlainServer(), lambda: PlainServer()),  # two servers (as-server both 1)
])
def test_mechanism_mismatch_is_refused_with_reason_mechanism(ours, theirs) -> None:  # type: ignore[no-untyped-def]
    a = codec("REP", ours())
    b = codec("REQ", theirs() if theirs else None)
    a.initiate()
    a.receive_data(full_greeting(b))
    with pytest.raises(MechanismError) as info:
        a.next_event()
    assert info.value.reason == "mechanism"


# -- PLAIN (RFC 24) ----------------------------------------------------------------------------
def test_plain_exact_bytes_and_round_trip() -> None:
    log: list[bytes] = []
    a, b = codec("REQ", PlainClient(b"alice", b"pw")), codec("REP", PlainServer())
    ea, eb = pump(a, b, log)
    assert isinstance(ea[0], HandshakeComplete) and ea[0].peer_type == "REP"
    assert isinstance(eb[0], HandshakeComplete) and eb[0].peer_type == "REQ"
    hello, welcome, initiate, ready = (frames_of(chunk)[0] for chunk in log[:4])
    assert hello == (0x04, b"\x05HELLO\x05alice\x02pw")
    assert welcome == (0x04, b"\x07WELCOME")
    assert initiate == (0x04, b"\x08INITIATE\x0bSocket-Type\x00\x00\x00\x03REQ"
                              b"\x08Identity\x00\x00\x00\x00")
    assert ready == (0x04, b"\x05READY\x0bSocket-Type\x00\x00\x00\x03REP")
    b.receive_data(a.send_message((b"", b"hi")))
    assert b.next_event() == (b"", b"hi")


def test_plain_refusal_sends_error_400_and_raises() -> None:
    asked = []

    def deny(mech: str, creds: object) -> AuthResult:
        asked.append((mech, creds))
        return AuthResult(False, "bad-password")

    a, b = codec("REQ", PlainClient(b"alice", b"nope")), codec("REP", PlainServer(deny))
    greet(a, b)
    b.receive_data(a.data_to_send())
    with pytest.raises(AuthenticationFailed) as info:
        b.next_event()
    assert info.value.reason == "auth" and info.value.auth_reason == "bad-password"
    assert asked == [("PLAIN", {"username": "alice", "password": "nope"})]
    error = b.data_to_send()
    assert error == b"\x04\x0a\x05ERROR\x03400"  # RFC 23 ERROR, ZAP's status code (RFC 27)
    a.receive_data(error)
    assert a.next_event() == PeerError(reason="400")


# -- CURVE (RFCs 25/26) ------------------------------------------------------------------------
def test_curve_command_layouts_lengths_and_nonces() -> None:
    log: list[bytes] = []
    a = codec("REQ", CurveClient(C_PUB, C_SEC, S_PUB))
    b = codec("REP", CurveServer(S_PUB, S_SEC))
    ea, eb = pump(a, b, log)
    assert isinstance(ea[0], HandshakeComplete) and isinstance(eb[0], HandshakeComplete)
    (hf, hello), = frames_of(log[0])
    (wf, welcome), = frames_of(log[1])
    (if_, initiate), = frames_of(log[2])
    (rf, ready), = frames_of(log[3])
    assert (hf, wf, if_, rf) == (0x04, 0x04, 0x06, 0x04)  # INITIATE > 255: LONG
    # HELLO: 200 bytes: name, version 1.0, 72 zero bytes, C', short nonce 1, 80-byte box
    assert len(hello) == HELLO_SIZE == 200
    assert hello[:6] == b"\x05HELLO" and hello[6:8] == b"\x01\x00" and hello[8:80] == bytes(72)
    client_t, short = hello[80:112], hello[112:120]
    assert short == struct.pack(">Q", 1)
    assert sodium.crypto_box_open(hello[120:], b"CurveZMQHELLO---" + short, client_t,
                                  S_SEC) == bytes(64)
    # WELCOME: 168 bytes: name, 16-byte long nonce, box[S' + cookie] (144)
    assert len(welcome) == WELCOME_SIZE == 168 and welcome[:8] == b"\x07WELCOME"
    plain = sodium.crypto_box_open(welcome[24:], b"WELCOME-" + welcome[8:24], S_PUB,
                                   a.security._t_secret)  # type: ignore[union-attr]
    server_t, cookie = plain[:32], plain[32:]
    assert len(cookie) == 96
    # INITIATE: >= 257 bytes: name, cookie, short nonce 2, box[C + vouch + metadata]
    assert len(initiate) >= INITIATE_MIN and initiate[:9] == b"\x08INITIATE"
    assert initiate[9:105] == cookie and initiate[105:113] == struct.pack(">Q", 2)
    inner = sodium.crypto_box_open(initiate[113:], b"CurveZMQINITIATE" + initiate[105:113],
                                   server_t, a.security._t_secret)  # type: ignore[union-attr]
    assert inner[:32] == C_PUB
    # (the server forgot s' after INITIATE, RFC 26: the same boxes open from the other end)
    assert b.security._t_secret == b"" and b.security._cookie_key == b""  # type: ignore[union-attr]
    vouch = sodium.crypto_box_open(inner[48:128], b"VOUCH---" + inner[32:48], server_t, C_SEC)
    assert vouch == client_t + S_PUB
    assert inner[128:] == b"\x0bSocket-Type\x00\x00\x00\x03REQ\x08Identity\x00\x00\x00\x00"
    # READY: >= 30 bytes: name, short nonce 1, box[metadata]
    assert len(ready) >= READY_MIN and ready[:6] == b"\x05READY"
    assert ready[6:14] == struct.pack(">Q", 1)
    assert sodium.crypto_box_open(ready[14:], b"CurveZMQREADY---" + ready[6:14], server_t,
                                  a.security._t_secret) == b"\x0bSocket-Type\x00\x00\x00\x03REP"  # type: ignore[union-attr]
    # MESSAGE: a plain frame (flags 0, as libzmq sends it), nonce 3, flags+payload in a box
    wire = a.send_message((b"", b"hello"))
    (f0, m0), (f1, m1) = frames_of(wire)
    assert (f0, f1) == (0, 0) and m0[:8] == b"\x07MESSAGE" and m0[8:16] == struct.pack(">Q", 3)
    assert sodium.crypto_box_open(m1[16:], b"CurveZMQMESSAGEC" + m1[8:16], server_t,
                                  a.security._t_secret) == b"\x00hello"  # type: ignore[union-attr]
    assert sodium.crypto_box_open(m0[16:], b"CurveZMQMESSAGEC" + m0[8:16], server_t,
                                  a.security._t_secret) == b"\x01"  # type: ignore[union-attr]
    b.receive_data(wire)
    assert b.next_event() == (b"", b"hello")
    b.receive_data(a.send_message((b"x" * 70000,)))  # long frames
    assert b.next_event() == (b"x" * 70000,)
    a.receive_data(b.send_message((b"", b"re")))
    assert a.next_event() == (b"", b"re")


def test_curve_ping_pong_travel_sealed() -> None:
    a = codec("REQ", CurveClient(C_PUB, C_SEC, S_PUB))
    b = codec("REP", CurveServer(S_PUB, S_SEC))
    pump(a, b)
    ping = a.ping(10, b"ctx")
    assert frames_of(ping)[0][1][:8] == b"\x07MESSAGE"
    b.receive_data(ping)
    ev = b.next_event()
    assert ev is not None and type(ev).__name__ == "Ping"
    a.receive_data(b.data_to_send())
    ev = a.next_event()
    assert ev is not None and type(ev).__name__ == "Pong"


def test_curve_streaming_between_sealed_messages() -> None:
    """The kernel seam on a sealed stream: ``streaming`` after the handshake, off while the
    boxes of a multipart message come in one by one, on again once it is whole."""
    a = codec("REQ", CurveClient(C_PUB, C_SEC, S_PUB))
    b = codec("REP", CurveServer(S_PUB, S_SEC))
    assert not b.streaming
    pump(a, b)
    assert b.streaming
    (f0, m0), (f1, m1) = frames_of(a.send_message((b"", b"hello")))
    b.receive_data(bytes((f0, len(m0))) + m0)  # the first box (MORE inside): begun
    assert b.next_event() is None and not b.streaming
    b.receive_data(bytes((f1, len(m1))) + m1)
    assert b.next_event() == (b"", b"hello") and b.streaming


def test_curve_unknown_key_refused_and_replay_detected() -> None:
    deny = lambda mech, creds: AuthResult(creds["client_key"] == "nobody", "unknown-key")  # noqa: E731
    a = codec("REQ", CurveClient(C_PUB, C_SEC, S_PUB))
    b = codec("REP", CurveServer(S_PUB, S_SEC, deny))
    with pytest.raises(AuthenticationFailed):
        pump(a, b)
    assert b.data_to_send() == b"\x04\x0a\x05ERROR\x03400"
    # replay: the same MESSAGE twice
    a = codec("REQ", CurveClient(C_PUB, C_SEC, S_PUB))
    b = codec("REP", CurveServer(S_PUB, S_SEC))
    pump(a, b)
    wire = a.send_message((b"", b"once"))
    b.receive_data(wire)
    assert b.next_event() == (b"", b"once")
    b.receive_data(wire)
    with pytest.raises(CryptoError):
        b.next_event()


def test_curve_wrong_server_key_fails_at_hello() -> None:
    other, _ = keypair()
    a = codec("REQ", CurveClient(C_PUB, C_SEC, other))
    b = codec("REP", CurveServer(S_PUB, S_SEC))
    with pytest.raises(CryptoError):
        pump(a, b)


def _server_after_greeting(mech: object) -> ZmtpCodec:
    b = codec("REP", mech)
    peer = codec("REQ", CurveClient(C_PUB, C_SEC, S_PUB) if isinstance(mech, CurveServer)
                 else PlainClient(b"u", b"p"))
    b.initiate()
    b.receive_data(full_greeting(peer))
    assert b.next_event() is None
    b.data_to_send()  # the rest of b's greeting
    return b


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.sampled_from(["CURVE", "PLAIN"]))
def test_fuzz_only_protocol_errors_escape(data: bytes, which: str) -> None:
    mech = CurveServer(S_PUB, S_SEC) if which == "CURVE" else PlainServer()
    b = _server_after_greeting(mech)
    b.receive_data(data)
    try:
        for _ in range(50):
            if b.next_event() is None:
                break
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=300), st.integers(min_value=0, max_value=199))
def test_fuzz_tampered_hello_and_commands(noise: bytes, at: int) -> None:
    """A real HELLO with a byte of its name, version, padding, key, nonce or box changed:
    refused with a protocol error, never anything else (the padding is checked: RFC 26's 72
    zero bytes; libzmq does not look at them)."""
    a = codec("REQ", CurveClient(C_PUB, C_SEC, S_PUB))
    b = _server_after_greeting(CurveServer(S_PUB, S_SEC))
    hello = bytearray(_first_command(a, codec("REP", CurveServer(S_PUB, S_SEC))))
    checked = [*range(2, 202)]  # frame header 2 bytes, then the command
    pos = checked[at % len(checked)]
    hello[pos] ^= noise[0] or 1
    b.receive_data(bytes(hello) + noise)
    with pytest.raises(RemoteProtocolError):
        for _ in range(10):
            b.next_event()


@pytest.mark.parametrize("revision", [0, 1])
def test_secured_endpoint_refuses_a_zmtp_1_or_2_peer(revision: int) -> None:
    """RFC 37: with a mechanism other than NULL a 1.0/2.0 peer is refused (no downgrade)."""
    b = codec("REP", CurveServer(S_PUB, S_SEC))
    assert b.mechanism == "CURVE"  # what the version negotiation's downgrade hook reads
    b.receive_data(b"\xff" + b"\x00" * 8 + b"\x7f" + bytes((revision,)) + b"\x03")
    with pytest.raises(RemoteProtocolError):
        b.next_event()


# -- issue 20 ----------------------------------------------------------------------------------
def _sealed_frame(c: ZmtpCodec, outer: int, inner: int, payload: bytes) -> bytes:
    """One MESSAGE frame with the given outer ZMTP flags and inner (boxed) flags."""
    assert c.security is not None
    body = c.security.seal(inner, payload)
    return bytes((outer, len(body))) + body


def test_curve_message_with_the_outer_more_flag_is_accepted() -> None:
    """Finding 13: another ZeroMQ implementation sets MORE (0x01) on the outer frame of every
    CURVE MESSAGE but a multipart message's last; libzmq 4.3.5 reads the MORE bit inside the
    box (RFC 26). These are its frames, byte for byte: accepted, the message whole."""
    a = codec("DEALER", CurveClient(C_PUB, C_SEC, S_PUB))
    b = codec("ROUTER", CurveServer(S_PUB, S_SEC))
    pump(a, b)
    parts = (b"", b"topic", b"payload" * 10)
    wire = b"".join(_sealed_frame(a, 0x01 if i < 2 else 0x00, 0x01 if i < 2 else 0x00, p)
                    for i, p in enumerate(parts))
    assert [f for f, _ in frames_of(wire)] == [0x01, 0x01, 0x00]
    b.receive_data(wire)
    assert b.next_event() == parts
    # what libzmq itself sends still works (outer flags 0, MORE inside)
    b.receive_data(a.send_message(parts))
    assert b.next_event() == parts


@pytest.mark.parametrize("outer", [0x04, 0x05, 0x08, 0x10, 0x80])
def test_curve_message_frame_with_command_or_reserved_bits_is_refused(outer: int) -> None:
    a = codec("DEALER", CurveClient(C_PUB, C_SEC, S_PUB))
    b = codec("ROUTER", CurveServer(S_PUB, S_SEC))
    pump(a, b)
    b.receive_data(_sealed_frame(a, outer, 0x00, b"x"))
    with pytest.raises(RemoteProtocolError, match="bad CURVE MESSAGE frame flags"):
        b.next_event()


def test_curve_hello_padding_must_be_zero() -> None:
    a = codec("REQ", CurveClient(C_PUB, C_SEC, S_PUB))
    b = _server_after_greeting(CurveServer(S_PUB, S_SEC))
    hello = bytearray(_first_command(a, codec("REP", CurveServer(S_PUB, S_SEC))))
    hello[2 + 8 + 40] = 1  # a byte of the 72-byte padding
    b.receive_data(bytes(hello))
    with pytest.raises(CryptoError, match="padding"):
        b.next_event()


def test_curve_server_forgets_its_cookie_key_and_transient_secret() -> None:
    """RFC 26: once INITIATE is in, the cookie key and s' are discarded (49db3ab kept them for
    the whole connection)."""
    a = codec("REQ", CurveClient(C_PUB, C_SEC, S_PUB))
    b = codec("REP", CurveServer(S_PUB, S_SEC))
    pump(a, b)
    server = b.security
    assert server._cookie_key == b"" and server._t_secret == b""  # type: ignore[union-attr]
    b.receive_data(a.send_message((b"", b"still works")))
    assert b.next_event() == (b"", b"still works")


# -- keys of low order (fuzz: curve-low-order) -------------------------------------------------
LOW_ORDER = [bytes(32), b"\x01" + bytes(31),  # 0 and 1: libsodium's crypto_box_beforenm refuses
             bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")]


@pytest.mark.parametrize("server_t", LOW_ORDER, ids=["zero", "one", "order-8"])
def test_curve_client_refuses_a_welcome_with_a_low_order_transient_key(server_t: bytes) -> None:
    """A WELCOME sealed honestly (server's long-term key) to our C', carrying an S' of low
    order: libsodium's beforenm fails; the codec raises its CryptoError (handshake reason
    'curve'), never nacl's RuntimeError."""
    server = codec("REP", CurveServer(S_PUB, S_SEC))
    a = codec("REQ", CurveClient(C_PUB, C_SEC, S_PUB))
    hello = _first_command(a, server)
    assert hello[:8] == b"\x04\xc8\x05HELLO"
    client_t = hello[8 + 74:8 + 106]
    long_nonce = b"n" * 16
    box = sodium.crypto_box(server_t + b"c" * 96, b"WELCOME-" + long_nonce, client_t, S_SEC)
    welcome = b"\x07WELCOME" + long_nonce + box
    assert len(welcome) == WELCOME_SIZE
    a.receive_data(b"\x04" + bytes((len(welcome),)) + welcome)
    with pytest.raises(CryptoError) as info:
        a.next_event()
    assert isinstance(info.value, RemoteProtocolError)
    assert info.value.handshake_reason == "curve" and "low order" in str(info.value)


@pytest.mark.parametrize("client_t", LOW_ORDER, ids=["zero", "one", "order-8"])
def test_curve_server_refuses_a_hello_with_a_low_order_transient_key(client_t: bytes) -> None:
    b = _server_after_greeting(CurveServer(S_PUB, S_SEC))
    hello = (b"\x05HELLO\x01\x00" + bytes(72) + client_t + b"\x00" * 7 + b"\x01"
             + bytes(80))
    assert len(hello) == HELLO_SIZE
    b.receive_data(b"\x04" + bytes((len(hello),)) + hello)
    with pytest.raises(CryptoError) as info:
        b.next_event()
    assert info.value.handshake_reason == "curve"
