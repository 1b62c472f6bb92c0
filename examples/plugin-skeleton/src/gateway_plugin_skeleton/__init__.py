"""A gateway plugin in one module: the ``abstract`` transport (Linux abstract Unix sockets).

``zmq+abstract://name`` and ``sp+abstract://name`` are the socket ``"\\0name"`` in Linux's
abstract namespace: no file on disk, gone when the last socket closes. That is the socket
libzmq calls ``ipc://@name`` (and nng ``abstract://name``), so a native gateway endpoint
``zmq+abstract://name?backend=native`` talks to a pyzmq socket on ``ipc://@name``.
nng frames SP on its ipc/abstract transports with a message-type byte before each message:
the registration declares ``sp_message_prefix`` so the native SP codec does the same.

A transport implements the narrow interface of ``gateway.transport`` (mangos style):

* ``listen(address, protocol_factory, *, backlog=None) -> Listener``: bind *now* (so ``bind``
  can return the real address at once), accept on the running loop; the listener knows its
  ``address``; ``backlog`` ``None`` means the system maximum (``default_backlog()``);
* ``async dial(address, protocol_factory)``: connect once, raise ``OSError`` on failure (the
  engine redials with backoff).

The plugin registers it through the ``gateway_register_transports`` hook, declaring what its
``listen``/``dial`` take beyond the address (``backlog=True``; ``keepalive``, ``tls``) and its SP
framing (``sp_message_prefix``); the distribution's
``[project.entry-points.gateway]`` table makes the gateway load this module at start-up.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any

from gateway.hookspecs import hookimpl
from gateway.transport import ProtocolFactory, ServerListener, default_backlog

__all__ = ["AbstractTransport", "gateway_register_transports"]
__version__ = "0.1.0"

SCHEME = "abstract"
_MAX_NAME = 107  # sun_path is 108 bytes; the leading NUL takes one


def _sockaddr(address: str) -> bytes:
    name = address.encode()
    if not name or len(name) > _MAX_NAME or b"\0" in name:
        raise OSError(22, f"bad abstract socket name {address!r} (1..{_MAX_NAME} bytes, no NUL)")
    return b"\0" + name


class AbstractTransport:
    """Stream sockets in the Linux abstract namespace: ``abstract://name`` -> ``"\\0name"``."""

    scheme = SCHEME

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None) -> ServerListener:
        if not sys.platform.startswith("linux"):
            raise OSError(95, "abstract Unix sockets exist on Linux only")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(_sockaddr(address))  # EADDRINUSE when someone holds the name
            sock.listen(default_backlog() if backlog is None else backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        # nothing to unlink on close: the name disappears with the socket
        return ServerListener(sock, address, protocol_factory, unix=True)

    async def dial(self, address: str, protocol_factory: ProtocolFactory) -> None:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            # connect the socket ourselves: not every event loop accepts an abstract path
            await loop.sock_connect(sock, _sockaddr(address))
            await loop.create_unix_connection(protocol_factory, sock=sock)
        except BaseException:
            sock.close()
            raise


@hookimpl
def gateway_register_transports(register: Any) -> None:
    # what listen takes beyond the address is declared, as data: a listen backlog; and nng's
    # SP framing on abstract sockets puts a message-type byte before each message
    register(SCHEME, AbstractTransport(), backlog=True, sp_message_prefix=b"\x01")
