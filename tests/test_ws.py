"""gateway_plugins.ws: SP over WebSocket, native socket against native socket (pynng peers are
in interop_tests/test_gateway_ws.py)."""

from __future__ import annotations

import asyncio
import socket

import pytest
from gateway_plugins.ws import SUFFIX, WsSpCodec, split_address
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Ping, Request

import gateway


@pytest.mark.parametrize(("kind", "ours", "asks"), [
    ("REQ", "req", "rep"), ("REP", "rep", "req"), ("PUB", "pub", "sub"), ("SUB", "sub", "pub"),
    ("PUSH", "push", "pull"), ("PAIR", "pair", "pair"), ("PAIR1", "pair1", "pair1"),
])
def test_subprotocol_names_are_nng_s(kind: str, ours: str, asks: str) -> None:
    """The names come from the one SP protocol table (gateway.patterns.pairing), as nng
    spells them: the dialer asks for the peer's, the listener answers its own."""
    from gateway.engine.codecs import sp_role

    dialer = WsSpCodec(sp_role(kind), address="h:1/p", client=True)
    request = dialer.initiate()
    assert b"GET /p HTTP/1.1" in request
    assert f"Sec-WebSocket-Protocol: {asks}{SUFFIX}".encode() in request
    listener = WsSpCodec(sp_role(kind), address="h:1/p")
    assert listener._ours == f"{ours}{SUFFIX}" and listener.initiate() == b""


def test_a_ws_codec_talks_to_another_byte_for_byte() -> None:
    """Two codecs, no sockets: the upgrade is the handshake, then one WebSocket message per SP
    message (its backtrace and body, no length prefix), fragments reassembled."""
    from gateway.engine.codecs import sp_role
    from gateway.wire.events import HandshakeComplete

    req = WsSpCodec(sp_role("REQ"), address="h:1/svc", client=True)
    rep = WsSpCodec(sp_role("REP"), address="h:1/svc")
    rep.receive_data(req.initiate())
    assert rep.next_event() == HandshakeComplete(peer_type="req0", version=(0, 0))
    req.receive_data(rep.data_to_send())
    assert req.next_event() == HandshakeComplete(peer_type="rep0", version=(0, 0))
    wire = req.send_message((b"\x80\x00\x00\x01", b"hello"))
    assert wire == b"\x82\x89" + wire[2:6] + bytes(
        b ^ wire[2 + i % 4] for i, b in enumerate(b"\x80\x00\x00\x01hello"))  # masked
    rep.receive_data(wire)
    assert rep.next_event() == (b"\x80\x00\x00\x01hello",)


@pytest.mark.parametrize(("address", "parts"), [
    ("127.0.0.1:80/a/b", ("127.0.0.1:80", "/a/b")),
    ("127.0.0.1:0", ("127.0.0.1:0", "/")),
    ("[::1]:8080/", ("[::1]:8080", "/")),
])
def test_split_address(address: str, parts: tuple[str, str]) -> None:
    assert split_address(address) == parts


def test_native_req_rep_over_ws_both_roles() -> None:
    async def main() -> None:
        async with gateway.Socket("REP") as rep, gateway.Socket("REQ") as req:
            url = rep.bind("sp+ws://127.0.0.1:0/svc")
            assert url.startswith("sp+ws://127.0.0.1:") and url.endswith("/svc")
            req.connect(url)
            for body in (b"", b"x", b"y" * 200_000):
                await req.send(body)
                got = await asyncio.wait_for(rep.recv(), 10)
                await rep.send(got[::-1])
                assert await asyncio.wait_for(req.recv(), 10) == body[::-1]

    asyncio.run(main())


def test_pub_sub_over_ws_uses_the_sub_and_pub_names() -> None:
    async def main() -> None:
        async with gateway.Socket("PUB") as pub, gateway.Socket("SUB") as sub:
            url = pub.bind("sp+ws://127.0.0.1:0/feed")
            sub.subscribe(b"a")
            sub.connect(url)
            await asyncio.wait_for(pub.wait_peers(1), 10)
            for _ in range(50):  # the subscriber's pipe may still be opening: publish again
                await pub.send(b"b-skip")
                await pub.send(b"a-take")
                try:
                    assert await asyncio.wait_for(sub.recv(), 0.2) == b"a-take"
                    return
                except TimeoutError:
                    continue
            raise AssertionError("nothing arrived over ws")

    asyncio.run(main())


def test_a_raw_http_client_without_the_subprotocol_is_answered_400() -> None:
    async def main() -> None:
        async with gateway.Socket("REP") as rep:
            url = rep.bind("sp+ws://127.0.0.1:0/svc")
            port = int(url.split(":")[2].split("/")[0])

            def probe() -> bytes:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    s.sendall(b"GET /svc HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                              b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
                    return s.recv(4096)

            answer = await asyncio.to_thread(probe)
            assert answer.startswith(b"HTTP/1.1 400")

    asyncio.run(main())


def test_curve_over_ws_and_origin_off_a_websocket_are_refused() -> None:
    from gateway.plugins import registry
    from gateway.settings.checks import endpoint_rules

    ws, tcp = registry().transport("ws"), registry().transport("tcp")
    curve = {"curve_server": True, "curve_cert": "/x.key_secret"}
    assert any("CURVE over ws" in e for e in endpoint_rules(curve, "zmtp", ws, True))
    assert not endpoint_rules({"plain_server": True, "plain_allow_any": True}, "zmtp", ws, True)
    origin = {"origin": ("https://a.example",)}
    assert any(e.startswith("origin: applies to WebSocket") for e in
               endpoint_rules(origin, "zmtp", tcp, True))
    assert not endpoint_rules(origin, "sp", ws, True)
    assert any(e.startswith("origin: applies to a bound endpoint") for e in
               endpoint_rules(origin, "sp", ws, False))


def test_a_ping_flood_from_a_client_that_does_not_read_queues_nothing() -> None:
    """Issue 20, finding 4 (ws): 49db3ab queued one pong per ping without limit (29 MB in the
    review); now a client that does not read gets no pong until it does."""

    async def main() -> None:
        async with gateway.Socket("REP", hwm=10) as rep:
            port = int(rep.bind("sp+ws://127.0.0.1:0/x").rsplit(":", 1)[1].split("/")[0])
            loop = asyncio.get_running_loop()
            raw = socket.socket()
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            raw.setblocking(False)
            await loop.sock_connect(raw, ("127.0.0.1", port))
            ws = WSConnection(ConnectionType.CLIENT)
            await loop.sock_sendall(raw, ws.send(Request(
                host=f"127.0.0.1:{port}", target="/x", subprotocols=["rep.sp.nanomsg.org"])))
            async with asyncio.timeout(5):
                while not any(isinstance(e, AcceptConnection) for e in ws.events()):
                    ws.receive_data(await loop.sock_recv(raw, 4096))
            await rep.wait_peers(1)
            [pipe] = rep.endpoints.pipes
            conn = pipe.transport
            conn.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            ping = ws.send(Ping(payload=b"p" * 100))
            for _ in range(40):
                await loop.sock_sendall(raw, ping * 1000)
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.5)
            assert pipe.buffered <= pipe._high + 200  # 49db3ab: ~4 MB of pongs
            assert rep.peers == 1
            raw.close()

    asyncio.run(main())


# -- what wsproto raises on a peer's bytes (fuzz: ws-non-ascii-header) -------------------------
_UPGRADE = (b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")


@pytest.mark.parametrize(("request_", "status"), [
    (_UPGRADE + b"Sec-WebSocket-Protocol: \x80\r\n\r\n", b"400"),  # UnicodeDecodeError (ascii)
    (_UPGRADE.replace(b"Host: x", b"Host: \xff\xfe") + b"\r\n", b"400"),  # (idna)
    (b"GARBAGE\r\n\r\n", b"400"),  # h11: Bad HTTP message
    (_UPGRADE.replace(b"Sec-WebSocket-Version: 13", b"Sec-WebSocket-Version: 8") + b"\r\n",
     b"426"),  # wsproto's own answer
])
def test_a_request_wsproto_cannot_read_is_a_refused_upgrade(request_: bytes,
                                                            status: bytes) -> None:
    """receive_data never raises; next_event raises the codec's Refused (handshake reason
    sp-protocol, with the HTTP answer as its farewell), never wsproto's or a UnicodeError."""
    from gateway.engine.codecs import sp_role
    from gateway.errors import RemoteProtocolError

    rep = WsSpCodec(sp_role("REP"), address="h:1/")
    rep.receive_data(request_)
    with pytest.raises(RemoteProtocolError) as info:
        rep.next_event()
    assert info.value.handshake_reason == "sp-protocol"
    assert getattr(info.value, "farewell", False)
    assert rep.data_to_send().startswith(b"HTTP/1.1 " + status)
    with pytest.raises(RemoteProtocolError):  # and it stays failed
        rep.next_event()
    rep.receive_data(b"more")


def test_a_server_answer_wsproto_cannot_read_is_a_failed_handshake() -> None:
    from gateway.engine.codecs import sp_role
    from gateway.errors import RemoteProtocolError

    req = WsSpCodec(sp_role("REQ"), address="h:1/", client=True)
    req.initiate()
    req.receive_data(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: x\r\n"
                     b"Sec-WebSocket-Protocol: \x80\r\n\r\n")
    with pytest.raises(RemoteProtocolError) as info:
        req.next_event()
    assert info.value.handshake_reason == "sp-protocol"


def test_a_non_ascii_header_from_a_real_client_is_answered_400_without_a_traceback() -> None:
    """Through the engine: the client gets HTTP 400, the loop's exception handler is never
    called (asyncio's 'Fatal error: protocol.data_received() call failed'), and the listener
    still serves a real client afterwards."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fatal: list[dict[str, object]] = []
        loop.set_exception_handler(lambda _loop, context: fatal.append(context))
        async with gateway.Socket("REP") as rep, gateway.Socket("REQ") as req:
            url = rep.bind("sp+ws://127.0.0.1:0/")
            port = int(url.split(":")[2].split("/")[0])

            def probe() -> bytes:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    s.sendall(_UPGRADE + b"Sec-WebSocket-Protocol: \x80\r\n\r\n")
                    return s.recv(4096)

            answer = await asyncio.to_thread(probe)
            assert answer.startswith(b"HTTP/1.1 400")
            req.connect(url)
            await req.send(b"still here")
            assert await asyncio.wait_for(rep.recv(), 10) == b"still here"
        assert not fatal, fatal

    asyncio.run(main())
