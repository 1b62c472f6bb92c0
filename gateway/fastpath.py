"""Library-backed bridges on the libraries' own poller: one thread, no asyncio, no handoffs.

When both sides of a bridge are library sockets (pyzmq ROUTER/DEALER, nng raw rep0/req0), the
device runs here instead of on the asyncio loop: one thread owns both sockets and waits in
``zmq.Poller`` on the zmq sockets and on nng's ``recv-fd`` (readable while a message is
queued). Each wake-up drains up to ``BATCH`` messages per side with non-blocking receives,
translates them with the same pure functions as the asyncio device and sends them on.

Why: measured on 2 vCPU (loopback, 100 B, 1 client), an asyncio device loop over pyzmq's
asyncio sockets costs ~3x a ``zmq.proxy`` hop; this loop is within the goals of issue 5 (see
``gateway bench``). zmq sockets are not thread-safe, so both directions must live on one thread:
exactly what one poller gives.

The translation and drop accounting are the Bridge's (``gateway.device``); this module only
moves Messages between sockets.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import pynng
import zmq
from pynng import ffi, lib

from gateway.envelope import EnvelopeError
from gateway.errors import TransportError
from gateway.message import Message
from gateway.metrics import METRICS

if TYPE_CHECKING:
    from gateway.device import Bridge

BATCH = 256
_new = tuple.__new__


class ZmqEnd:
    """pyzmq ROUTER (front) or DEALER (back), driven without blocking."""

    family = "zmtp"

    def __init__(self, kind: str, *, max_message_size: int = 1 << 20,
                 send_timeout_ms: int = 1000, context: Any = None,
                 mandatory: bool = True) -> None:
        self.router = kind == "REP"
        ctx = context if context is not None else zmq.Context.instance()
        sock: Any = ctx.socket(zmq.ROUTER if self.router else zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 200)
        sock.setsockopt(zmq.MAXMSGSIZE, max_message_size)
        sock.setsockopt(zmq.SNDTIMEO, send_timeout_ms)
        if self.router and mandatory:
            sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a reply to a vanished client is counted
        self.sock = sock
        self.pollable: Any = self.sock

    def bind(self, url: str) -> str:
        if url.startswith("tcp://") and url.endswith((":0", ":*")):
            url = url.rsplit(":", 1)[0] + ":*"
        self.sock.bind(url)
        return str(self.sock.last_endpoint.decode())

    def connect(self, url: str) -> None:
        self.sock.connect(url)

    def recv_nowait(self) -> Message | None:
        try:
            frames = self.sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return None
        first = 1 if self.router else 0
        for i in range(first, len(frames)):
            if not frames[i]:
                return _new(Message, (tuple(frames[: i + 1]), tuple(frames[i + 1 :])))
        return _new(Message, (tuple(frames[:first]), tuple(frames[first:])))

    def send(self, msg: Message) -> None:
        try:
            self.sock.send_multipart(msg.hops + msg.body)
        except zmq.Again as exc:
            raise TransportError("no peer ready (send timeout)") from exc
        except zmq.ZMQError as exc:
            if exc.errno == zmq.EHOSTUNREACH:
                raise TransportError("client gone") from exc
            raise

    def close(self) -> None:
        self.sock.close()


class NngEnd:
    """nng raw rep0 (front) or raw req0 (back) through nng's C API: header = hops."""

    family = "sp"

    def __init__(self, kind: str, *, ttl: int = 8, max_message_size: int = 1 << 20,
                 send_timeout_ms: int = 1000) -> None:
        cls, opener = ((pynng.Rep0, lib.nng_rep0_open_raw) if kind == "REP"
                       else (pynng.Req0, lib.nng_req0_open_raw))
        self._pynng = cls(opener=opener, recv_max_size=max_message_size,
                          send_timeout=send_timeout_ms)
        self.sock = self._pynng.socket
        if kind == "REP":
            lib.nng_socket_set_int(self.sock, b"ttl-max", ttl)
        self.pollable = self._pynng.recv_fd
        self._msgp = ffi.new("nng_msg **")

    def bind(self, url: str) -> str:
        if url.startswith("tcp://") and url.endswith(":*"):
            url = url[:-1] + "0"
        listener = self._pynng.listen(url)
        return f"{url.partition('://')[0]}://{listener.local_address}" if url.startswith("tcp") else url

    def connect(self, url: str) -> None:
        self._pynng.dial(url, block=False)

    def recv_nowait(self) -> Message | None:
        msgp = self._msgp
        rv = lib.nng_recvmsg(self.sock, msgp, lib.NNG_FLAG_NONBLOCK)
        if rv:
            if rv == lib.NNG_EAGAIN:
                return None
            raise TransportError(ffi.string(lib.nng_strerror(rv)).decode())
        m = msgp[0]
        try:
            hlen = lib.nng_msg_header_len(m)
            header = ffi.buffer(lib.nng_msg_header(m), hlen)[:]
            body = ffi.buffer(lib.nng_msg_body(m), lib.nng_msg_len(m))[:]
        finally:
            lib.nng_msg_free(m)
        if hlen == 8:
            hops: tuple[bytes, ...] = (header[:4], header[4:])
        else:
            hops = tuple(header[i : i + 4] for i in range(0, hlen, 4))
        return _new(Message, (hops, (body,)))

    def send(self, msg: Message) -> None:
        if len(msg.body) != 1:
            raise TransportError("SP carries exactly one body frame")
        msgp = self._msgp
        header = b"".join(msg.hops)
        body = msg.body[0]
        if lib.nng_msg_alloc(msgp, 0):
            raise TransportError("nng_msg_alloc failed")
        m = msgp[0]
        if lib.nng_msg_header_append(m, header, len(header)) or lib.nng_msg_append(m, body, len(body)):
            lib.nng_msg_free(m)
            raise TransportError("nng message build failed")
        rv = lib.nng_sendmsg(self.sock, m, 0)  # blocks at most send_timeout
        if rv:
            lib.nng_msg_free(m)
            raise TransportError(ffi.string(lib.nng_strerror(rv)).decode())

    def close(self) -> None:
        self._pynng.close()


def make_end(backend: str, kind: str, *, ttl: int, max_message_size: int,
             context: Any = None) -> Any:
    """A library socket for the poller, or (``context`` given) for a ``ZmqProxy``: its own
    context, and sends that block (back-pressure, as zmq_proxy expects) instead of timing out."""
    if backend == "pyzmq":
        if context is not None:
            # zmq_proxy ends on its first failed send: with ROUTER_MANDATORY a reply to a
            # client that has gone (EHOSTUNREACH) would stop the bridge; libzmq drops it instead
            return ZmqEnd(kind, max_message_size=max_message_size, send_timeout_ms=-1,
                          context=context, mandatory=False)
        return ZmqEnd(kind, max_message_size=max_message_size)
    return NngEnd(kind, ttl=ttl, max_message_size=max_message_size)


def proxy_context() -> Any:
    """A context of its own for a ZmqProxy, so that terminating it ends only that proxy."""
    return zmq.Context()


def poll_loop(bridge: Bridge, front: Any, back: Any, stop: threading.Event,
              draining: threading.Event) -> None:
    """Forward both ways until ``stop``; after ``draining`` is set, only replies cross."""
    poller = zmq.Poller()
    poller.register(front.pollable, zmq.POLLIN)
    poller.register(back.pollable, zmq.POLLIN)
    request, reply, clock, drop = bridge._request, bridge._reply, time.monotonic, bridge._drop
    counters = METRICS.counters
    k_req = ("gateway_forwarded_total", (("bridge", bridge.name), ("direction", "request")))
    k_rep = ("gateway_forwarded_total", (("bridge", bridge.name), ("direction", "reply")))
    next_expiry = clock() + 1.0
    while not stop.is_set():
        ready = dict(poller.poll(100))
        now = clock()
        if front.pollable in ready and not draining.is_set():
            n = 0
            # each send may wait up to its timeout on a stalled backend: look at the flags
            while (n < BATCH and not draining.is_set() and not stop.is_set()
                   and (msg := front.recv_nowait()) is not None):
                n += 1
                bridge.in_flight += 1  # before the send: a SIGTERM meanwhile still drains it
                try:
                    back.send(request(msg, now))
                except EnvelopeError as exc:
                    bridge.in_flight -= 1
                    drop(exc.reason, "request", exc.detail)
                    continue
                except TransportError as exc:
                    bridge.in_flight -= 1
                    drop("backend-unavailable", "request", str(exc))
                    continue
                counters[k_req] += 1
        if back.pollable in ready:
            n = 0
            while n < BATCH and (msg := back.recv_nowait()) is not None:
                n += 1
                try:
                    front.send(reply(msg, now))
                except EnvelopeError as exc:
                    drop(exc.reason, "reply", exc.detail)
                    continue
                except TransportError as exc:
                    drop("client-gone", "reply", str(exc))
                    continue
                bridge.in_flight = max(0, bridge.in_flight - 1)
                counters[k_rep] += 1
        if now >= next_expiry:
            next_expiry = now + 1.0
            bridge._expire(now)


class ZmqProxy:
    """zmq→zmq with pyzmq on both sides: libzmq's own ``zmq_proxy_steerable`` in a thread.

    Same-family forwarding is untouched (DESIGN section 6: "like zmq_proxy"), so the C proxy
    is the fastest correct device; a control socket gives STATISTICS (frame counts, exported as
    metrics), and TERMINATE for the shutdown. ``in_flight`` is estimated from frames: requests
    in on the front minus replies out, which is exact for REQ/REP traffic.
    """

    def __init__(self, bridge: Bridge, front: ZmqEnd, back: ZmqEnd) -> None:
        self.ctx: Any = front.sock.context  # the proxy's own (see proxy_context)
        address = f"inproc://gateway-proxy-control-{id(self)}"
        self._control = self.ctx.socket(zmq.REP)  # used by the proxy thread only
        self._control.bind(address)
        self._client = self.ctx.socket(zmq.REQ)  # used by the caller's thread only
        self._client.rcvtimeo = self._client.sndtimeo = 1000
        self._client.linger = 0
        self._client.setsockopt(zmq.REQ_RELAXED, 1)  # a timed-out STATISTICS may be re-asked
        self._client.setsockopt(zmq.REQ_CORRELATE, 1)
        self._client.connect(address)
        self.bridge, self.front, self.back = bridge, front, back
        self._seen = [0, 0]

    def run(self) -> None:
        """Blocks (without the GIL) until TERMINATE, or until ``terminate`` ends the context
        while the proxy waits in a send to a stalled backend. The proxy thread owns the sockets
        and closes them."""
        try:
            zmq.proxy_steerable(self.front.sock, self.back.sock, None, self._control)
        except zmq.ContextTerminated:
            pass
        finally:
            for sock in (self._control, self.front.sock, self.back.sock):
                sock.close(0)

    def statistics(self) -> list[int] | None:
        """(front recv, front sent, back recv, back sent) in frames, and the metrics updated;
        ``None`` when the proxy is busy (blocked on a full backend) and did not answer."""
        try:
            self._client.send(b"STATISTICS")
            raw = self._client.recv_multipart()
        except zmq.Again:
            return None
        frames = [int.from_bytes(part, "little") for part in raw[0::2]]  # counts, not bytes
        name = self.bridge.name
        for i, direction in ((0, "request"), (1, "reply")):
            total = frames[0] if i == 0 else frames[1]
            METRICS.inc("gateway_forwarded_frames_total", total - self._seen[i],
                        direction=direction, bridge=name)
            self._seen[i] = total
        self.bridge.in_flight = max(0, frames[0] - frames[1])
        return frames

    def terminate(self) -> None:
        """TERMINATE; if the proxy cannot hear it (blocked in a send), end its context."""
        try:
            self._client.send(b"TERMINATE")
            self._client.recv()
        except zmq.Again:
            stalled = True
        else:
            stalled = False
        self._client.close(0)
        if stalled:
            METRICS.inc("gateway_proxy_forced_stop_total", bridge=self.bridge.name)
        self.ctx.term()  # returns once the proxy thread has closed its sockets
