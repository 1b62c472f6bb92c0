"""ZWS 2.0 (RFC 45) as a sans-IO codec: exact bytes of its frames and commands, the
subprotocol choice as a table, NULL, PLAIN and the mechanism-less ``ZWS2.0`` handshakes, and
the bad input it refuses (against a raw wsproto peer, which masks as a browser does)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from _aio import bounded, until
from gateway_plugins.ws.link import Forbidden, Refused, origin_allowed
from gateway_plugins.ws.zws import BARE, NULL, PLAIN, ZwsCodec, command, frames
from hypothesis import given, settings
from hypothesis import strategies as st
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, RejectConnection, Request

import gateway
from gateway.engine.codecs import zmtp_role
from gateway.errors import MessageTooLarge, PairingError, RemoteProtocolError
from gateway.metrics import METRICS
from gateway.wire.events import HandshakeComplete, Ping, Subscription
from gateway.wire.zmtp_mechanism import allow_all
from gateway.wire.zmtp_plain import PlainClient, PlainServer

READY_REP = b"\x02\x05READY\x0bSocket-Type\x00\x00\x00\x03REP"


def test_frames_and_commands_are_a_flags_byte_and_the_body() -> None:
    assert frames((b"", b"hi")) == [b"\x01", b"\x00hi"]
    assert frames((b"x",)) == [b"\x00x"]
    assert command(b"READY", b"\x0bSocket-Type\x00\x00\x00\x03REP") == READY_REP
    assert command(b"PONG") == b"\x02\x04PONG"


def _server(kind: str = "REP", **kw: object) -> ZwsCodec:
    return ZwsCodec(zmtp_role(kind, False), address="127.0.0.1:1/zmq", **kw)  # type: ignore[arg-type]


def _client(kind: str = "REQ", **kw: object) -> ZwsCodec:
    return ZwsCodec(zmtp_role(kind, False), address="127.0.0.1:1/zmq", client=True,
                    **kw)  # type: ignore[arg-type]


def _raw(server: ZwsCodec, protocols: list[str], headers: list[tuple[bytes, bytes]] = ()
         ) -> tuple[WSConnection, object]:
    """A raw wsproto client's upgrade to ``server``: (the client, what the server made of it:
    its event, or the exception it raised); the server's answer (with what follows it: READY,
    the routing id) is kept in ``SENT``."""
    ws = WSConnection(ConnectionType.CLIENT)
    server.receive_data(ws.send(Request(host="127.0.0.1:1", target="/zmq",
                                        subprotocols=protocols, extra_headers=list(headers))))
    try:
        got: object = server.next_event()
    except RemoteProtocolError as exc:
        got = exc
    SENT[:] = [server.data_to_send()]
    ws.receive_data(SENT[0])
    return ws, got


SENT: list[bytes] = []


@pytest.mark.parametrize(("offered", "plain", "chosen"), [
    ([BARE], False, BARE),
    ([NULL, BARE], False, NULL),  # libzmq's offer
    ([BARE, NULL], False, NULL),  # ours: a listener prefers NULL (it checks the socket type)
    ([PLAIN], False, None),
    ([NULL, BARE], True, None),
    ([PLAIN], True, PLAIN),
    (["rep.sp.nanomsg.org"], False, None),
])
def test_the_listener_chooses_the_subprotocol(offered: list[str], plain: bool,
                                              chosen: str | None) -> None:
    security = PlainServer(allow_all) if plain else None
    ws, got = _raw(_server(security=security), offered)
    answer = next(ws.events())
    if chosen is None:
        assert isinstance(got, Refused) and got.handshake_reason == "ws-upgrade"
        assert isinstance(answer, RejectConnection) and answer.status_code == 400
    else:
        assert got is None  # the handshake goes on with READY (or the routing id)
        assert isinstance(answer, AcceptConnection) and answer.subprotocol == chosen


def test_a_dialer_offers_bare_first_then_null_and_plain_alone() -> None:
    assert b"Sec-WebSocket-Protocol: ZWS2.0, ZWS2.0/NULL" in _client().initiate()
    plain = _client(security=PlainClient(b"u", b"p"))
    assert b"Sec-WebSocket-Protocol: ZWS2.0/PLAIN\r\n" in plain.initiate()


def test_null_the_server_sends_ready_exact_bytes_and_checks_the_socket_type() -> None:
    server = _server()
    ws, _ = _raw(server, [NULL])
    # READY right behind the 101 answer, unmasked (a server's frames are not masked)
    assert SENT[0].endswith(b"\r\n\r\n\x82" + bytes((len(READY_REP),)) + READY_REP)
    assert [bytes(e.data) for e in ws.events() if isinstance(e, BytesMessage)] == [READY_REP]
    server.receive_data(ws.send(BytesMessage(data=command(
        b"READY", b"\x0bSocket-Type\x00\x00\x00\x03REQ\x08Identity\x00\x00\x00\x02id"))))
    done = server.next_event()
    assert isinstance(done, HandshakeComplete)
    assert (done.peer_type, done.identity, server.handshake_stage) == ("REQ", b"id", "done")
    for data in (b"\x01", b"\x00body"):  # one ZeroMQ frame a WebSocket message
        server.receive_data(ws.send(BytesMessage(data=data)))
    assert server.next_event() == (b"", b"body")
    assert server.send_message((b"", b"re")) == b"\x82\x01\x01\x82\x03\x00re"


def test_null_a_peer_of_the_wrong_type_is_refused() -> None:
    server = _server()
    ws, _ = _raw(server, [NULL])
    server.receive_data(ws.send(BytesMessage(data=command(
        b"READY", b"\x0bSocket-Type\x00\x00\x00\x03REP"))))
    with pytest.raises(PairingError, match="REP cannot talk to REP"):
        server.next_event()


def test_bare_zws20_starts_with_the_routing_ids() -> None:
    server = _server("ROUTER")
    ws, _ = _raw(server, [BARE])
    assert SENT[0].endswith(b"\r\n\r\n\x82\x01\x00")  # our (empty) routing id
    assert server.handshake_stage == "identity"
    server.receive_data(ws.send(BytesMessage(data=b"\x00client-7")))
    done = server.next_event()
    assert isinstance(done, HandshakeComplete) and done.identity == b"client-7"
    server.receive_data(ws.send(BytesMessage(data=b"\x00hello")))
    assert server.next_event() == (b"hello",)


def test_native_codecs_talk_null_plain_and_bare_to_each_other() -> None:
    for security in (None, "plain"):
        client = _client(security=PlainClient(b"u", b"p") if security else None)
        server = _server(security=PlainServer(allow_all) if security else None)
        server.receive_data(client.initiate())
        got = []
        for _ in range(8):  # bounded: the handshake takes a few rounds
            for a, b in ((server, client), (client, server)):
                out = a.data_to_send()
                if out:
                    b.receive_data(out)
                while (event := b.next_event()) is not None:
                    got.append((b is server, event))
        assert client.handshake_done and server.handshake_done
        assert client.subprotocol == server.subprotocol == (PLAIN if security else NULL)
        server.receive_data(client.send_message((b"", b"x" * 300)))
        assert server.next_event() == (b"", b"x" * 300)


def test_subscriptions_are_messages_and_commands_are_taken_too() -> None:
    pub = _server("PUB")
    ws, _ = _raw(pub, [BARE])
    pub.receive_data(ws.send(BytesMessage(data=b"\x00")))
    assert isinstance(pub.next_event(), HandshakeComplete)
    assert pub.subscription_frame(True, b"a.") == b"\x82\x04\x00\x01a."
    pub.receive_data(ws.send(BytesMessage(data=b"\x00\x01a.")))
    assert pub.next_event() == (b"\x01a.",)  # the publishing pattern reads the 3.0 form
    pub.receive_data(ws.send(BytesMessage(data=command(b"SUBSCRIBE", b"b."))))
    assert pub.next_event() == Subscription(subscribe=True, topic=b"b.")
    pub.receive_data(ws.send(BytesMessage(data=command(b"PING", b"\x00\x00ctx"))))
    assert pub.next_event() == Ping(ttl=0, context=b"ctx")
    assert pub.data_to_send() == b"\x82\x09" + command(b"PONG", b"ctx")


@pytest.mark.parametrize(("data", "error"), [
    (b"", "empty ZWS message"),
    (b"\x04x", "reserved bits"),
    (b"\x00" + b"x" * 70_000, "over"),
])
def test_bad_frames_are_refused(data: bytes, error: str) -> None:
    server = _server(max_message_size=65_536)
    ws, _ = _raw(server, [BARE])
    server.receive_data(ws.send(BytesMessage(data=b"\x00")))
    server.next_event()
    server.receive_data(ws.send(BytesMessage(data=data)))
    with pytest.raises(RemoteProtocolError, match=error) as info:
        server.next_event()
    if error == "over":
        assert isinstance(info.value, MessageTooLarge)


def test_data_before_ready_is_refused() -> None:
    server = _server()
    ws, _ = _raw(server, [NULL])
    server.receive_data(ws.send(BytesMessage(data=b"\x00early")))
    with pytest.raises(RemoteProtocolError, match="before the handshake"):
        server.next_event()


@pytest.mark.parametrize(("origin", "host", "allowed", "ok"), [
    (None, "gw:8080", None, True),  # not a browser
    ("http://gw:8080", "gw:8080", None, True),  # same origin
    ("http://GW:8080/", "gw:8080", None, True),
    ("https://gw", "gw:443", None, True),
    ("http://gw:8081", "gw:8080", None, False),
    ("http://evil.example", "gw:8080", None, False),
    ("null", "gw:8080", None, False),
    ("http://evil.example", "gw:8080", ("http://evil.example",), True),
    ("http://app:80", "gw", ("http://app",), True),
    ("http://other", "gw", ("http://app",), False),
    ("http://other", "gw", ("*",), True),
])
def test_the_origin_rule(origin: str | None, host: str, allowed: tuple[str, ...] | None,
                         ok: bool) -> None:
    assert origin_allowed(origin, host, allowed) is ok


def test_a_page_from_another_origin_is_answered_403() -> None:
    server = _server(origins=("https://app.example.com",))
    ws, got = _raw(server, [BARE], [(b"Origin", b"https://evil.example")])
    assert isinstance(got, Forbidden) and got.handshake_reason == "origin"
    assert got.farewell and "https://evil.example" in str(got)
    answer = next(ws.events())
    assert isinstance(answer, RejectConnection) and answer.status_code == 403


# -- the native engine over zmq+ws://, both ends ours -------------------------------------------

@pytest.mark.parametrize(("server", "client", "bind_server"), [
    ("REP", "REQ", True), ("REP", "REQ", False), ("ROUTER", "DEALER", True),
    ("ROUTER", "REQ", False),
])
@bounded(20)
async def test_native_request_reply_over_zws_both_roles(server: str, client: str,
                                                        bind_server: bool) -> None:
    async with gateway.Socket(server) as srv, gateway.Socket(client) as cli:
        binder, dialer = (srv, cli) if bind_server else (cli, srv)
        url = binder.bind("zmq+ws://127.0.0.1:0/zmq")
        assert url.startswith("zmq+ws://127.0.0.1:") and url.endswith("/zmq")
        dialer.connect(url)
        for body in (b"", b"x", b"y" * 200_000):
            if client == "DEALER":
                await cli.send_multipart([b"", body])
            else:
                await cli.send(body)
            got = await asyncio.wait_for(srv.recv_multipart(), 10)
            got[-1] = got[-1][::-1]
            await srv.send_multipart(got)
            reply = await asyncio.wait_for(cli.recv_multipart(), 10)
            assert reply[-1] == body[::-1]


@pytest.mark.parametrize(("sender", "receiver"), [("PUB", "SUB"), ("XPUB", "SUB"),
                                                  ("PUSH", "PULL"), ("PAIR", "PAIR")])
@bounded(20)
async def test_native_patterns_over_zws(sender: str, receiver: str) -> None:
    options = {"subscribe": b"a"} if receiver == "SUB" else {}
    async with gateway.Socket(sender) as out, gateway.Socket(receiver, **options) as into:
        into.connect(out.bind("zmq+ws://127.0.0.1:0/"))
        await asyncio.wait_for(out.wait_peers(1), 10)
        for _ in range(100):  # a subscription may still be on its way: publish again
            await out.send(b"b-skip" if receiver == "SUB" else b"a-take")
            await out.send(b"a-take")
            try:
                assert await asyncio.wait_for(into.recv(), 0.1) == b"a-take"
                return
            except TimeoutError:
                continue
        raise AssertionError("nothing arrived over zws")


@bounded(20)
async def test_native_plain_over_zws_and_a_wrong_password_is_refused(tmp_path: Path) -> None:
    passwords = tmp_path / "passwords"
    passwords.write_text("alice=secret\n")
    passwords.chmod(0o600)
    good, bad = tmp_path / "good", tmp_path / "bad"
    for path, text in ((good, "secret"), (bad, "wrong")):
        path.write_text(text)
        path.chmod(0o600)
    async with gateway.Socket("REP", plain_server=True, plain_passwords=str(passwords)) as rep, \
            gateway.Socket("REQ", plain_username="alice", plain_password_file=str(good)) as req, \
            gateway.Socket("REQ", plain_username="alice", plain_password_file=str(bad)) as liar:
        url = rep.bind("zmq+ws://127.0.0.1:0/p")
        before = METRICS.get("gateway_auth_failures_total", socket="REP", mechanism="PLAIN",
                               reason="bad-password")
        liar.connect(url)
        req.connect(url)
        await req.send(b"hi")
        assert await asyncio.wait_for(rep.recv(), 10) == b"hi"
        await rep.send(b"ok")
        assert await asyncio.wait_for(req.recv(), 10) == b"ok"
        await until(lambda: METRICS.get("gateway_auth_failures_total", socket="REP",
                                          mechanism="PLAIN", reason="bad-password") > before)


@bounded(20)
async def test_a_page_from_another_origin_is_refused_403_counted_and_others_served() -> None:
    async with gateway.Socket("REP", name="web") as rep:
        url = rep.bind("zmq+ws://127.0.0.1:0/zmq")
        port = int(url.split(":")[2].split("/")[0])
        before = METRICS.get("gateway_refused_connections_total", socket="web",
                               reason="origin")

        def probe(origin: bytes) -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /zmq HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                          b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                          b"Sec-WebSocket-Protocol: ZWS2.0\r\nOrigin: %s\r\n"
                          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n" % (port, origin))
                return s.recv(4096)

        assert (await asyncio.to_thread(probe, b"http://evil.example")).startswith(
            b"HTTP/1.1 403")
        same = await asyncio.to_thread(probe, b"http://127.0.0.1:%d" % port)
        assert same.startswith(b"HTTP/1.1 101") and b"Sec-WebSocket-Protocol: ZWS2.0" in same
        await until(lambda: METRICS.get("gateway_refused_connections_total", socket="web",
                                          reason="origin") == before + 1)


# -- what a peer may send: the codec contract holds -----------------------------------------------

@settings(max_examples=150, deadline=None)
@given(protocol=st.sampled_from([BARE, NULL]),
       payloads=st.lists(st.binary(max_size=40), max_size=8), raw=st.binary(max_size=64))
def test_any_frames_or_bytes_after_the_upgrade_raise_only_protocol_errors(
        protocol: str, payloads: list[bytes], raw: bytes) -> None:
    """Whatever binary messages (then raw bytes) a client sends after the upgrade:
    ``receive_data`` never raises, ``next_event`` raises a ``RemoteProtocolError`` at most,
    and every message it gives is a tuple of frames within the size limit."""
    server = _server("ROUTER", max_message_size=64)
    ws, _ = _raw(server, [protocol])
    data = b"".join(ws.send(BytesMessage(data=p)) for p in payloads) + raw
    for cut in range(0, len(data), 7):  # any split of the stream
        server.receive_data(data[cut:cut + 7])
    for _ in range(len(payloads) + 2):  # bounded: one event per message at most, then None
        try:
            event = server.next_event()
        except RemoteProtocolError:
            break
        if event is None:
            break
        if isinstance(event, tuple):
            assert sum(len(f) for f in event) <= 64
