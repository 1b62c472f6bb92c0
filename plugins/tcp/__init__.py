"""TCP transport: ``zmq+tcp://host:port``, ``sp+tcp://host:port`` (port 0 or * = ephemeral).

``keepalive=`` (a :class:`gateway.transport.KeepAlive`) turns on TCP keepalive and ``buffers=``
(a :class:`gateway.transport.SocketBuffers`) sizes the kernel's buffers of every connection,
dialled or accepted, before the engine's pipe sees it (:func:`gateway.transport.tuned`).
"""

from __future__ import annotations

import asyncio
import socket

from gateway.hookspecs import hookimpl
from gateway.transport import (
    KeepAlive,
    ProtocolFactory,
    ServerListener,
    SocketBuffers,
    default_backlog,
    ports_shared,
    tuned,
)
from gateway.url import split_host_port


class TcpTransport:
    scheme = "tcp"

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None, keepalive: KeepAlive | None = None,
               buffers: SocketBuffers | None = None) -> ServerListener:
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
        return ServerListener(sock, f"{shown}:{real_port}", tuned(protocol_factory, keepalive, buffers),
                              backlog=backlog)

    async def dial(self, address: str, protocol_factory: ProtocolFactory, *,
                   keepalive: KeepAlive | None = None, buffers: SocketBuffers | None = None) -> None:
        host, port = split_host_port(address)
        await asyncio.get_running_loop().create_connection(
            tuned(protocol_factory, keepalive, buffers), host, port)


@hookimpl
def gateway_register_transports(register) -> None:  # type: ignore[no-untyped-def]
    register("tcp", TcpTransport(), backlog=True, keepalive=True, buffers=True)
