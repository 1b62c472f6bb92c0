"""The narrow interface between the engine and a transport plugin (mangos style).

A transport makes byte streams; the engine puts a wire codec and a pattern on top. Two calls:

* ``listen(address, protocol_factory, **declared) -> Listener``: bind *now* (synchronously, so
  that ``Socket.bind`` can return the real address at once) and start accepting on the running
  loop;
* ``await dial(address, protocol_factory, **declared)``: connect once, raising ``OSError`` on
  failure (the engine owns redial and backoff).

What a transport takes beyond that it declares when it registers, as data
(``register(scheme, transport, backlog=True, keepalive=True, ...)``, kept in a
:class:`TransportSpec`), and the engine passes exactly that, never guessing from signatures:

* ``backlog``: ``listen`` takes ``backlog=`` (the listen queue; ``None``: the system maximum,
  :func:`default_backlog`); an explicit backlog on a transport that did not declare it is refused;
* ``keepalive``: both calls take ``keepalive=`` (a :class:`KeepAlive`, or ``None``) and apply it
  to every connection;
* ``buffers``: both calls take ``buffers=`` (a :class:`SocketBuffers`, or ``None``: the OS's own)
  and apply it to every connection (:func:`tuned`); explicit buffers on a transport that did not
  declare it are refused;
* ``tls``: it runs inside TLS; both calls take ``tls=`` (a :class:`gateway.tls.TlsSettings`: the
  transport asks it for the ``ssl`` context of its side) and the engine refuses TLS settings on
  any other transport;
* ``sp_only``: an SP (nng) transport, refused on a ZeroMQ endpoint;
* ``framing``: ``"stream"`` (the wire codec frames messages in the byte stream), or the name of
  the message mapping the transport needs (``"ws"``: one WebSocket message per SP message); the
  engine then uses the wire codec registered for that framing;
* ``sp_message_prefix``: bytes the SP codec puts before each message (nng's ipc: ``b"\\x01"``).

``protocol_factory`` returns a :class:`PipeProtocol` (the engine's pipe). A layer between the
connection and the pipe (TLS) is a :class:`Layer`. Every transport passes the shared
verification suite (``gateway.testing.transport_suite``, run over every registered transport by
``tests/test_transports.py``). This module imports no engine.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from gateway.errors import ConfigError
from gateway.logging import Throttle, get_logger
from gateway.metrics import METRICS

log = get_logger("gateway.transport")


class PipeProtocol(asyncio.BaseProtocol):
    """What a transport's protocol factory makes (the engine's pipe): a stream protocol with
    what a layer (TLS) asks of it beyond asyncio's calls. A layer, or a transport of its own
    (inproc), gives it the bytes with ``data_received``; a loop's transport, with
    ``get_buffer``/``buffer_updated`` where it is an ``asyncio.BufferedProtocol`` as the
    engine's pipes are (uvloop and asyncio pick that when the transport is made; uvloop takes
    an ``asyncio.Protocol`` for a plain one, so this class is neither), else with
    ``data_received``."""

    def data_received(self, data: bytes) -> None:
        """Bytes received (any split)."""
        raise NotImplementedError

    #: seconds the whole handshake may take, a layer's included
    handshake_timeout: float = 10.0

    def connection_arrived(self, transport: asyncio.BaseTransport) -> bool:
        """The raw connection exists (before a layer's handshake); False refuses it."""
        return True

    def abort(self, reason: str, detail: str = "", farewell: bytes = b"") -> None:
        """The connection failed after the pipe had it (``reason``: a pipe-close reason)."""
        raise NotImplementedError


ProtocolFactory = Callable[[], PipeProtocol]


class Listener(Protocol):
    address: str  # the real bound address, in the transport's own syntax

    def close(self) -> None: ...


class Transport(Protocol):
    scheme: str

    def listen(self, address: str, protocol_factory: ProtocolFactory,
               **declared: Any) -> Listener: ...

    async def dial(self, address: str, protocol_factory: ProtocolFactory,
                   **declared: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """TCP keepalive for every connection of an endpoint (libzmq's TCP_KEEPALIVE options):
    the first probe after ``idle`` seconds of silence, then one every ``interval`` seconds;
    ``count`` unanswered probes and the kernel drops the connection (the pipe sees a reset)."""

    idle: float = 60.0
    interval: float = 10.0
    count: int = 6


#: the TCP keepalive options this platform has, as (option, KeepAlive field)
_KEEPALIVE_OPTIONS = tuple((getattr(socket, name), field) for name, field in (
    ("TCP_KEEPIDLE", "idle"), ("TCP_KEEPINTVL", "interval"), ("TCP_KEEPCNT", "count"))
    if hasattr(socket, name))


@contextmanager
def _raw(sock: Any) -> Iterator[socket.socket]:
    """One wrapper of the descriptor of ``sock`` (a socket, or the stand-in a transport's
    ``get_extra_info("socket")`` gives, whose every ``setsockopt`` wraps the descriptor anew,
    each wrapper with the ``getsockname`` that checks it), released unclosed. A closed one:
    ``OSError``."""
    fd = sock.fileno()
    if fd < 0:  # (asyncio's stand-in of a closed socket says -1)
        raise OSError(errno.EBADF, "the connection's socket is closed")
    raw = socket.socket(sock.family, socket.SOCK_STREAM, 0, fileno=fd)
    try:
        yield raw
    finally:
        raw.detach()


def set_keepalive(sock: Any, keepalive: KeepAlive) -> None:
    """SO_KEEPALIVE and, where the platform has them, TCP_KEEPIDLE/KEEPINTVL/KEEPCNT on
    ``sock`` (as :func:`_raw` takes it)."""
    with _raw(sock) as raw:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for opt, field in _KEEPALIVE_OPTIONS:
            raw.setsockopt(socket.IPPROTO_TCP, opt, max(1, round(getattr(keepalive, field))))


@dataclass(frozen=True, slots=True)
class SocketBuffers:
    """The kernel's buffers of every connection of an endpoint (libzmq's SNDBUF and RCVBUF):
    bytes as ``SO_SNDBUF``/``SO_RCVBUF`` take them (Linux doubles them for its bookkeeping);
    0: the OS's own, autotuned. ``sndbuf`` None: ``local_sndbuf`` toward a TCP peer on this
    host (:func:`on_this_host`), the OS's own toward any other."""

    sndbuf: int | None = None
    rcvbuf: int = 0
    local_sndbuf: int = 0

    @property
    def explicit(self) -> bool:
        """True if a size was given (not the OS's own, nor the default for local peers)."""
        return bool(self.sndbuf or self.rcvbuf)


def on_this_host(sock: socket.socket) -> bool:
    """True if the TCP peer of ``sock`` is on this host: a loopback address, or the address
    the connection has on this end (a host reaching itself by one of its own addresses)."""
    try:
        local, peer = sock.getsockname()[0], sock.getpeername()[0]
    except (OSError, IndexError, TypeError):  # (a unix socket's names are paths)
        return False
    if not isinstance(peer, str):
        return False
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback) or peer == local


def set_buffers(sock: Any, buffers: SocketBuffers) -> None:
    """``SO_SNDBUF``/``SO_RCVBUF`` on a connection's socket (as :func:`_raw` takes it) as
    ``buffers`` say; nothing where they say the OS's own."""
    with _raw(sock) as raw:
        sndbuf = buffers.sndbuf
        if sndbuf is None and raw.family != socket.AF_UNIX and on_this_host(raw):
            sndbuf = buffers.local_sndbuf
        if sndbuf:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        if buffers.rcvbuf:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffers.rcvbuf)


#: one line per option every 10 s, whatever the number of connections
_TUNE_THROTTLE = Throttle()


def _tune(sock: Any, option: str, apply: Callable[[], None]) -> None:
    """``apply()`` (one option of a new connection), each on its own: one the kernel refuses
    keeps neither the others off nor silent (``gateway_socket_option_failures_total``, and a
    ``socket.option_failed`` line, throttled), and no failure of any kind keeps the protocol
    from being told of its connection (else it would be half-made: open, and nobody's); a
    connection already gone is no failure (the protocol will see it)."""
    try:
        apply()
    except Exception as exc:  # noqa: BLE001 - logged; the connection must still be made
        if isinstance(exc, OSError) and (sock.fileno() < 0
                                         or exc.errno in (errno.EBADF, errno.ENOTCONN)):
            return
        METRICS.inc("gateway_socket_option_failures_total", option=option)
        held = _TUNE_THROTTLE(option)
        if held is not None:
            error = exc.strerror if isinstance(exc, OSError) and exc.strerror else repr(exc)
            log.warning("socket.option_failed", option=option, reason="refused",
                        error=error, suppressed=held)


def tuned(protocol_factory: ProtocolFactory, keepalive: KeepAlive | None,
          buffers: SocketBuffers | None) -> ProtocolFactory:
    """``protocol_factory``, its protocols' transports given ``keepalive`` and ``buffers``
    before the protocol sees the connection (on every connection, dialled or accepted: no
    platform's inheritance rules from a listening socket are relied on)."""
    if keepalive is None and buffers is None:
        return protocol_factory

    def make() -> PipeProtocol:
        protocol = protocol_factory()
        made = protocol.connection_made

        def connection_made(transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                if keepalive is not None:
                    _tune(sock, "keepalive", partial(set_keepalive, sock, keepalive))
                if buffers is not None:
                    _tune(sock, "buffers", partial(set_buffers, sock, buffers))
            made(transport)

        protocol.connection_made = connection_made  # type: ignore[method-assign]
        return protocol

    return make


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


@dataclass(frozen=True, slots=True)
class TransportSpec:
    """A registered transport and what it declared (see the module doc); the engine calls its
    :meth:`listen` and :meth:`dial`, which pass the transport only what it declared."""

    scheme: str
    transport: Any
    plugin: str = ""
    backlog: bool = False
    keepalive: bool = False
    buffers: bool = False
    tls: bool = False
    sp_only: bool = False
    framing: str = "stream"
    sp_message_prefix: bytes = b""

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None, keepalive: KeepAlive | None = None,
               buffers: SocketBuffers | None = None, tls: Any = None) -> Listener:
        """Bind now; ``backlog`` and explicit ``buffers`` only if declared (else a
        ConfigError)."""
        extra: dict[str, Any] = {}
        if backlog is not None:
            if not self.backlog:
                raise ConfigError(f"transport {self.scheme!r} takes no listen backlog")
            extra["backlog"] = backlog
        if self.keepalive:
            extra["keepalive"] = keepalive
        self._buffers(extra, buffers)
        if self.tls:
            extra["tls"] = tls
        return self.transport.listen(address, protocol_factory, **extra)  # type: ignore[no-any-return]

    async def dial(self, address: str, protocol_factory: ProtocolFactory, *,
                   keepalive: KeepAlive | None = None, buffers: SocketBuffers | None = None,
                   tls: Any = None) -> None:
        extra: dict[str, Any] = {}
        if self.keepalive:
            extra["keepalive"] = keepalive
        self._buffers(extra, buffers)
        if self.tls:
            extra["tls"] = tls
        await self.transport.dial(address, protocol_factory, **extra)

    def _buffers(self, extra: dict[str, Any], buffers: SocketBuffers | None) -> None:
        if self.buffers:
            extra["buffers"] = buffers
        elif buffers is not None and buffers.explicit:
            raise ConfigError(f"transport {self.scheme!r} takes no sndbuf or rcvbuf")


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
    implements ``write``, ``close`` and its reading.

    A listening layer asks :meth:`connection_arrived` before its own handshake: the engine's
    pipe applies the listener's limits (``allow``, ``max_connections``) there, so a refused
    peer costs no TLS handshake and never sees the certificate."""

    raw: asyncio.Transport | None = None
    #: the protocol above (:class:`PipeProtocol`); its ``connection_lost`` gets a
    #: :class:`~gateway.errors.LayerError` when the layer failed before the pipe had the
    #: connection
    pipe: Any = None

    def connection_arrived(self, transport: asyncio.BaseTransport) -> bool:
        """The raw connection exists; True when the protocol above takes it (a pipe checks
        its listener's limits; a protocol without the call takes every connection)."""
        return bool(self.pipe.connection_arrived(transport))

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

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.raw.get_write_buffer_limits() if self.raw is not None else (0, 0)

    def pause_reading(self) -> None:
        if self.raw is not None:
            self.raw.pause_reading()

    def resume_reading(self) -> None:
        if self.raw is not None:
            self.raw.resume_reading()

    def is_reading(self) -> bool:
        return self.raw is not None and self.raw.is_reading()
