"""TLS over TCP for SP: ``sp+tls+tcp://host:port`` (nng's ``tls+tcp``; sp-tls-mapping-01).

The TCP mapping inside TLS. The engine hands each listen and dial an ``ssl.SSLContext``
(``tls=``, from the endpoint's settings: :mod:`gateway.tls`); the TLS handshake runs in front of
the engine's pipe (:class:`TlsShim`), so a refused certificate reaches the pipe as a failed
handshake (reason ``tls``: one warning line and ``gateway_handshake_failures_total``), and the
pipe sees a plain byte stream once it succeeds.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from gateway_plugins.tcp import TcpTransport

from gateway.hookspecs import hookimpl
from gateway.transport import KeepAlive, ProtocolFactory, ServerListener
from gateway.url import split_host_port

#: seconds a TLS handshake may take when the pipe does not say (its handshake_timeout)
HANDSHAKE_TIMEOUT = 10.0


class TlsShim(asyncio.Protocol):
    """Runs the TLS handshake on a fresh TCP connection, then hands the TLS transport to the
    engine's pipe; on failure tells the pipe why (``fail_reason = "tls"``) and ends it."""

    def __init__(self, pipe: Any, context: ssl.SSLContext, server_side: bool,
                 server_hostname: str | None) -> None:
        self.pipe = pipe
        self.context = context
        self.server_side = server_side
        self.server_hostname = server_hostname
        self._task: asyncio.Task[None] | None = None
        #: bytes that arrived between the end of the handshake and the hand-over to the pipe
        #: (the peer's SP header often comes in the same read as its last handshake record)
        self._early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._handshake(transport))  # type: ignore[arg-type]

    async def _handshake(self, raw: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        timeout = float(getattr(self.pipe, "handshake_timeout", HANDSHAKE_TIMEOUT) or
                        HANDSHAKE_TIMEOUT)
        try:
            tls = await loop.start_tls(raw, self, self.context, server_side=self.server_side,
                                       server_hostname=self.server_hostname,
                                       ssl_handshake_timeout=timeout)
        except (TimeoutError, ssl.SSLError, OSError, ConnectionError) as exc:
            raw.abort()
            self._failed(raw, exc)
            return
        if tls is None:  # the connection went away during the handshake
            self._failed(raw, ConnectionResetError("closed during the TLS handshake"))
            return
        tls.set_protocol(self.pipe)
        self.pipe.connection_made(tls)
        early, self._early = self._early, []
        for data in early:
            self.pipe.data_received(data)

    def data_received(self, data: bytes) -> None:
        self._early.append(data)

    def _failed(self, raw: asyncio.BaseTransport, exc: BaseException) -> None:
        pipe = getattr(self.pipe, "pipe", self.pipe)  # the engine's pipe, under a WsShim too
        peer = raw.get_extra_info("peername")
        if peer and hasattr(pipe, "peer"):
            pipe.peer = f"{peer[0]}:{peer[1]}"
        detail = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        if hasattr(pipe, "fail_reason"):
            pipe.fail_reason = "tls"
            pipe.fail_detail = f"TLS handshake failed: {detail}"
            pipe.fail_fields = {"wire": "sp", "tls": str(detail)}
        self.pipe.connection_lost(exc if isinstance(exc, Exception) else None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._task is not None and not self._task.done():
            return  # start_tls reports it
        self.pipe.connection_lost(exc)


class TlsTcpTransport:
    scheme = "tls+tcp"
    #: the engine passes ``tls=`` (an ``ssl.SSLContext``) to listen and dial
    tls = True
    #: nng's transport: the engine refuses it for a ZeroMQ endpoint
    sp_only = True

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None, tls: ssl.SSLContext,
               keepalive: KeepAlive | None = None) -> ServerListener:
        return TcpTransport().listen(
            address, lambda: TlsShim(protocol_factory(), tls, True, None), backlog=backlog,
            keepalive=keepalive)

    async def dial(self, address: str, protocol_factory: ProtocolFactory, *,
                   tls: ssl.SSLContext, server_hostname: str | None = None,
                   keepalive: KeepAlive | None = None) -> None:
        name = server_hostname or (split_host_port(address)[0] if tls.check_hostname else None)
        await TcpTransport().dial(address, lambda: TlsShim(protocol_factory(), tls, False, name),
                                  keepalive=keepalive)


@hookimpl
def gateway_register_transports(register) -> None:  # type: ignore[no-untyped-def]
    register("tls+tcp", TlsTcpTransport())
