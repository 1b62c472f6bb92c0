"""TCP transport: ``zmq+tcp://host:port``, ``sp+tcp://host:port`` (port 0 or * = ephemeral)."""

from __future__ import annotations

import asyncio
import socket

from gateway.hookspecs import hookimpl
from gateway.transport import ProtocolFactory, ServerListener, default_backlog, ports_shared
from gateway.url import split_host_port


class TcpTransport:
    scheme = "tcp"

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None) -> ServerListener:
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
        return ServerListener(sock, f"{shown}:{real_port}", protocol_factory)

    async def dial(self, address: str, protocol_factory: ProtocolFactory) -> None:
        host, port = split_host_port(address)
        await asyncio.get_running_loop().create_connection(protocol_factory, host, port)


@hookimpl
def gateway_register_transports(register) -> None:  # type: ignore[no-untyped-def]
    register("tcp", TcpTransport())
