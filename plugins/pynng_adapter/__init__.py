"""pynng adapter: nng raw REP / raw REQ (xrep / xreq) as bridge sides (family "sp"), in the
asyncio face (:class:`PynngRawSocket`) and the polled face (:class:`NngPolled`) of
:mod:`gateway.adapter`.

The asyncio face::

    s = PynngRawSocket("REP")             # raw rep0, the ROUTER-like one ("ROUTER" works too)
    url = s.bind("tcp://127.0.0.1:0")     # -> "tcp://127.0.0.1:40117"
    msg = await s.recv_msg()              # Message(hops=(pipe_id, rid), body=(b"hi",))
    await s.send_msg(msg._replace(body=(b"ho",)))
    s.close()

Message mapping: the nng message *header* is the backtrace, split into 4-byte words (outermost
first), the nng *body* is the single body frame. nng's raw rep0 builds the header as
``[pipe id (top bit clear)][hops...][request id (top bit set)]`` and raw req0 moves the whole
backtrace up to the request id into the header on receive (nng 1.11; nanomsg moves 4 bytes
only -- same wire bytes). Should a header ever stop short of the top-bit word, the adapter
keeps moving words from the body, so both conventions give the same Message. On send the hops
are joined into the header and the one body frame is the body; raw rep0 pops the pipe id from
the header to pick the pipe (unknown pipe: nng drops the message), raw req0 writes
header + body to the next ready pipe untouched.

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

nng's raw rep0 gives every pipe a 64-message send queue and *drops* a reply when it is full
(``nni_msgq_tryput`` in xrep.c), silently and without any counter we could read: a client that
pipelines far more than 64 requests without reading replies loses some.

nng has no linger: ``close()`` drops what is still queued in nng (``linger`` is accepted for
interface symmetry; messages already handed to the pipe's TCP stream are normally gone by then).
"""

from __future__ import annotations

import asyncio
import collections
import re
import socket as _socket
import threading
from collections.abc import Callable
from typing import Any

import pynng
from pynng import ffi, lib

from gateway.adapter import SideOptions
from gateway.errors import Closed, ConfigError, LocalProtocolError, PeerGone, TransportError
from gateway.hookspecs import hookimpl
from gateway.message import Message
from gateway.tls import TlsSettings

__all__ = ["NngPolled", "PynngRawSocket", "gateway_register_adapters"]

_KINDS = {"REP": "REP", "REQ": "REQ", "ROUTER": "REP", "DEALER": "REQ",
          "XPUB": "XPUB", "PUB": "XPUB", "XSUB": "XSUB", "SUB": "XSUB", "PUSH": "PUSH",
          "PULL": "PULL", "PAIR": "PAIR", "PAIR0": "PAIR", "PAIR1": "PAIR1"}
_OPENERS = {"REP": (pynng.Rep0, lib.nng_rep0_open_raw), "REQ": (pynng.Req0, lib.nng_req0_open_raw)}
#: the other patterns' bridge faces, nng's cooked sockets (no header on the wire but pair1's,
#: which nng's cooked pair1 writes itself): pub0 toward subscribers, sub0 toward a publisher
#: (a sent 0x01/0x00 + prefix message (un)subscribes), push0, pull0, pair0, pair1
_PLAIN = {"XPUB": pynng.Pub0, "XSUB": pynng.Sub0, "PUSH": pynng.Push0, "PULL": pynng.Pull0,
          "PAIR": pynng.Pair0, "PAIR1": pynng.Pair1}
_RECEIVES = frozenset({"REP", "REQ", "XSUB", "PULL", "PAIR", "PAIR1"})
_SENDS = frozenset({"REP", "REQ", "XPUB", "PUSH", "PAIR", "PAIR1"})
_TCP_PORT = re.compile(r"^((?:tls\+)?tcp[46]?://)(.*):(0|\*)$")
_new = tuple.__new__
_NONBLOCK = lib.NNG_FLAG_NONBLOCK
_EAGAIN = lib.NNG_EAGAIN
_ECLOSED = lib.NNG_ECLOSED


def _to_message(hdr: bytes, body: bytes) -> Message:
    n = len(hdr)
    if n == 8:  # the common case: one hop (pipe id or token) + request id
        hops: tuple[bytes, ...] = (hdr[:4], hdr[4:])
    elif n == 4:
        hops = (hdr,)
    else:
        hops = tuple(hdr[i : i + 4] for i in range(0, n, 4))
    if not hops or not hops[-1][0] & 0x80:
        # nanomsg-style: only part of the backtrace in the header; keep moving words
        extra = []
        while len(body) >= 4:
            word, body = body[:4], body[4:]
            extra.append(word)
            if word[0] & 0x80:
                break
        hops += tuple(extra)
    return _new(Message, (hops, (body,)))


def _build(msg_p: Any, hops: tuple[bytes, ...], body: bytes) -> Any:
    """An nng_msg with ``hops`` as its header and ``body`` as its body (the caller owns it)."""
    rv = lib.nng_msg_alloc(msg_p, 0)
    if rv:
        raise MemoryError(_strerror(rv))
    m = msg_p[0]
    hdr = b"".join(hops)
    if lib.nng_msg_header_append(m, hdr, len(hdr)) or lib.nng_msg_append(m, body, len(body)):
        lib.nng_msg_free(m)
        raise MemoryError("nng_msg_append failed")
    return m


def _take(m: Any) -> Message:
    """The Message of a received nng_msg, which is freed."""
    try:
        return _to_message(ffi.buffer(lib.nng_msg_header(m), lib.nng_msg_header_len(m))[:],
                           ffi.buffer(lib.nng_msg_body(m), lib.nng_msg_len(m))[:])
    finally:
        lib.nng_msg_free(m)


def _take_plain(m: Any) -> Message:
    """A pub/sub, pipeline or pair0 message: the body only."""
    try:
        return _new(Message, ((), (ffi.buffer(lib.nng_msg_body(m), lib.nng_msg_len(m))[:],)))
    finally:
        lib.nng_msg_free(m)


def _take_pair1(m: Any) -> Message:
    """A pair1 message: its hop-count word (when nng left it in the header) is the one hop."""
    try:
        hdr = ffi.buffer(lib.nng_msg_header(m), lib.nng_msg_header_len(m))[:]
        return _new(Message, ((hdr,) if hdr else (), (ffi.buffer(lib.nng_msg_body(m),
                                                                 lib.nng_msg_len(m))[:],)))
    finally:
        lib.nng_msg_free(m)


_TAKERS = {"REP": _take, "REQ": _take, "PAIR1": _take_pair1}


def recv_raw(sock: Any) -> Message:
    """One message from a raw pynng socket (``Req0``/``Rep0`` opened raw), its header words as
    hops (the one nng header codec: ``_to_message``); blocks up to the socket's
    ``recv_timeout`` and raises what pynng raises (``pynng.Timeout``, ``pynng.Closed``)."""
    msg_p = ffi.new("nng_msg **")
    rv = lib.nng_recvmsg(sock.socket, msg_p, 0)
    if rv:
        pynng.exceptions.check_err(rv)
    return _take(msg_p[0])


def send_raw(sock: Any, hops: tuple[bytes, ...], body: bytes) -> None:
    """Send ``hops`` (the header, on the wire as is) and ``body`` on a raw pynng socket."""
    msg_p = ffi.new("nng_msg **")
    m = _build(msg_p, hops, body)
    rv = lib.nng_sendmsg(sock.socket, m, 0)
    if rv:
        lib.nng_msg_free(m)
        pynng.exceptions.check_err(rv)


def _subscribe(sock: Any, frame: bytes) -> None:
    """sub0: a 0x01/0x00 + prefix message as nng's (un)subscribe option."""
    if frame[:1] not in (b"\x01", b"\x00"):
        raise LocalProtocolError(f"sub0 takes subscriptions only, not {frame[:16]!r}")
    option = b"sub:subscribe" if frame[:1] == b"\x01" else b"sub:unsubscribe"
    topic = frame[1:]
    rv = lib.nng_socket_set(sock.socket, option, topic, len(topic))
    if rv and rv != lib.NNG_ENOENT:  # cancelling what nng does not hold: nothing to undo
        raise TransportError(f"pynng {option.decode()}: {_strerror(rv)}")


def _use_tls(sock: Any, tls: TlsSettings | None, url: str, server: bool) -> None:
    """Give a socket nng's TLS configuration for a ``tls+tcp://`` or ``wss://`` URL: the
    endpoint's ``tls_*`` settings (``gateway.tls``) as ``pynng.TLSConfig``, in the role the
    bind (server) or dial (client) takes."""
    if not url.startswith(("tls+tcp://", "wss://")):
        return
    tls = tls or TlsSettings()
    if server and not tls.cert:
        raise ConfigError(f"pynng: listening on {url} needs tls_cert and tls_key")
    if tls.cert and not tls.key:
        raise ConfigError("pynng: tls_cert needs tls_key (nng reads the key separately)")

    def text(path: str | None) -> str | None:
        if path is None:
            return None
        with open(path, encoding="ascii") as fh:
            return fh.read()

    mode = tls.verify or ("none" if server else "required")
    auth = {"none": pynng.TLSConfig.AUTH_MODE_NONE,
            "optional": pynng.TLSConfig.AUTH_MODE_OPTIONAL,
            "required": pynng.TLSConfig.AUTH_MODE_REQUIRED}[mode]
    sock.tls_config = pynng.TLSConfig(
        pynng.TLSConfig.MODE_SERVER if server else pynng.TLSConfig.MODE_CLIENT,
        server_name=None if server else (tls.server_name or _host_of(url)),
        ca_string=text(tls.ca), own_cert_string=text(tls.cert), own_key_string=text(tls.key),
        auth_mode=auth)


def _host_of(url: str) -> str:
    return url.partition("://")[2].rpartition(":")[0].strip("[]")


def _lib_listen(sock: Any, url: str) -> str:
    """Listen; return the real URL (``tcp://h:0`` or ``tcp://h:*`` get the bound port)."""
    m = _TCP_PORT.match(url)
    nurl = f"{m.group(1)}{m.group(2)}:0" if m else url
    listener = sock.listen(nurl)
    if m is None:
        return url
    port = ffi.new("int *")
    rv = lib.nng_listener_get_int(listener.listener, b"tcp-bound-port", port)
    if rv == 0:
        bound = port[0]
    else:  # older nng: read the port from the local address (network byte order)
        bound = _socket.ntohs(listener.local_address.port)
    return f"{m.group(1)}{m.group(2)}:{bound}"


def _open(kind: str, raw: bool, recv_max_size: int, *, tcp_keepalive: bool = True,
          **kwargs: Any) -> tuple[str, Any]:
    k = _KINDS.get(kind.upper())
    if k is None or (not raw and k in _OPENERS):
        raise ConfigError(f"pynng adapter: no raw socket of kind {kind!r} (raw={raw})")
    if k not in _SENDS:
        kwargs.pop("send_buffer_size", None)
    if k in _OPENERS or k not in _RECEIVES:
        kwargs.pop("recv_buffer_size", None)
    if k in _OPENERS:
        cls, opener = _OPENERS[k]
        sock = cls(opener=opener, recv_max_size=recv_max_size, **kwargs)
    else:
        extra = {"polyamorous": False} if k == "PAIR1" else {}
        sock = _PLAIN[k](recv_max_size=recv_max_size, **extra, **kwargs)
    sock.tcp_keepalive = tcp_keepalive  # NNG_OPT_TCP_KEEPALIVE, before any dialer or listener
    return k, sock


def _outgoing(kind: str, hops: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """The header a send carries: the backtrace for req/rep, nothing for the cooked faces
    (nng's cooked pair1 writes its own hop count; a header on the others would reach the wire)."""
    return hops if kind in _OPENERS else ()


def _set_ttl(sock: Any, ttl: int | None) -> None:
    if ttl is not None:
        check = lib.nng_socket_set_int(sock.socket, b"ttl-max", int(ttl))
        if check:
            raise ConfigError(f"pynng adapter: bad ttl {ttl}: {_strerror(check)}")


class _LivePipes:
    """The ids of a socket's connected pipes, kept by nng's pipe notifications: a raw rep0 refuses
    a reply to a client that left (:class:`PeerGone`) instead of letting nng take it and drop it
    without a word, and ``peers`` counts them. When a pipe goes, its id is gone before
    ``face.on_peer_lost`` is called (pynng runs the callbacks before it forgets the pipe
    itself, so ``len(sock.pipes)`` would still count it)."""

    def __init__(self, sock: Any, face: Any) -> None:
        self.ids: set[int] = {p.id for p in sock.pipes}
        # nng starts the pipe (its first request can reach us) between ADD_PRE and ADD_POST
        # (socket.c): a reply may come back before ADD_POST, so the id is added at ADD_PRE
        add = lambda pipe: self.ids.add(pipe.id)  # noqa: E731
        sock.add_pre_pipe_connect_cb(add)
        sock.add_post_pipe_connect_cb(add)

        def removed(pipe: Any) -> None:  # on nng's thread
            self.ids.discard(pipe.id)
            callback = face.on_peer_lost
            if callback is not None:
                callback()

        sock.add_post_pipe_remove_cb(removed)

    def check(self, hops: tuple[bytes, ...]) -> None:
        if not hops or int.from_bytes(hops[0], "big") not in self.ids:
            raise PeerGone(f"no client pipe {hops[0].hex() if hops else '-'}")


class PynngRawSocket:
    """An nng raw REP (clients connect to it) or raw REQ (talks to servers) for the device.

    ``kind``: "REP" or "REQ" (raw), or "ROUTER"/"DEALER" for the same sockets. ``hwm`` bounds
    the adapter's receive queue (messages), on top of nng's own buffers; ``send_buffer`` is nng's
    socket send buffer (messages, at most 8192). ``recv_max_size`` is nng's max message size
    (default 1 MiB, nng's default). ``ttl`` sets nng's hop limit
    (``NNG_OPT_MAXTTL``, 1..15, default 8) on raw REP.
    """

    callbacks = False  # (the adapter contract, gateway.adapter)
    backlog = 0  # nng holds what it received

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
        self.kind, self._sock = _open(kind, raw, recv_max_size,
                                      send_buffer_size=min(send_buffer, 8192),
                                      recv_buffer_size=min(hwm, 8192),  # sub0/pull0/pair
                                      tcp_keepalive=tcp_keepalive, **_reconnect(reconnect))
        _set_ttl(self._sock, ttl)
        # replies: nng takes them, then drops one silently when the client's pipe queue is full
        self.confirms_delivery = self.kind == "REQ"
        #: called (on nng's thread) when a peer's pipe goes away
        self.on_peer_lost: Callable[[], None] | None = None
        self._pipes = _LivePipes(self._sock, self)
        self._live = self._pipes if self.kind == "REP" else None
        self._takes = _TAKERS.get(self.kind, _take_plain)
        if self.kind == "XPUB":  # pub0 drops for a full subscriber without a word
            self.confirms_delivery = False
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
        _use_tls(self._sock, self._tls, url, server=True)
        try:
            return _lib_listen(self._sock, url)
        except pynng.NNGException as e:
            raise TransportError(f"pynng listen {url}: {e}") from e

    def connect(self, url: str) -> None:
        """Dial in the background (nng redials until the peer is there, like libzmq)."""
        _use_tls(self._sock, self._tls, url, server=False)
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
                        final = TransportError(f"pynng recv: {_strerror(rv)}")
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
        if self.kind not in _RECEIVES:
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
            _subscribe(self._sock, body[0])
            return
        if self._live is not None:
            self._live.check(hops)
        m = _build(self._send_p, _outgoing(self.kind, hops), body[0])
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
        raise TransportError(f"pynng send: {_strerror(rv)}")

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

    @property
    def peers(self) -> int:
        """Connected pipes (see :class:`_LivePipes`)."""
        return len(self._pipes.ids)

    def __repr__(self) -> str:
        return f"<PynngRawSocket raw {self.kind}{' closed' if self._closed else ''}>"


#: the endpoint settings (``gateway.settings.schema``) this adapter hands to nng (nng has no handshake
#: deadline, no linger and no listen backlog setting; its TCP keepalive is on or off, with the
#: system's timings: no tcp_keepalive_idle/intvl/cnt)
HONOURED = frozenset({"hwm", "max_message_size", "reconnect_ivl", "reconnect_ivl_max",
                      "tcp_keepalive", "tls_cert", "tls_key", "tls_ca", "tls_verify",
                      "tls_server_name"})


def _reconnect(ivl: tuple[float, float]) -> dict[str, int]:
    """nng's redial backoff (NNG_OPT_RECONNMINT / RECONNMAXT, milliseconds)."""
    return {"reconnect_time_min": round(ivl[0] * 1000), "reconnect_time_max": round(ivl[1] * 1000)}


def open_async(kind: str, options: SideOptions) -> PynngRawSocket:
    # the other patterns' faces: see _PLAIN
    return PynngRawSocket(kind, hwm=options.hwm, send_buffer=options.hwm,
                          recv_max_size=options.max_message_size,
                          ttl=options.hop_limit if kind.upper() in ("REP", "ROUTER") else None,
                          reconnect=(options.reconnect_ivl, options.reconnect_ivl_max),
                          tcp_keepalive=options.tcp_keepalive, tls=options.tls)


class NngPolled:
    """The polled face: nng raw rep0 (front) or raw req0 (back) through nng's C API, never
    blocking; nng's ``recv-fd`` and ``send-fd`` are what the poller waits on."""

    callbacks = False
    backlog = 0
    name = ""

    def __init__(self, kind: str, options: SideOptions) -> None:
        self.kind, self._pynng = _open(kind, True, options.max_message_size,
                                       send_buffer_size=min(options.hwm, 8192),
                                       tcp_keepalive=options.tcp_keepalive,
                                       recv_buffer_size=min(options.hwm, 8192),
                                       **_reconnect((options.reconnect_ivl,
                                                     options.reconnect_ivl_max)))
        _set_ttl(self._pynng, options.hop_limit if self.kind == "REP" else None)
        self._tls = options.tls
        self.sock = self._pynng.socket
        self.confirms_delivery = self.kind == "REQ"  # see PynngRawSocket
        self.on_peer_lost: Callable[[], None] | None = None  # see PynngRawSocket
        self._pipes = _LivePipes(self._pynng, self)
        self._live = self._pipes if self.kind == "REP" else None
        self._takes = _TAKERS.get(self.kind, _take_plain)
        if self.kind == "XPUB":
            self.confirms_delivery = False
        # None where nng has no such fd (pub0 and push0 never receive; sub0 and pull0 never
        # send, and a sub0's (un)subscribe never waits)
        self.pollable = self._pynng.recv_fd if self.kind in _RECEIVES else None
        self.out_pollable: tuple[Any, int] | None = (
            (self._pynng.send_fd, 1) if self.kind in _SENDS else None)  # zmq.POLLIN on the fd
        self._msgp = ffi.new("nng_msg **")

    def bind(self, url: str) -> str:
        _use_tls(self._pynng, self._tls, url, server=True)
        return _lib_listen(self._pynng, url)

    def connect(self, url: str) -> None:
        _use_tls(self._pynng, self._tls, url, server=False)
        self._pynng.dial(url, block=False)

    def recv_nowait(self) -> Message | None:
        rv = lib.nng_recvmsg(self.sock, self._msgp, _NONBLOCK)
        if rv:
            if rv == _EAGAIN:
                return None
            raise TransportError(_strerror(rv))
        return self._takes(self._msgp[0])

    def send_nowait(self, msg: Message) -> bool:
        hops, body = msg
        if len(body) != 1:
            raise LocalProtocolError(f"SP carries exactly one body frame, not {len(body)}")
        if self.kind == "XSUB":
            _subscribe(self._pynng, body[0])
            return True
        if self._live is not None:
            self._live.check(hops)
        m = _build(self._msgp, _outgoing(self.kind, hops), body[0])
        rv = lib.nng_sendmsg(self.sock, m, _NONBLOCK)
        if rv == 0:
            return True
        lib.nng_msg_free(m)
        if rv == _EAGAIN:
            return False
        raise TransportError(_strerror(rv))

    @property
    def peers(self) -> int:
        return len(self._pipes.ids)

    def close(self) -> None:
        self._pynng.close()


def open_polled(kind: str, options: SideOptions) -> NngPolled:
    return NngPolled(kind, options)


def _strerror(rv: int) -> str:
    return ffi.string(lib.nng_strerror(rv)).decode(errors="replace")


@hookimpl
def gateway_register_adapters(register):  # type: ignore[no-untyped-def]
    register("pynng", "sp", open_async, polled=open_polled, options=HONOURED)
