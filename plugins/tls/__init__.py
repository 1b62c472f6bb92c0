"""TLS over TCP for SP: ``sp+tls+tcp://host:port`` (nng's ``tls+tcp``; sp-tls-mapping-01).

The TCP mapping inside TLS. The engine hands each listen and dial an ``ssl.SSLContext``
(``tls=``, from the endpoint's settings: :mod:`gateway.tls`); TLS runs sans-IO in front of
the engine's pipe (:class:`TlsShim`: ``ssl.SSLObject`` over memory BIOs), so a refused certificate reaches the pipe as a failed
handshake (reason ``tls``: one warning line and ``gateway_handshake_failures_total``), and the
pipe sees a plain byte stream once it succeeds.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from gateway_plugins.tcp import TcpTransport

from gateway.errors import LayerError
from gateway.hookspecs import hookimpl
from gateway.tls import TlsSettings
from gateway.transport import KeepAlive, Layer, ProtocolFactory, ServerListener, SocketBuffers
from gateway.url import split_host_port

#: seconds a TLS handshake may take when the pipe does not say (its handshake_timeout)
HANDSHAKE_TIMEOUT = 10.0


class TlsShim(Layer):
    """TLS on a fresh TCP connection, sans-IO (``ssl.SSLObject`` over two memory BIOs), in
    front of the engine's pipe: the connection's protocol on one side, the transport the pipe
    writes to on the other. On success the pipe sees a plain byte stream; on failure the pipe's
    ``connection_lost`` gets a :class:`~gateway.errors.LayerError` (reason ``tls``) that says
    why. Independent of the event loop (uvloop's
    ``start_tls`` lost a ClientHello now and then)."""

    def __init__(self, pipe: Any, context: ssl.SSLContext, server_side: bool,
                 server_hostname: str | None) -> None:
        self.pipe = pipe
        self.server_side = server_side
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._in, self._out, server_side=server_side,
                                     server_hostname=server_hostname)
        self.raw: asyncio.Transport | None = None
        self._done = False  # handshake complete: the pipe has the connection
        self._ended = False  # the pipe was told the connection is gone
        self._timer: asyncio.TimerHandle | None = None
        #: the TCP transport paused us (it holds bytes): told to the pipe once it has the
        #: connection (a pause during the handshake too: the transport pauses only once)
        self._paused = False

    # -- the TCP side --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport  # type: ignore[assignment]
        if not self.connection_arrived(transport):
            self._ended = True  # refused by the listener's limits (counted there): no TLS
            self.raw.abort()  # type: ignore[union-attr]
            self.pipe.connection_lost(None)
            return
        timeout = float(self.pipe.handshake_timeout or HANDSHAKE_TIMEOUT)
        self._timer = asyncio.get_running_loop().call_later(
            timeout, lambda: self._fail(TimeoutError(f"no TLS handshake within {timeout:g} s")))
        self._handshake()

    def data_received(self, data: bytes) -> None:
        self._in.write(data)
        if self._done:
            self._read()
        else:
            self._handshake()

    def eof_received(self) -> bool | None:
        return None  # close

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if not self._done and not self._ended:
            self._fail(exc or ConnectionResetError("closed during the TLS handshake"))
            return
        if not self._ended:
            self._ended = True
            self.pipe.connection_lost(exc)

    def pause_writing(self) -> None:
        self._paused = True
        if self._done:
            self.pipe.pause_writing()

    def resume_writing(self) -> None:
        self._paused = False
        if self._done:
            self.pipe.resume_writing()

    # -- TLS -----------------------------------------------------------------------------------
    def _handshake(self) -> None:
        try:
            self._ssl.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return
        except (ssl.SSLError, OSError) as exc:
            self._flush()  # the alert tells the peer why
            self._fail(exc)
            return
        self._flush()
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
        self.pipe.connection_made(self)
        if self._paused:  # the handshake's last bytes are still held
            self.pipe.pause_writing()
        self._read()  # application data that came with the last handshake record

    def _read(self) -> None:
        chunks = []
        while True:
            try:
                data = self._ssl.read(65536)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the peer's close_notify
                if self.raw is not None:
                    self.raw.close()
                break
            except ssl.SSLError as exc:
                self.pipe.abort("tls", f"TLS: {exc}")
                break
            if not data:
                break
            chunks.append(data)
        self._flush()
        if chunks:  # one call for all the records of this read: the pipe batches its writes
            self.pipe.data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def _flush(self) -> None:
        data = self._out.read()
        if data and self.raw is not None and not self.raw.is_closing():
            self.raw.write(data)

    def _fail(self, exc: BaseException) -> None:
        if self._ended:
            return
        self._ended = True
        if self._timer is not None:
            self._timer.cancel()
        detail = str(getattr(exc, "reason", None) or exc or type(exc).__name__)
        if self.raw is not None:
            self.raw.abort()
        self.pipe.connection_lost(LayerError("tls", f"TLS handshake failed: {detail}",
                                             {"wire": "sp", "tls": detail}))

    # -- the transport the pipe sees -----------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data or self.raw is None or self.raw.is_closing():
            return
        try:
            self._ssl.write(data)
        except ssl.SSLError as exc:
            self.pipe.abort("tls", f"TLS: {exc}")
            return
        self._flush()

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def close(self) -> None:
        if self.raw is None or self.raw.is_closing():
            return
        try:
            self._ssl.unwrap()  # close_notify
        except (ssl.SSLError, OSError):
            pass
        self._flush()
        self.raw.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._ssl
        if name == "peercert":
            return self._ssl.getpeercert()
        return super().get_extra_info(name, default)


def server_name(tls: TlsSettings, address: str, context: ssl.SSLContext) -> str | None:
    """The name a client checks in the server's certificate: ``tls_server_name``, else the
    URL's host (when the context checks names at all)."""
    if tls.server_name:
        return tls.server_name
    return split_host_port(address.partition("/")[0])[0] if context.check_hostname else None


class TlsTcpTransport:
    """``tls+tcp``: registered with ``tls=True`` (listen and dial get the endpoint's
    :class:`gateway.tls.TlsSettings` and ask it for their side's context) and ``sp_only=True``
    (nng's transport: refused on a ZeroMQ endpoint)."""

    scheme = "tls+tcp"

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None, tls: TlsSettings,
               keepalive: KeepAlive | None = None,
               buffers: SocketBuffers | None = None) -> ServerListener:
        context = tls.context(server_side=True)
        return TcpTransport().listen(
            address, lambda: TlsShim(protocol_factory(), context, True, None), backlog=backlog,
            keepalive=keepalive, buffers=buffers)

    async def dial(self, address: str, protocol_factory: ProtocolFactory, *,
                   tls: TlsSettings, keepalive: KeepAlive | None = None,
                   buffers: SocketBuffers | None = None) -> None:
        context = tls.context(server_side=False)
        name = server_name(tls, address, context)
        await TcpTransport().dial(address,
                                  lambda: TlsShim(protocol_factory(), context, False, name),
                                  keepalive=keepalive, buffers=buffers)


@hookimpl
def gateway_register_transports(register) -> None:  # type: ignore[no-untyped-def]
    register("tls+tcp", TlsTcpTransport(), tls=True, sp_only=True, backlog=True,
             keepalive=True, buffers=True)
