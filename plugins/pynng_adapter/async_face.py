"""The asyncio face of the pynng adapter (:class:`PynngRawSocket`)::

    s = PynngRawSocket("REP")             # raw rep0, the ROUTER-like one ("ROUTER" works too)
    url = s.bind("tcp://127.0.0.1:0")     # -> "tcp://127.0.0.1:40117"
    msg = await s.recv_msg()              # Message(hops=(pipe_id, rid), body=(b"hi",))
    await s.send_msg(msg._replace(body=(b"ho",)))
    s.close()

Messages map to nng_msg as :mod:`.message` says.

How nng is driven (pynng 0.9.0, nng 1.11), with the raw C API through ``pynng.lib``/``ffi``:

* open: ``pynng.Rep0(opener=pynng.lib.nng_rep0_open_raw)`` / ``pynng.Req0(opener=
  pynng.lib.nng_req0_open_raw)`` -- the Socket base takes ``opener=`` and calls it on its
  ``nng_socket *``; ``lib.nng_socket_raw`` confirms the raw flag.
* receive: a dedicated reader thread blocks in ``lib.nng_recvmsg(sock, nng_msg **, 0)`` (cffi
  drops the GIL during the call), reads ``nng_msg_header``/``nng_msg_header_len`` and
  ``nng_msg_body``/``nng_msg_len`` with ``ffi.buffer``, frees the nng_msg, and hands the Message
  to the event loop through a bounded deque; the loop is woken with one
  ``call_soon_threadsafe`` per burst, not per message. ``nng_close`` makes the blocked call
  return ``NNG_ECLOSED`` and the thread ends.
* send: ``nng_msg_alloc`` + ``nng_msg_header_append`` + ``nng_msg_append`` and then
  ``lib.nng_sendmsg(..., NNG_FLAG_NONBLOCK)`` straight from the loop (nng owns the message on
  success). The socket gets an nng send buffer (``NNG_OPT_SENDBUF``, ``send_buffer``) so that
  this rarely says ``NNG_EAGAIN``; when it does (raw req0 with no peer yet, or the buffer full)
  the adapter retries with a short backoff (0.5 ms doubling to 50 ms), freeing the message if
  the caller is cancelled.

Why not pynng's own ``arecv_msg``: it allocates an ``nng_aio`` and a Future per message, wraps
the result in ``pynng.Message`` and takes the pipe-notify lock to attach a Pipe object; and a
cancelled pending ``arecv`` now and then never completes under asyncio (pynng 0.9.0; compare
pynng issue #128). Measured on the dev box (2 vCPU, loopback, 100 B, the adapter raw REP
echoing with ``recv_msg``/``send_msg``, a pynng raw REQ client in another process keeping 50
requests in flight): 18.6k-19k msgs/s with the reader thread and the send buffer (9k-11k
before the send buffer was set) against 3.8k-4.8k msgs/s with ``arecv_msg``/``asend_msg``; a
bare blocking ``nng_recvmsg``/``nng_sendmsg`` echo thread with no asyncio at all does ~18.5k
msgs/s with the same client, so the adapter is at the client's limit there.

nng has no linger: ``close()`` drops what is still queued in nng (``linger`` is accepted for
interface symmetry; messages already handed to the pipe's TCP stream are normally gone by then).
"""

from __future__ import annotations

import asyncio
import collections
import threading

import pynng
from pynng import ffi, lib

from gateway.adapter import SideOptions
from gateway.errors import Closed, LocalProtocolError, TransportError
from gateway.message import Message
from gateway.tls import TlsSettings

from .message import build, outgoing, strerror
from .sockets import (
    RECEIVES,
    NngFace,
    lib_listen,
    open_socket,
    reconnect_options,
    set_ttl,
    subscribe,
)
from .tls import use_tls

_NONBLOCK = lib.NNG_FLAG_NONBLOCK
_EAGAIN = lib.NNG_EAGAIN
_ECLOSED = lib.NNG_ECLOSED


class PynngRawSocket(NngFace):
    """An nng raw REP (clients connect to it) or raw REQ (talks to servers) for the device.

    ``kind``: "REP" or "REQ" (raw), or "ROUTER"/"DEALER" for the same sockets. ``hwm`` bounds
    the adapter's receive queue (messages), on top of nng's own buffers; ``send_buffer`` is nng's
    socket send buffer (messages, at most 8192). ``recv_max_size`` is nng's max message size
    (default 1 MiB, nng's default). ``ttl`` sets nng's hop limit
    (``NNG_OPT_MAXTTL``, 1..15, default 8) on raw REP.
    """

    family = "sp"

    def __init__(
        self,
        kind: str,
        raw: bool = True,
        *,
        hwm: int = 1000,
        recv_max_size: int = 1 << 20,
        send_buffer: int = 1000,
        ttl: int | None = None,
        reconnect: tuple[float, float] = (0.1, 2.0),
        tcp_keepalive: bool = True,
        tls: TlsSettings | None = None,
    ) -> None:
        self._tls = tls  # tls+tcp:// and wss:// (gateway.tls), applied at bind or connect
        k, self._sock = open_socket(kind, raw, recv_max_size,
                                    send_buffer_size=min(send_buffer, 8192),
                                    recv_buffer_size=min(hwm, 8192),  # sub0/pull0/pair
                                    tcp_keepalive=tcp_keepalive, **reconnect_options(reconnect))
        set_ttl(self._sock, ttl)
        self._adopt(k, self._sock)
        self._hwm = hwm
        self._queue: collections.deque[Message | BaseException] = collections.deque()
        self._space = threading.Event()
        self._space.set()
        self._waiter: asyncio.Future[None] | None = None
        self._wake_pending = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader: threading.Thread | None = None
        self._closed = False
        self._send_p = ffi.new("nng_msg **")

    # -- endpoints ------------------------------------------------------------------------------

    def bind(self, url: str) -> str:
        """Listen; return the real URL (``tcp://h:0`` or ``tcp://h:*`` get the bound port)."""
        use_tls(self._sock, self._tls, url, server=True)
        try:
            return lib_listen(self._sock, url)
        except pynng.NNGException as e:
            raise TransportError(f"pynng listen {url}: {e}") from e

    def connect(self, url: str) -> None:
        """Dial in the background (nng redials until the peer is there, like libzmq)."""
        use_tls(self._sock, self._tls, url, server=False)
        try:
            self._sock.dial(url, block=False)
        except pynng.NNGException as e:
            raise TransportError(f"pynng dial {url}: {e}") from e

    # -- receiving ------------------------------------------------------------------------------

    def _start_reader(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._reader = threading.Thread(
            target=self._read_loop, name=f"pynng-{self.kind}-reader", daemon=True
        )
        self._reader.start()

    def _read_loop(self) -> None:
        sock = self._sock.socket
        msg_p = ffi.new("nng_msg **")
        queue = self._queue
        space = self._space
        hwm = self._hwm
        recvmsg = lib.nng_recvmsg
        take = self._takes
        loop = self._loop
        assert loop is not None
        final: BaseException
        try:
            while True:
                rv = recvmsg(sock, msg_p, 0)
                if rv:
                    if rv == _ECLOSED or self._closed:
                        final = Closed("pynng socket closed")
                    else:
                        final = TransportError(f"pynng recv: {strerror(rv)}")
                    break
                msg = take(msg_p[0])
                if len(queue) >= hwm:
                    space.clear()
                    while len(queue) >= hwm and not self._closed:
                        space.wait(0.5)
                queue.append(msg)
                if not self._wake_pending:
                    self._wake_pending = True
                    try:
                        loop.call_soon_threadsafe(self._wake)
                    except RuntimeError:  # the loop is closed: nobody will ever read
                        return
        except Exception as e:  # never die silently: the next recv_msg raises it
            final = TransportError(f"pynng reader failed: {e!r}")
        queue.append(final)
        try:
            loop.call_soon_threadsafe(self._wake)
        except RuntimeError:
            pass

    def _wake(self) -> None:
        self._wake_pending = False
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def recv_msg(self) -> Message:
        """The next message; one socket serves one event loop (the one of the first call)."""
        if self._closed:
            raise Closed("pynng socket closed")
        queue = self._queue
        if self.kind not in RECEIVES:
            raise LocalProtocolError(f"nng {self.kind.lower()} receives nothing")
        while not queue:
            if self._reader is None:
                if self._closed:
                    raise Closed("pynng socket closed")
                self._start_reader()
            w = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await w
            finally:
                self._waiter = None
        item = queue[0]
        if isinstance(item, BaseException):  # left in place: every later call raises too
            raise item
        queue.popleft()
        if not self._space.is_set():
            self._space.set()
        return item

    # -- sending --------------------------------------------------------------------------------

    async def send_msg(self, msg: Message) -> None:
        hops, body = msg
        if len(body) != 1:
            raise LocalProtocolError(f"SP carries exactly one body frame, not {len(body)}")
        if self._closed:
            raise Closed("pynng socket closed")
        if self.kind == "XSUB":
            subscribe(self._sock, body[0])
            return
        if self._live is not None:
            self._live.check(hops)
        m = build(self._send_p, outgoing(self.kind, hops), body[0])
        rv = lib.nng_sendmsg(self._sock.socket, m, _NONBLOCK)
        if rv == 0:
            return
        if rv == _EAGAIN:
            # no ready pipe (raw req0 before its first peer) and the send buffer is full: retry
            # with backoff rather than through pynng's aio (see the module doc); the nng_msg
            # stays ours until nng accepts it
            delay = 0.0005
            try:
                while rv == _EAGAIN:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.05)
                    rv = lib.nng_sendmsg(self._sock.socket, m, _NONBLOCK)
            except BaseException:
                lib.nng_msg_free(m)
                raise
            if rv == 0:
                return
        lib.nng_msg_free(m)
        if rv == _ECLOSED:
            raise Closed("pynng socket closed")
        raise TransportError(f"pynng send: {strerror(rv)}")

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self, linger: float = 0.5) -> None:
        """Close the nng socket; the reader thread ends (nng has no linger, see module doc)."""
        if self._closed:
            return
        self._closed = True
        self._space.set()
        self._sock.close()
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=max(linger, 0.1))
        elif reader is None:
            self._queue.append(Closed("pynng socket closed"))
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"<PynngRawSocket raw {self.kind}{' closed' if self._closed else ''}>"


def open_async(kind: str, options: SideOptions) -> PynngRawSocket:
    # the other patterns' faces: see PLAIN
    return PynngRawSocket(kind, hwm=options.hwm, send_buffer=options.hwm,
                          recv_max_size=options.max_message_size,
                          ttl=options.hop_limit if kind.upper() in ("REP", "ROUTER") else None,
                          reconnect=(options.reconnect_ivl, options.reconnect_ivl_max),
                          tcp_keepalive=options.tcp_keepalive, tls=options.tls)


__all__ = ["PynngRawSocket", "open_async"]
