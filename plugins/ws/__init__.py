"""WebSocket: SP over WebSocket (``sp+ws://host:port/path``, ``sp+wss://`` with TLS) as nng
speaks it, and ZeroMQ's ZWS 2.0 (``zmq+ws://``, ``zmq+wss://``, RFC 45), on wsproto.

The transport is TCP (with the TLS layer for ``wss``); each WebSocket mapping is a wire codec
the plugin registers for its own framing (``ws``) on the shared WebSocket layer
(:mod:`gateway_plugins.ws.link`): :mod:`gateway_plugins.ws.codec` for SP,
:mod:`gateway_plugins.ws.zws` for ZeroMQ. The engine's pipe runs it like any codec, the HTTP
upgrade as its handshake (the path, the subprotocol, the browser's ``Origin``). One listener
per port; a request for another path is answered 404, an ``Origin`` not allowed 403.
"""

from __future__ import annotations

import asyncio

from gateway_plugins.tcp import TcpTransport
from gateway_plugins.tls import TlsShim, server_name

from gateway.hookspecs import hookimpl
from gateway.tls import TlsSettings
from gateway.transport import KeepAlive, ProtocolFactory, ServerListener, SocketBuffers

from .codec import SUFFIX, WsSpCodec
from .link import split_address
from .zws import ZwsCodec

__all__ = ["SUFFIX", "WsSpCodec", "WsTransport", "ZwsCodec", "split_address"]


class WsTransport:
    """``ws`` and ``wss``: TCP connections (inside TLS for ``wss``: ``tls=`` is the endpoint's
    :class:`gateway.tls.TlsSettings`) for the ``ws`` framing's codec."""

    def __init__(self, scheme: str) -> None:
        self.scheme = scheme

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None, tls: TlsSettings | None = None,
               keepalive: KeepAlive | None = None,
               buffers: SocketBuffers | None = None) -> ServerListener:
        hostport, path = split_address(address)
        context = tls.context(server_side=True) if tls is not None else None

        def layered() -> asyncio.BaseProtocol:
            pipe = protocol_factory()
            return TlsShim(pipe, context, True, None) if context is not None else pipe

        listener = TcpTransport().listen(hostport, layered, backlog=backlog,
                                         keepalive=keepalive, buffers=buffers)
        listener.address = f"{listener.address}{path}"
        return listener

    async def dial(self, address: str, protocol_factory: ProtocolFactory, *,
                   tls: TlsSettings | None = None, keepalive: KeepAlive | None = None,
                   buffers: SocketBuffers | None = None) -> None:
        hostport, _ = split_address(address)
        context = tls.context(server_side=False) if tls is not None else None
        name = server_name(tls, hostport, context) if tls is not None and context else None

        def layered() -> asyncio.BaseProtocol:
            pipe = protocol_factory()
            return pipe if context is None else TlsShim(pipe, context, False, name)

        await TcpTransport().dial(hostport, layered, keepalive=keepalive, buffers=buffers)


@hookimpl
def gateway_register_transports(register) -> None:  # type: ignore[no-untyped-def]
    # both wires (SP's mapping and ZWS 2.0); messages, not a stream
    register("ws", WsTransport("ws"), framing="ws", backlog=True, keepalive=True, buffers=True)
    register("wss", WsTransport("wss"), tls=True, framing="ws", backlog=True, keepalive=True,
             buffers=True)


@hookimpl
def gateway_register_wires(register) -> None:  # type: ignore[no-untyped-def]
    register("sp-ws", "sp", WsSpCodec, framing="ws")
    register("zws", "zmtp", ZwsCodec, framing="ws")
