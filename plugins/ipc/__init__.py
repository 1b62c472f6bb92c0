"""IPC transport over Unix domain sockets: ``zmq+ipc:///tmp/x.sock`` (path as libzmq/nng)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import stat

from gateway.hookspecs import hookimpl
from gateway.transport import (
    ProtocolFactory,
    ServerListener,
    SocketBuffers,
    default_backlog,
    tuned,
)


def _stale(path: str) -> bool:
    """True when ``path`` is a Unix socket nobody listens on (left by a dead process)."""
    try:
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            return False
    except FileNotFoundError:
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return True
    finally:
        probe.close()
    return False


class IpcListener(ServerListener):
    def close(self) -> None:
        super().close()
        with contextlib.suppress(OSError):
            os.unlink(self.address)


class IpcTransport:
    scheme = "ipc"

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None,
               buffers: SocketBuffers | None = None) -> IpcListener:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or not _stale(address):
                    raise
                os.unlink(address)
                sock.bind(address)
            sock.listen(default_backlog() if backlog is None else backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return IpcListener(sock, address, tuned(protocol_factory, None, buffers), unix=True,
                           backlog=backlog)

    async def dial(self, address: str, protocol_factory: ProtocolFactory, *,
                   buffers: SocketBuffers | None = None) -> None:
        await asyncio.get_running_loop().create_unix_connection(
            tuned(protocol_factory, None, buffers), address)


@hookimpl
def gateway_register_transports(register) -> None:  # type: ignore[no-untyped-def]
    # nng/nanomsg frame SP on ipc with a message-type byte before each message
    register("ipc", IpcTransport(), backlog=True, buffers=True, sp_message_prefix=b"\x01")
