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

from gateway.hookspecs import hookimpl
from gateway.transport import KeepAlive, Layer, ProtocolFactory, ServerListener
from gateway.url import split_host_port

#: seconds a TLS handshake may take when the pipe does not say (its handshake_timeout)
HANDSHAKE_TIMEOUT = 10.0


class TlsShim(Layer):
    """TLS on a fresh TCP connection, sans-IO (``ssl.SSLObject`` over two memory BIOs), in
    front of the engine's pipe: the connection's protocol on one side, the transport the pipe
    writes to on the other. On success the pipe sees a plain byte stream; on failure the pipe
    is told why (``fail_reason = "tls"``) and ended. Independent of the event loop (uvloop's
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

    # -- the TCP side --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport  # type: ignore[assignment]
        if self.server_side and not self.connection_arrived(transport):
            self._ended = True  # refused by the listener's limits (counted there): no TLS
            self.raw.abort()  # type: ignore[union-attr]
            self.pipe.connection_lost(None)
            return
        timeout = float(getattr(self.pipe, "handshake_timeout", HANDSHAKE_TIMEOUT)
                        or HANDSHAKE_TIMEOUT)
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
        if self._done:
            self.pipe.pause_writing()

    def resume_writing(self) -> None:
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
                if hasattr(self.pipe, "abort"):
                    self.pipe.abort("tls", f"TLS: {exc}")
                elif self.raw is not None:
                    self.raw.abort()
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
        pipe = getattr(self.pipe, "pipe", self.pipe)  # the engine's pipe, under a WsShim too
        peer = self.raw.get_extra_info("peername") if self.raw is not None else None
        if peer and hasattr(pipe, "peer"):
            pipe.peer = f"{peer[0]}:{peer[1]}"
        detail = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        if hasattr(pipe, "fail_reason"):
            pipe.fail_reason = "tls"
            pipe.fail_detail = f"TLS handshake failed: {detail}"
            pipe.fail_fields = {"wire": "sp", "tls": str(detail)}
        if self.raw is not None:
            self.raw.abort()
        self.pipe.connection_lost(exc if isinstance(exc, Exception) else None)

    # -- the transport the pipe sees -----------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data or self.raw is None or self.raw.is_closing():
            return
        try:
            self._ssl.write(data)
        except ssl.SSLError as exc:
            self.raw.abort()
            if hasattr(self.pipe, "lost_error"):
                self.pipe.lost_error = f"TLS: {exc}"
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
