"""The narrow interface between the engine and a transport plugin (mangos style).

A transport makes byte streams; the engine puts a wire codec and a pattern on top. Two calls:

* ``listen(address, protocol_factory, *, backlog=None) -> Listener``: bind *now*
  (synchronously, so that ``Socket.bind`` can return the real address at once) and start
  accepting on the running loop; ``backlog`` is the listen queue length, ``None`` meaning the
  system maximum (:func:`default_backlog`; a transport without a kernel queue ignores it);
* ``await dial(address, protocol_factory)``: connect once, raising ``OSError`` on failure (the
  engine owns redial and backoff).

A transport over TCP also takes ``keepalive=`` (a :class:`KeepAlive`, or ``None`` to leave the
sockets as the system makes them) on both calls and applies it to every connection it makes or
accepts; the engine passes it only to transports that take it (:func:`takes_keyword`).

``protocol_factory`` returns an ``asyncio.Protocol`` (the engine's pipe). The engine passes
``backlog=`` only when the user set one (``Socket(backlog=N)``), through :func:`listen`, so a
transport written before the keyword existed keeps working with the default. Every transport passes
the shared verification suite (``gateway.testing.transport_suite``, run over every registered
transport by ``tests/test_transports.py``). This module imports no engine.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

ProtocolFactory = Callable[[], asyncio.Protocol]


class Listener(Protocol):
    address: str  # the real bound address, in the transport's own syntax

    def close(self) -> None: ...


class Transport(Protocol):
    scheme: str

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None) -> Listener: ...

    async def dial(self, address: str, protocol_factory: ProtocolFactory) -> None: ...


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """TCP keepalive for every connection of an endpoint (libzmq's TCP_KEEPALIVE options):
    the first probe after ``idle`` seconds of silence, then one every ``interval`` seconds;
    ``count`` unanswered probes and the kernel drops the connection (the pipe sees a reset)."""

    idle: float = 60.0
    interval: float = 10.0
    count: int = 6


def set_keepalive(sock: socket.socket, keepalive: KeepAlive) -> None:
    """SO_KEEPALIVE and, where the platform has them, TCP_KEEPIDLE/KEEPINTVL/KEEPCNT."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", keepalive.idle), ("TCP_KEEPINTVL", keepalive.interval),
                        ("TCP_KEEPCNT", keepalive.count)):
        opt = getattr(socket, name, None)
        if opt is not None:
            sock.setsockopt(socket.IPPROTO_TCP, opt, max(1, round(value)))


_SHARED_PORTS = [False]


def share_ports(on: bool = True) -> None:
    """Make every tcp listener of this process bind with ``SO_REUSEPORT``: set in each worker
    of ``--workers N`` (:mod:`gateway.workers`), whose fronts share one port."""
    _SHARED_PORTS[0] = on


def ports_shared() -> bool:
    """True in a worker of ``--workers N``: tcp listeners bind with ``SO_REUSEPORT``."""
    return _SHARED_PORTS[0]


SOMAXCONN_PATH = "/proc/sys/net/core/somaxconn"


def default_backlog() -> int:
    """The system's maximum listen backlog: Linux's ``net.core.somaxconn`` (the kernel caps any
    larger value to it), else ``socket.SOMAXCONN``."""
    try:
        with open(SOMAXCONN_PATH, encoding="ascii") as f:
            return max(int(f.read()), 1)
    except (OSError, ValueError):
        return socket.SOMAXCONN


def takes_keyword(method: Any, name: str) -> bool:
    """True when ``method`` (a transport's ``listen`` or ``dial``) accepts the keyword ``name``."""
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def takes_backlog(transport: Any) -> bool:
    """True when ``transport.listen`` accepts the ``backlog`` keyword."""
    return takes_keyword(transport.listen, "backlog")


def listen(transport: Any, address: str, protocol_factory: ProtocolFactory, *,
           backlog: int | None = None, keepalive: KeepAlive | None = None) -> Listener:
    """``transport.listen``, passing ``backlog`` only when it is set: a transport without the
    keyword keeps working with its default, and refuses an explicit one (``TypeError``, before
    binding anything; ``Socket.bind`` says ``ConfigError``). ``keepalive`` goes to transports
    that take it (TCP), the others have no TCP connection to keep alive."""
    extra: dict[str, Any] = {}
    if keepalive is not None and takes_keyword(transport.listen, "keepalive"):
        extra["keepalive"] = keepalive
    if backlog is None:
        return transport.listen(address, protocol_factory, **extra)
    if not takes_backlog(transport):
        raise TypeError(f"transport {getattr(transport, 'scheme', transport)!r} "
                          "takes no listen backlog")
    return transport.listen(address, protocol_factory, backlog=backlog, **extra)


async def dial(transport: Any, address: str, protocol_factory: ProtocolFactory, *,
               keepalive: KeepAlive | None = None, **extra: Any) -> None:
    """``transport.dial``, with ``keepalive`` when the transport takes it (see :func:`listen`);
    ``extra`` keywords (a TLS transport's ``tls=``) are passed as they are."""
    if keepalive is not None and takes_keyword(transport.dial, "keepalive"):
        extra["keepalive"] = keepalive
    await transport.dial(address, protocol_factory, **extra)


class ServerListener:
    """A listening socket bound synchronously, served by ``loop.create_server(sock=...)``.

    ``backlog`` must be the one the socket listens with: ``create_server`` calls ``listen``
    again with its own (asyncio's and uvloop's default is 100), so it is passed on; ``None``
    means the system maximum, as :func:`default_backlog`."""

    def __init__(self, sock: socket.socket, address: str, protocol_factory: ProtocolFactory,
                 *, unix: bool = False, backlog: int | None = None) -> None:
        self.address = address
        self._sock = sock
        loop = asyncio.get_running_loop()
        create = loop.create_unix_server if unix else loop.create_server
        self._server: asyncio.AbstractServer | None = None
        queue = default_backlog() if backlog is None else backlog
        self._task = loop.create_task(create(protocol_factory, sock=sock,  # type: ignore[operator]
                                             backlog=queue))
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


class Layer(asyncio.Protocol):
    """A protocol layer between a connection and the engine's pipe (TLS, WebSocket): the
    connection's protocol on one side, the transport the pipe writes to on the other. This
    base delegates the flow-control and bookkeeping calls to the connection (``raw``); a layer
    implements ``write``, ``close`` and its reading."""

    raw: asyncio.Transport | None = None

    def abort(self) -> None:
        if self.raw is not None:
            self.raw.abort()

    def is_closing(self) -> bool:
        return self.raw is None or self.raw.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.raw.get_extra_info(name, default) if self.raw is not None else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if self.raw is not None:
            self.raw.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self.raw.get_write_buffer_size() if self.raw is not None else 0

    def pause_reading(self) -> None:
        if self.raw is not None:
            self.raw.pause_reading()

    def resume_reading(self) -> None:
        if self.raw is not None:
            self.raw.resume_reading()

    def is_reading(self) -> bool:
        return self.raw is not None and self.raw.is_reading()
