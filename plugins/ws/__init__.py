"""SP over WebSocket: ``sp+ws://host:port/path`` and ``sp+wss://`` (TLS), on wsproto.

The SP WebSocket mapping (nanomsg ``sp-websocket-mapping-01``; nng ``src/sp/transport/ws``):
the dialer asks for the *peer's* protocol as its subprotocol, ``<name>.sp.nanomsg.org``
(``rep.sp.nanomsg.org`` from a REQ), the listener accepts only its own name and echoes it; each
SP message (its header words and body) is one binary WebSocket message; there is no 8-byte SP
header (the subprotocol stands for it) and no length prefix.

The engine's SP codec speaks the TCP mapping, so :class:`WsShim` sits between it and the
connection and translates: it learns the socket's protocol from the 8-byte header the codec
writes first (and swallows it), does the HTTP upgrade, gives the codec the header of the peer
protocol the subprotocol names, turns each incoming WebSocket message into ``u64 size +
payload`` and each outgoing one back. Pings are answered, fragments reassembled (bounded by the
socket's largest message), and a refused upgrade is a failed handshake (``sp-protocol``), logged
and counted by the engine like any other. One listener per port; a request for another path is
answered 404.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from typing import Any

from gateway_plugins.tcp import TcpTransport
from gateway_plugins.tls import TlsShim
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from gateway.hookspecs import hookimpl
from gateway.transport import KeepAlive, Layer, ProtocolFactory, ServerListener
from gateway.url import split_host_port

#: SP protocol names (nng's) and ids (sp-protocol-ids-01)
PROTOCOLS = {"pair": 0x10, "pair1": 0x11, "pub": 0x20, "sub": 0x21, "req": 0x30, "rep": 0x31,
             "push": 0x50, "pull": 0x51, "surveyor": 0x62, "respondent": 0x63, "bus": 0x70}
NAMES = {v: k for k, v in PROTOCOLS.items()}
PEERS = {"pair": "pair", "pair1": "pair1", "pub": "sub", "sub": "pub", "req": "rep",
         "rep": "req", "push": "pull", "pull": "push", "surveyor": "respondent",
         "respondent": "surveyor", "bus": "bus"}
SUFFIX = ".sp.nanomsg.org"
_U64 = struct.Struct(">Q")
_HEADER = 8


def split_address(address: str) -> tuple[str, int, str]:
    """``host:port/path`` -> (host, port, ``/path``)."""
    hostport, slash, path = address.partition("/")
    host, port = split_host_port(hostport)
    return host, port, "/" + path if slash else "/"


def sp_header(name: str) -> bytes:
    return b"\x00SP\x00" + PROTOCOLS[name].to_bytes(2, "big") + b"\x00\x00"


class WsShim(Layer):
    """A WebSocket connection on one side, an SP/TCP byte stream for the engine's pipe on the
    other; also the transport the pipe writes to."""

    def __init__(self, pipe: Any, client: bool, host: str, path: str) -> None:
        self.pipe = pipe
        self.client = client
        self.host = host
        self.path = path
        self.ws = WSConnection(ConnectionType.CLIENT if client else ConnectionType.SERVER)
        self.raw: asyncio.Transport | None = None
        self.open = False
        self.closing = False
        self.name = ""  # our SP protocol name, from the codec's header
        self._rejected = False  # an HTTP refusal is on its way: close, do not abort
        self._out = bytearray()  # what the codec wrote, SP/TCP framing
        self._early: list[bytes] = []  # WebSocket bytes before we knew our protocol
        self._parts: list[bytes] = []
        self._size = 0
        codec = getattr(pipe, "codec", None)
        self.limit = getattr(codec, "max_message_size", 1 << 20) + 1024  # + SP header words
        self.handshake_timeout = getattr(pipe, "handshake_timeout", 10.0)

    # -- the side of the connection (TCP or TLS) ---------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport  # type: ignore[assignment]
        self.pipe.connection_made(self)  # the codec writes its SP header now

    def data_received(self, data: bytes) -> None:
        if not self.name:
            self._early.append(data)
            return
        try:
            self.ws.receive_data(data)
            self._events()
        except (RemoteProtocolError, LocalProtocolError) as exc:
            self._fail("sp-protocol", f"WebSocket: {exc}")

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.pipe.connection_lost(exc)

    def pause_writing(self) -> None:
        self.pipe.pause_writing()

    def resume_writing(self) -> None:
        self.pipe.resume_writing()

    # -- the WebSocket ----------------------------------------------------------------------
    def _start(self) -> None:
        """We know our protocol (the codec's header): dial's upgrade request goes out; a
        listener reads the one it has."""
        if self.client:
            self._send(self.ws.send(Request(host=self.host, target=self.path,
                                            subprotocols=[PEERS[self.name] + SUFFIX])))
        early, self._early = self._early, []
        for data in early:
            self.data_received(data)

    def _events(self) -> None:
        for event in self.ws.events():
            if isinstance(event, Request):
                want = self.name + SUFFIX
                if event.target.split("?")[0] != self.path:
                    self._reject(404, f"no SP listener at {event.target!r} (this one: "
                                      f"{self.path!r})")
                    return
                if want not in event.subprotocols:
                    self._reject(400, f"the client asks for {event.subprotocols or 'none'}; "
                                      f"this is {want}")
                    return
                self._send(self.ws.send(AcceptConnection(subprotocol=want)))
                self._opened(PEERS[self.name])
            elif isinstance(event, AcceptConnection):
                got = event.subprotocol or ""
                if got != PEERS[self.name] + SUFFIX:
                    self._fail("sp-protocol", f"the server accepted subprotocol {got!r}, not "
                                              f"{PEERS[self.name] + SUFFIX!r}")
                    return
                self._opened(PEERS[self.name])
            elif isinstance(event, RejectConnection):
                self._fail("sp-protocol", f"the server refused the WebSocket upgrade "
                                          f"(HTTP {event.status_code})")
                return
            elif isinstance(event, BytesMessage):
                self._message(bytes(event.data), event.message_finished)
            elif isinstance(event, TextMessage):
                self._fail("garbage", "a text WebSocket message (SP sends binary ones)")
                return
            elif isinstance(event, Ping):
                raw = self.raw
                # a peer that does not read gets no pong until it does: a ping flood queues
                # nothing (the ZMTP pipe keeps no PONG either, libzmq one)
                if raw is not None and raw.get_write_buffer_size() < raw.get_write_buffer_limits()[1]:
                    self._send(self.ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                if self.ws.state.name != "CLOSED":
                    self._send(self.ws.send(event.response()))
                if self.raw is not None:
                    self.raw.close()
                return

    def _opened(self, peer: str) -> None:
        self.open = True
        self.pipe.data_received(sp_header(peer))  # the subprotocol stands for its header
        if self._out:
            self._flush()

    def _message(self, data: bytes, finished: bool) -> None:
        self._parts.append(data)
        self._size += len(data)
        if self._size > self.limit:
            self._fail("MessageTooLarge", f"a WebSocket message over {self.limit} bytes")
            return
        if finished:
            payload = b"".join(self._parts)
            self._parts, self._size = [], 0
            self.pipe.data_received(_U64.pack(len(payload)) + payload)

    def _reject(self, status: int, why: str) -> None:
        self._send(self.ws.send(RejectConnection(status_code=status)))
        self._rejected = True
        self._fail("sp-protocol", f"WebSocket upgrade refused: {why}")

    def _fail(self, reason: str, detail: str) -> None:
        pipe = self.pipe
        if hasattr(pipe, "abort"):
            pipe.abort(reason, detail)
        elif self.raw is not None:
            self.raw.abort()

    def _send(self, data: bytes) -> None:
        if data and self.raw is not None and not self.raw.is_closing():
            self.raw.write(data)

    def _flush(self) -> None:
        out = self._out
        pos = 0
        while len(out) - pos >= 8:
            (size,) = _U64.unpack_from(out, pos)
            if len(out) - pos - 8 < size:
                break
            self._send(self.ws.send(BytesMessage(data=bytes(out[pos + 8: pos + 8 + size]))))
            pos += 8 + size
        del out[:pos]

    # -- the transport the pipe sees ---------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._out += data
        if not self.name:
            if len(self._out) < _HEADER:
                return
            proto = int.from_bytes(self._out[4:6], "big")
            del self._out[:_HEADER]  # the subprotocol replaces the SP header
            if proto not in NAMES:
                self._fail("sp-protocol", f"SP protocol {proto:#x} has no WebSocket name")
                return
            self.name = NAMES[proto]
            self._start()
        if self.open:
            self._flush()

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def close(self) -> None:
        if self.raw is None or self.raw.is_closing():
            return
        if self.open:
            try:
                self._send(self.ws.send(CloseConnection(code=1000)))
            except LocalProtocolError:
                pass
        self.raw.close()

    def abort(self) -> None:
        if self.raw is not None:
            if self._rejected:
                self.raw.close()  # the HTTP refusal leaves first
            else:
                self.raw.abort()

    def get_write_buffer_size(self) -> int:
        return len(self._out) + super().get_write_buffer_size()


class WsTransport:
    """``ws``: SP over WebSocket; ``wss``: the same inside TLS (``tls=`` from the engine)."""

    def __init__(self, scheme: str) -> None:
        self.scheme = scheme
        self.tls = scheme == "wss"
        self.sp_only = True  # ZeroMQ's own WebSocket mapping (ZWS) is another wire
        #: it carries SP messages, not a byte stream: the byte-stream suite does not apply
        #: (tests/test_ws.py and interop_tests/test_gateway_ws.py check it instead)
        self.message_framed = True

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None, tls: ssl.SSLContext | None = None,
               keepalive: KeepAlive | None = None) -> ServerListener:
        host, port, path = split_address(address)

        def shim() -> asyncio.Protocol:
            ws = WsShim(protocol_factory(), False, host, path)
            return TlsShim(ws, tls, True, None) if tls is not None else ws

        listener = TcpTransport().listen(f"{host}:{port}", shim, backlog=backlog,
                                         keepalive=keepalive)
        listener.address = f"{listener.address}{path}"
        return listener

    async def dial(self, address: str, protocol_factory: ProtocolFactory, *,
                   tls: ssl.SSLContext | None = None,
                   server_hostname: str | None = None,
                   keepalive: KeepAlive | None = None) -> None:
        host, port, path = split_address(address)

        def shim() -> asyncio.Protocol:
            ws = WsShim(protocol_factory(), True, f"{host}:{port}", path)
            if tls is None:
                return ws
            return TlsShim(ws, tls, False, server_hostname or (host if tls.check_hostname
                                                                 else None))

        await TcpTransport().dial(f"{host}:{port}", shim, keepalive=keepalive)


@hookimpl
def gateway_register_transports(register) -> None:  # type: ignore[no-untyped-def]
    register("ws", WsTransport("ws"))
    register("wss", WsTransport("wss"))
