"""The narrow interface between the engine and a transport plugin (mangos style).

A transport makes byte streams; the engine puts a wire codec and a pattern on top. Two calls:

* ``listen(address, protocol_factory) -> Listener``: bind *now* (synchronously, so that
  ``Socket.bind`` can return the real address at once) and start accepting on the running loop;
* ``await dial(address, protocol_factory)``: connect once, raising ``OSError`` on failure (the
  engine owns redial and backoff).

``protocol_factory`` returns an ``asyncio.Protocol`` (the engine's pipe). Every transport passes
the shared verification suite (``gateway.testing.transport_suite``, run over every registered
transport by ``tests/test_transports.py``). This module imports no engine.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Protocol

ProtocolFactory = Callable[[], asyncio.Protocol]


class Listener(Protocol):
    address: str  # the real bound address, in the transport's own syntax

    def close(self) -> None: ...


class Transport(Protocol):
    scheme: str

    def listen(self, address: str, protocol_factory: ProtocolFactory) -> Listener: ...

    async def dial(self, address: str, protocol_factory: ProtocolFactory) -> None: ...


class ServerListener:
    """A listening socket bound synchronously, served by ``loop.create_server(sock=...)``."""

    def __init__(self, sock: socket.socket, address: str, protocol_factory: ProtocolFactory,
                 *, unix: bool = False) -> None:
        self.address = address
        self._sock = sock
        loop = asyncio.get_running_loop()
        create = loop.create_unix_server if unix else loop.create_server
        self._server: asyncio.AbstractServer | None = None
        self._task = loop.create_task(create(protocol_factory, sock=sock))  # type: ignore[operator]
        self._task.add_done_callback(self._started)

    def _started(self, task: asyncio.Task[asyncio.AbstractServer]) -> None:
        if not task.cancelled() and task.exception() is None:
            self._server = task.result()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        else:
            self._task.cancel()
            self._sock.close()
