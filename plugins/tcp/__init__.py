"""TCP transport: ``zmq+tcp://host:port``, ``sp+tcp://host:port`` (port 0 or * = ephemeral).

``keepalive=`` (a :class:`gateway.transport.KeepAlive`) turns on TCP keepalive for every
connection, dialled or accepted, before the engine's pipe sees it (the protocol factory is
wrapped: no platform's inheritance rules from the listening socket are relied on).
"""

from __future__ import annotations

import asyncio
import socket

from gateway.hookspecs import hookimpl
from gateway.transport import (
    KeepAlive,
    PipeProtocol,
    ProtocolFactory,
    ServerListener,
    default_backlog,
    ports_shared,
    set_keepalive,
)
from gateway.url import split_host_port


class TcpTransport:
    scheme = "tcp"

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None, keepalive: KeepAlive | None = None) -> ServerListener:
        host, port = split_host_port(address)
        if host == "*":
            host = "0.0.0.0"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if ports_shared():  # a worker of --workers N: the kernel spreads the connections
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            sock.listen(default_backlog() if backlog is None else backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        real_host, real_port = sock.getsockname()[:2]
        shown = f"[{real_host}]" if family == socket.AF_INET6 else real_host
        if keepalive is not None:
            protocol_factory = _keeping_alive(protocol_factory, keepalive)
        return ServerListener(sock, f"{shown}:{real_port}", protocol_factory)

    async def dial(self, address: str, protocol_factory: ProtocolFactory, *,
                   keepalive: KeepAlive | None = None) -> None:
        host, port = split_host_port(address)
        loop = asyncio.get_running_loop()
        if keepalive is None:
            await loop.create_connection(protocol_factory, host, port)
            return
        await loop.create_connection(_keeping_alive(protocol_factory, keepalive), host, port)


def _keeping_alive(protocol_factory: ProtocolFactory, keepalive: KeepAlive) -> ProtocolFactory:
    """Protocols whose transport gets ``keepalive`` before the protocol sees the connection."""

    def make() -> PipeProtocol:
        protocol = protocol_factory()
        made = protocol.connection_made

        def connection_made(transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                try:
                    set_keepalive(sock, keepalive)
                except OSError:  # the connection is already gone: the protocol will see it
                    pass
            made(transport)

        protocol.connection_made = connection_made  # type: ignore[method-assign]
        return protocol

    return make


@hookimpl
def gateway_register_transports(register) -> None:  # type: ignore[no-untyped-def]
    register("tcp", TcpTransport(), backlog=True, keepalive=True)
