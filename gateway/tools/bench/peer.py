"""One benchmark peer (server, proxy or client) in its own process.

Run by path (``python -P .../peer.py ROLE JSON``) so that library peers import only pyzmq or
pynng, never the ``gateway`` package (native roles import it). Protocol with the harness:

- one ``READY {json}`` line on stdout once bound/connected (``{"url": ...}`` for servers and
  proxies: a plain ``tcp://127.0.0.1:PORT`` address);
- clients then read one JSON command per stdin line and answer one ``RESULT {json}`` line;
- every peer exits when its stdin closes (the harness went away) or after ``lifetime`` seconds.

Commands: ``{"op": "lat", "n", "size", "timeout", "warmup"}`` -> ``{"samples_ns": [...],
"elapsed": s}``; ``{"op": "tput", "window", "n", "size", "timeout"}`` -> ``{"n", "elapsed",
"timed_out"}``; ``{"op": "flood", "n", "size", "duration"}`` -> ``{"sent", "elapsed"}``;
``{"op": "quit"}``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import selectors
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

DEFAULT_LIFETIME = 3600.0


def emit(tag: str, payload: dict[str, Any]) -> None:
    sys.stdout.write(f"{tag} {json.dumps(payload, separators=(',', ':'))}\n")
    sys.stdout.flush()


def watchdog(lifetime: float, watch_stdin: bool) -> None:
    """Exit when the harness closes our stdin, or after ``lifetime`` seconds in any case."""

    def on_eof() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        os._exit(0)

    def on_deadline() -> None:
        time.sleep(lifetime)
        os._exit(3)

    if watch_stdin:
        threading.Thread(target=on_eof, daemon=True).start()
    threading.Thread(target=on_deadline, daemon=True).start()


def die_with_parent() -> None:
    """Linux: SIGKILL this peer when the harness dies, even mid-measurement."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:
        os._exit(1)


def nng_port(sock: Any) -> int:
    return socket.ntohs(sock.listeners[0].local_address.port)


def zmq_port(sock: Any) -> int:
    import zmq

    return int(sock.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])


def bound_url(port: int) -> str:
    return f"tcp://127.0.0.1:{port}"


def _material(cfg: dict[str, Any]) -> Any:
    """The keys and certificates the harness made (``gateway.tools.harness.security``), by path."""
    from gateway.tools.harness.security import Material

    return Material(Path(cfg["root"]))


def _curve_client(sock: Any, cfg: dict[str, Any]) -> None:
    """A libzmq socket as a CURVE client of the route's server key (before it connects)."""
    from gateway.tools.harness.security import configure_libzmq

    configure_libzmq(sock, None, "CURVE", "client", False, _material(cfg))


def _tls_client(sock: Any, cfg: dict[str, Any]) -> None:
    """An nng socket as a TLS client trusting the route's CA (before it dials)."""
    sock.tls_config = _tls_config(cfg, "client")


def _tls_config(cfg: dict[str, Any], role: str) -> Any:
    from gateway.tools.harness.security import nng_tls_config

    return nng_tls_config(role, False, _material(cfg))


# --------------------------------------------------------------------------------------------
# servers and proxies: bind (or connect), say READY, serve until killed
# --------------------------------------------------------------------------------------------


def serve_echo(cfg: dict[str, Any], s: Any, dial: Callable[[str], Any],
               listen: Callable[[], int]) -> None:
    """The echo servers' common part: ``dial(cfg["connect"])`` when given, else ``listen()`` on
    a free local port (it returns the port); say READY with the url; echo until killed."""
    if cfg.get("connect"):
        dial(cfg["connect"])
        emit("READY", {"url": cfg["connect"]})
    else:
        emit("READY", {"url": bound_url(listen())})
    recv, send = s.recv, s.send
    while True:
        send(recv())


def serve_zmq_rep(cfg: dict[str, Any]) -> None:
    import zmq

    ctx: Any = zmq.Context.instance()
    s = ctx.socket(zmq.REP)
    s.linger = 0

    def listen() -> int:
        s.bind("tcp://127.0.0.1:*")
        return zmq_port(s)

    serve_echo(cfg, s, s.connect, listen)


def serve_nng_rep(cfg: dict[str, Any]) -> None:
    import pynng

    s = pynng.Rep0()

    def listen() -> int:
        s.listen("tcp://127.0.0.1:0")
        return nng_port(s)

    serve_echo(cfg, s, lambda url: s.dial(url, block=False), listen)


def serve_nng_blackhole(cfg: dict[str, Any]) -> None:
    """An nng server that reads requests and never answers (raw Rep0: keeps no state)."""
    import pynng

    s = pynng.Rep0(opener=pynng.lib.nng_rep0_open_raw)
    s.listen("tcp://127.0.0.1:0")
    emit("READY", {"url": bound_url(nng_port(s))})
    n = 0
    while True:
        s.recv()
        n += 1


def serve_native_rep(cfg: dict[str, Any]) -> None:

    import gateway

    async def main() -> None:
        async with gateway.Socket("REP") as s:
            url = s.bind(f"{cfg['wire']}+tcp://127.0.0.1:0")
            emit("READY", {"url": url})
            recv, send = s.recv, s.send
            while True:
                await send(await recv())

    from gateway.engine.loop import run

    run(main())


#: every echo server's queue bound (messages per peer): above any window the bench uses
ECHO_HWM = 100_000


def serve_zmq_echo(cfg: dict[str, Any]) -> None:
    """A libzmq echo that runs in C: ``zmq_proxy(ROUTER, ROUTER)`` with one socket on both sides
    sends every request (routing id, empty delimiter, body) back to the peer it came from, which
    is a REP's reply. No Python per message, so it out-runs a REP and the gateway."""
    import zmq

    ctx: Any = zmq.Context.instance()
    s = ctx.socket(zmq.ROUTER)
    s.linger = 0
    s.sndhwm = s.rcvhwm = ECHO_HWM
    s.bind("tcp://127.0.0.1:*")
    emit("READY", {"url": bound_url(zmq_port(s))})
    zmq.proxy(s, s)


SP_REP0_HEADER = b"\x00SP\x00\x00\x31\x00\x00"  # sp-tcp-mapping: magic, protocol rep0 (49), 0
SP_REQ0 = 0x30  # the only peer a rep0 accepts: req0 (48)


def serve_sp_echo(cfg: dict[str, Any]) -> None:
    """An SP rep0 echo that works on the byte stream: after the 8-byte SP header exchange, every
    byte a peer sends goes straight back to it. A REP's reply is the request's header words (the
    backtrace) followed by the body, i.e. the request frame itself, so echoing the stream answers
    every request correctly and in order, in as many frames per write as the kernel delivered.
    Replaces the pynng Rep0 (capped near 25k req/s by Python per message) as the bench's SP
    server."""
    import asyncio

    class Echo(asyncio.Protocol):
        def __init__(self) -> None:
            self.head = b""
            self.transport: Any = None

        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            transport.write(SP_REP0_HEADER)

        def data_received(self, data: bytes) -> None:
            if len(self.head) < 8:
                need = 8 - len(self.head)
                self.head += data[:need]
                data = data[need:]
                if len(self.head) == 8 and (self.head[:4] != b"\x00SP\x00"
                                            or int.from_bytes(self.head[4:6]) != SP_REQ0):
                    sys.stderr.write(f"sp-echo: refused header {self.head!r}\n")
                    self.transport.close()
                    return
            if data:
                self.transport.write(data)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Echo, "127.0.0.1", 0, backlog=4096)
        port = server.sockets[0].getsockname()[1]
        emit("READY", {"url": bound_url(port)})
        await asyncio.Event().wait()

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


def serve_zmq_proxy(cfg: dict[str, Any]) -> None:
    """zmq.proxy(ROUTER, DEALER): clients connect to the ROUTER, the DEALER dials the server."""
    import zmq

    ctx: Any = zmq.Context.instance()
    front = ctx.socket(zmq.ROUTER)
    back = ctx.socket(zmq.DEALER)
    front.linger = back.linger = 0
    for s in (front, back):  # a ROUTER drops replies past its HWM: above any bench window
        s.sndhwm = s.rcvhwm = ECHO_HWM
    if cfg.get("security") == "curve":  # libzmq's own CURVE server on the front (no ZAP)
        import zmq.auth

        front.curve_publickey, front.curve_secretkey = zmq.auth.load_certificate(
            str(_material(cfg).curve_secret("server")))
        front.curve_server = True
    front.bind("tcp://127.0.0.1:*")
    back.connect(cfg["server"])
    emit("READY", {"url": bound_url(zmq_port(front))})
    zmq.proxy(front, back)


def serve_nng_device(cfg: dict[str, Any]) -> None:
    """nng_device(raw Rep0, raw Req0) in a thread: clients connect to the raw Rep0."""
    import pynng

    front = pynng.Rep0(opener=pynng.lib.nng_rep0_open_raw)
    back = pynng.Req0(opener=pynng.lib.nng_req0_open_raw)
    # nng's largest queues; even so nng_device's raw rep0 drops replies to a client whose pipe
    # queue is full (measured: about 1 in 6 at 1,024 in flight against the echo), which the
    # bench reports as an error of that window
    for s in (front, back):
        s.send_buffer_size = s.recv_buffer_size = 8192
    if cfg.get("security") == "tls":
        front.tls_config = _tls_config(cfg, "server")
        front.listen("tls+tcp://127.0.0.1:0")
    else:
        front.listen("tcp://127.0.0.1:0")
    back.dial(cfg["server"], block=False)
    run_nng_device(front, back)


def run_nng_device(front: Any, back: Any) -> None:
    """``nng_device(front, back)`` in a thread (it blocks in C with the GIL released until a
    socket closes); READY with the front's URL; exit 1 when the device returns."""
    import pynng

    result: list[int] = []

    def device() -> None:
        result.append(pynng.lib.nng_device(front.socket, back.socket))

    t = threading.Thread(target=device, daemon=True)
    t.start()
    emit("READY", {"url": bound_url(nng_port(front))})
    t.join()
    sys.stderr.write(f"nng_device returned {result}\n")
    sys.exit(1)


# --------------------------------------------------------------------------------------------
# clients: persistent connections, driven by commands on stdin
# --------------------------------------------------------------------------------------------



def timed_echo(send: Any, recv: Any, payload: bytes, n: int, warmup: int,
               timeout: float) -> dict[str, Any]:
    """``n`` timed round trips of ``payload`` after ``warmup`` untimed ones (one client)."""
    deadline = time.monotonic() + timeout
    clock = time.perf_counter_ns
    for _ in range(warmup):
        send(payload)
        recv()
    samples = [0] * n
    t0 = time.perf_counter()
    reply = payload
    for i in range(n):
        a = clock()
        send(payload)
        reply = recv()
        samples[i] = clock() - a
        if i & 255 == 0 and time.monotonic() > deadline:
            raise TimeoutError(f"latency slice over {timeout}s after {i} requests")
    if reply != payload:
        raise ValueError(f"bad echo: {reply[:20]!r}")
    return {"samples_ns": samples, "elapsed": time.perf_counter() - t0}


def windowed_tput(send: Callable[[], Any], recv: Callable[[], Any],
                  timeout_error: type[BaseException], window: int, n: int,
                  timeout: float) -> dict[str, Any]:
    """``n`` round trips with ``window`` requests in flight (one client): ``send()`` one
    request, ``recv()`` one reply; stops early at a receive timeout (``timeout_error``) or once
    past ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    t0 = time.perf_counter()
    sent = 0
    for _ in range(min(window, n)):
        send()
        sent += 1
    got = 0
    timed_out = False
    while got < n:
        try:
            recv()
        except timeout_error:
            timed_out = True
            break
        got += 1
        if sent < n:
            send()
            sent += 1
        if got & 1023 == 0 and time.monotonic() > deadline:
            timed_out = True
            break
    return {"n": got, "elapsed": time.perf_counter() - t0, "timed_out": timed_out}


class ZmqClient:
    """REQ for latency, DEALER (empty delimiter + body) with a window for throughput."""

    def __init__(self, url: str) -> None:
        import zmq

        self.zmq = zmq
        self.ctx: Any = zmq.Context.instance()
        self.url = url
        self.secure: Any = None  # CURVE on every socket (set before the first request)
        self.req: Any = None
        self.dealer: Any = None

    def secure_existing(self) -> None:
        pass  # sockets are made on first use, after ``secure`` is set

    def _socket(self, kind: int) -> Any:
        s = self.ctx.socket(kind)
        s.linger = 0
        if self.secure is not None:
            self.secure(s)
        s.connect(self.url)
        return s

    def lat(self, n: int, size: int, timeout: float, warmup: int) -> dict[str, Any]:
        if self.req is None:
            self.req = self._socket(self.zmq.REQ)
        s = self.req
        s.rcvtimeo = int(timeout * 1000)
        payload = b"x" * size
        send, recv = s.send, s.recv
        return timed_echo(send, recv, payload, n, warmup, timeout)

    def tput(self, window: int, n: int, size: int, timeout: float) -> dict[str, Any]:
        if self.dealer is None:
            self.dealer = self._socket(self.zmq.DEALER)
            time.sleep(0.05)
        d = self.dealer
        d.rcvtimeo = int(timeout * 1000)
        d.sndtimeo = int(timeout * 1000)
        frames = [b"", b"x" * size]
        return windowed_tput(functools.partial(d.send_multipart, frames), d.recv_multipart,
                             self.zmq.Again, window, n, timeout)

    def flood(self, n: int, size: int, duration: float) -> dict[str, Any]:
        """Send without reading replies, as fast as the socket accepts, within ``duration``."""
        if self.dealer is None:
            self.dealer = self._socket(self.zmq.DEALER)
            time.sleep(0.1)
        d = self.dealer
        frames = [b"", b"x" * size]
        again = self.zmq.Again
        t0 = time.monotonic()
        deadline = t0 + duration
        sent = 0
        while sent < n and time.monotonic() < deadline:
            try:
                d.send_multipart(frames, flags=self.zmq.NOBLOCK)
                sent += 1
            except again:
                time.sleep(0.001)
        return {"sent": sent, "elapsed": time.monotonic() - t0}


class NngClient:
    """Cooked Req0 for latency; raw Req0 (request id written by hand) for throughput."""

    def __init__(self, url: str) -> None:
        import pynng

        self.pynng = pynng
        self.url = url
        self.secure: Any = None  # TLS on every socket
        self.req = pynng.Req0()
        self.raw: Any = None
        self._dialed = False

    def secure_existing(self) -> None:
        if self.secure is not None:
            self.secure(self.req)
        self._dial()

    def _dial(self) -> None:
        if not self._dialed:
            self._dialed = True
            self.req.dial(self.url, block=False)
        self.rid = 0x80000000 | (os.getpid() & 0xFFFF) << 8

    def lat(self, n: int, size: int, timeout: float, warmup: int) -> dict[str, Any]:
        self._dial()
        s = self.req
        s.recv_timeout = int(timeout * 1000)
        s.send_timeout = int(timeout * 1000)
        payload = b"x" * size
        send, recv = s.send, s.recv
        return timed_echo(send, recv, payload, n, warmup, timeout)

    def tput(self, window: int, n: int, size: int, timeout: float) -> dict[str, Any]:
        pynng = self.pynng
        if self.raw is None:
            self.raw = pynng.Req0(opener=pynng.lib.nng_req0_open_raw)
            if self.secure is not None:
                self.secure(self.raw)
            self.raw.dial(self.url, block=False)
            time.sleep(0.05)
        s = self.raw
        s.recv_timeout = int(timeout * 1000)
        s.send_timeout = int(timeout * 1000)
        payload = b"x" * size
        pack = struct.Struct(">I").pack
        send = s.send
        rid = self.rid

        def send_one() -> None:
            nonlocal rid
            rid = 0x80000000 | ((rid + 1) & 0x7FFFFFFF)
            send(pack(rid) + payload)  # raw Req0: header words go first on the wire

        result = windowed_tput(send_one, s.recv, pynng.Timeout, window, n, timeout)
        self.rid = rid
        return result


class StreamClient:
    """A load generator on the byte stream, cheap enough never to be a route's bottleneck (the
    library clients are: pynng's raw Req0 tops out near 12k req/s on one core, a pyzmq DEALER
    near 60k). After the wire's handshake (written by hand, as ``serve_sp_echo`` does), every
    request goes out whole, ``window`` of them per write at the start and then as many per
    write as replies came back by the read before: the batching a libzmq peer does, with a
    few microseconds of Python per request. A reply must be the very bytes of its request
    (an echo behind any number of middles, in order): the client checks every byte it reads
    against what it sent, and stops at the first difference."""

    greeting = b""  # what this end writes first
    peer_greeting = 0  # bytes of the peer's handshake, read and checked by ``_check_peer``

    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("tcp://").rpartition(":")
        self.address = (host, int(port))
        self.sock: socket.socket | None = None
        self.seq = 0

    def connect(self, timeout: float) -> socket.socket:
        if self.sock is None:
            s = socket.create_connection(self.address, timeout=timeout)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(self.greeting)
            self._check_peer(self._read_exactly(s, self.peer_greeting), s)
            self.sock = s
        self.sock.settimeout(timeout)
        return self.sock

    @staticmethod
    def _read_exactly(s: socket.socket, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the peer closed during the handshake")
            buf += chunk
        return bytes(buf)

    def _check_peer(self, data: bytes, s: socket.socket) -> None:
        raise NotImplementedError

    def request(self, payload: bytes) -> bytes:
        """One request's bytes on the wire."""
        raise NotImplementedError

    def lat(self, n: int, size: int, timeout: float, warmup: int) -> dict[str, Any]:
        s = self.connect(timeout)
        payload = b"x" * size
        last = [b""]  # the request in flight

        def send(_: bytes) -> None:
            last[0] = req = self.request(payload)
            s.sendall(req)

        def recv() -> bytes:
            want = last[0]
            got = self._read_exactly(s, len(want))
            if got != want:
                raise ValueError(f"bad echo: {got[:24]!r} for {want[:24]!r}")
            return payload

        return timed_echo(send, recv, payload, n, warmup, timeout)

    def tput(self, window: int, n: int, size: int, timeout: float) -> dict[str, Any]:
        s = self.connect(timeout)
        s.setblocking(False)
        sel = selectors.DefaultSelector()
        sel.register(s, selectors.EVENT_READ)
        out = _Outbox(sel, s, None)
        payload = b"x" * size
        request = self.request
        deadline = time.monotonic() + timeout
        t0 = time.perf_counter()
        pending = bytearray()  # sent, not echoed yet: what the next reads must be
        first = b"".join(request(payload) for _ in range(min(window, n)))
        sent, got, timed_out = min(window, n), 0, False
        one = len(first) // sent  # every request of a run has the same size
        pending += first
        rx = 0  # bytes of the reply being read
        try:
            out.write(first)
            while got < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                for _, mask in sel.select(left):
                    if mask & selectors.EVENT_WRITE:
                        out.flush()
                    if not mask & selectors.EVENT_READ:
                        continue
                    try:
                        chunk = s.recv(1 << 18)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        raise ConnectionError(f"the peer closed after {got} replies")
                    k = len(chunk)
                    if pending[:k] != chunk:
                        raise ValueError(f"bad echo after {got} replies: {chunk[:24]!r}")
                    del pending[:k]
                    rx += k
                    done, rx = divmod(rx, one)
                    got += done
                    more = min(done, n - sent)
                    if more:
                        new = b"".join(request(payload) for _ in range(more))
                        pending += new
                        out.write(new)
                        sent += more
        finally:
            sel.close()
            s.settimeout(timeout)  # (blocking again, for lat)
        return {"n": got, "elapsed": time.perf_counter() - t0, "timed_out": timed_out}


class _Outbox:
    """Bytes for one non-blocking socket, written as it takes them. While some wait, the
    selector watches the socket for writing as well: the client never stops reading while it
    writes (as libzmq's I/O thread never does), or a middle whose replies back up behind a
    big write would drop them at its high-water mark."""

    def __init__(self, sel: Any, sock: socket.socket, data: Any) -> None:
        self.sel, self.sock, self.data = sel, sock, data  # (data: the selector key's)
        self.buf = bytearray()
        self.watching = False

    def write(self, data: bytes) -> None:
        self.buf += data
        self.flush()

    def flush(self) -> None:
        if self.buf:
            try:
                done = self.sock.send(self.buf)
            except BlockingIOError:
                done = 0
            del self.buf[:done]
        want = bool(self.buf)
        if want != self.watching:
            self.watching = want
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0)
            self.sel.modify(self.sock, events, self.data)


class ZmtpStreamClient(StreamClient):
    """ZMTP 3.0, NULL, as a DEALER: each request is an empty delimiter and the body."""

    greeting = (b"\xff" + bytes(8) + b"\x7f\x03\x00" + b"NULL".ljust(20, b"\x00") + bytes(32)
                + b"\x04\x1c\x05READY\x0bSocket-Type\x00\x00\x00\x06DEALER")
    peer_greeting = 64

    def _check_peer(self, data: bytes, s: socket.socket) -> None:
        if data[0] != 0xFF or data[10] != 3 or data[12:16] != b"NULL":
            raise ConnectionError(f"not a ZMTP 3 NULL peer: {data[:16]!r}")
        head = self._read_exactly(s, 2)  # its READY command: short or long
        if head[0] not in (0x04, 0x06):
            raise ConnectionError(f"expected the peer's READY, got flags {head[0]:#x}")
        size = (head[1] if head[0] == 0x04
                else int.from_bytes(head[1:] + self._read_exactly(s, 7)))
        if not self._read_exactly(s, size).startswith(b"\x05READY"):
            raise ConnectionError("expected the peer's READY command")

    def request(self, payload: bytes) -> bytes:
        size = len(payload)
        head = bytes((0, size)) if size < 256 else b"\x02" + size.to_bytes(8)
        return b"\x01\x00" + head + payload


class SpStreamClient(StreamClient):
    """SP req0 over TCP, raw: each request is its 4-byte request id and the body."""

    greeting = b"\x00SP\x00\x00\x30\x00\x00"
    peer_greeting = 8

    def _check_peer(self, data: bytes, s: socket.socket) -> None:
        if data != SP_REP0_HEADER:
            raise ConnectionError(f"not an SP rep0 peer: {data!r}")

    def request(self, payload: bytes) -> bytes:
        self.seq = seq = (self.seq + 1) & 0x7FFFFFFF
        return struct.pack(">QI", 4 + len(payload), 0x80000000 | seq) + payload


class NativeClient:
    """The native engine: one REQ for latency, ``window`` REQ sockets in one loop for throughput."""

    def __init__(self, url: str) -> None:
        import asyncio

        import gateway

        self.asyncio = asyncio
        self.gateway = gateway
        self.url = url
        from gateway.engine.loop import new_event_loop

        self.loop = new_event_loop()  # uvloop when installed, as the CLI runs
        self.req = self.loop.run_until_complete(self._open())
        self.pool: list[Any] = []

    async def _open(self) -> Any:
        s = self.gateway.Socket("REQ")
        s.connect(self.url)
        return s

    def lat(self, n: int, size: int, timeout: float, warmup: int) -> dict[str, Any]:
        asyncio = self.asyncio
        s = self.req
        payload = b"x" * size
        clock = time.perf_counter_ns

        async def go() -> dict[str, Any]:
            send, recv = s.send, s.recv
            async with asyncio.timeout(timeout):
                for _ in range(warmup):
                    await send(payload)
                    await recv()
                samples = [0] * n
                t0 = time.perf_counter()
                reply = payload
                for i in range(n):
                    a = clock()
                    await send(payload)
                    reply = await recv()
                    samples[i] = clock() - a
            if reply != payload:
                raise ValueError(f"bad echo: {reply[:20]!r}")
            return {"samples_ns": samples, "elapsed": time.perf_counter() - t0}

        return self.loop.run_until_complete(go())

    def tput(self, window: int, n: int, size: int, timeout: float) -> dict[str, Any]:
        asyncio = self.asyncio
        payload = b"x" * size

        async def go() -> dict[str, Any]:
            while len(self.pool) < window:
                self.pool.append(await self._open())
            await asyncio.gather(*(p.wait_peers(1, timeout) for p in self.pool[:window]))
            left = [n]
            got = [0]

            async def worker(s: Any) -> None:
                while left[0] > 0:
                    left[0] -= 1
                    await s.send(payload)
                    await s.recv()
                    got[0] += 1

            t0 = time.perf_counter()
            timed_out = False
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*(worker(s) for s in self.pool[:window]))
            except TimeoutError:
                timed_out = True
            return {"n": got[0], "elapsed": time.perf_counter() - t0, "timed_out": timed_out}

        return self.loop.run_until_complete(go())


def run_client(cfg: dict[str, Any]) -> None:
    kind = cfg["client"]
    client: Any = {"zmq": ZmqClient, "nng": NngClient, "native": NativeClient,
                   "zmq-stream": ZmtpStreamClient, "sp-stream": SpStreamClient}[kind](cfg["url"])
    if cfg.get("security"):  # every socket it opens from now on is secured
        client.secure = functools.partial(
            _curve_client if cfg["security"] == "curve" else _tls_client, cfg=cfg)
    getattr(client, "secure_existing", lambda: None)()
    emit("READY", {"url": cfg["url"]})
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        op = cmd.pop("op")
        if op == "quit":
            break
        try:
            emit("RESULT", getattr(client, op)(**cmd))
        except Exception as exc:  # noqa: BLE001 - reported to the harness, which marks the route
            emit("RESULT", {"error": f"{type(exc).__name__}: {exc}"})
            sys.stdout.flush()
    os._exit(0)  # no linger, no context teardown waits


def run_idle_clients(cfg: dict[str, Any]) -> None:
    """``n`` zmq DEALER sockets connect to ``url``; each makes one round trip, then all idle."""
    import resource

    import zmq

    n = int(cfg["n"])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * n + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    ctx: Any = zmq.Context()
    ctx.set(zmq.MAX_SOCKETS, n + 64)
    socks = []
    for _ in range(n):
        s = ctx.socket(zmq.DEALER)
        s.linger = 0
        s.connect(cfg["url"])
        socks.append(s)
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)
    t0 = time.monotonic()
    deadline = t0 + float(cfg.get("timeout", 60))
    for s in socks:
        s.send_multipart([b"", b"hello"])
    pending = set(socks)
    while pending and time.monotonic() < deadline:
        for s, _ in poller.poll(200):
            while True:
                try:
                    s.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                pending.discard(s)
    emit("READY", {"connected": n - len(pending), "n": n, "elapsed": time.monotonic() - t0})
    for line in sys.stdin:
        if line.strip() and json.loads(line).get("op") == "quit":
            break
    os._exit(0)


def _raise_nofile(n: int) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * n + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))


def _sweep_result(samples: list[int], elapsed: float, timed_out: bool) -> dict[str, Any]:
    s = sorted(samples)

    def pct(q: int) -> float | None:
        if not s:
            return None
        return round(s[max(0, min(len(s) - 1, -(-len(s) * q // 100) - 1))] / 1e3, 1)

    return {"n": len(s), "elapsed": elapsed, "timed_out": timed_out, "p50_us": pct(50),
            "p90_us": pct(90), "p99_us": pct(99), "max_us": round(s[-1] / 1e3, 1) if s else None}


def sweep_zmq(url: str, clients: int, n: int, size: int, timeout: float) -> dict[str, Any]:
    """``clients`` DEALER sockets (one connection each), each with one request in flight; one
    untimed round trip each first (every connection handshaken), then ``n`` timed ones."""
    wall0 = time.perf_counter()  # "wall": the whole point, for CPU per second of the processes
    import zmq

    _raise_nofile(clients)
    ctx: Any = zmq.Context()
    ctx.set(zmq.MAX_SOCKETS, clients + 64)
    frames = [b"", b"x" * size]
    socks = []
    for _ in range(clients):
        s = ctx.socket(zmq.DEALER)
        s.linger = 0
        s.connect(url)
        socks.append(s)
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)
    deadline = time.monotonic() + timeout
    clock = time.perf_counter_ns
    sent_at: dict[Any, int] = {}
    for s in socks:  # warm-up: one round trip per client
        s.send_multipart(frames)
    waiting = set(socks)
    while waiting and time.monotonic() < deadline:
        for s, _ in poller.poll(200):
            s.recv_multipart()
            waiting.discard(s)
    if waiting:
        return {"error": f"{len(waiting)} of {clients} clients got no warm-up reply"}
    samples: list[int] = []
    left = n
    t0 = time.perf_counter()
    for s in socks[:n]:
        sent_at[s] = clock()
        s.send_multipart(frames)
        left -= 1
    timed_out = False
    while len(samples) < n:
        ready = poller.poll(200)
        now = clock()
        for s, _ in ready:
            s.recv_multipart()
            samples.append(now - sent_at[s])
            if left > 0:
                left -= 1
                sent_at[s] = clock()
                s.send_multipart(frames)
        if time.monotonic() > deadline:
            timed_out = True
            break
    out = _sweep_result(samples, time.perf_counter() - t0, timed_out)
    out["wall"] = time.perf_counter() - wall0
    for s in socks:
        s.close(0)
    return out


def sweep_native(url: str, clients: int, n: int, size: int, timeout: float) -> dict[str, Any]:
    """``clients`` native REQ sockets (one connection each) in one event loop, each with one
    request in flight (for SP fronts: the native engine speaks both wires)."""
    wall0 = time.perf_counter()  # "wall": the whole point, imports included
    import asyncio

    import gateway
    from gateway.engine.loop import new_event_loop

    _raise_nofile(clients)
    payload = b"x" * size
    clock = time.perf_counter_ns

    async def go() -> dict[str, Any]:
        socks = []
        for _ in range(clients):
            s = gateway.Socket("REQ")
            s.connect(url)
            socks.append(s)
        samples: list[int] = []
        left = [n]

        async def warm(s: Any) -> None:
            await s.send(payload)
            await s.recv()

        async def one(s: Any) -> None:
            while left[0] > 0:
                left[0] -= 1
                a = clock()
                await s.send(payload)
                await s.recv()
                samples.append(clock() - a)

        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(warm(s) for s in socks))
        except TimeoutError:
            return {"error": f"warm-up round trips of {clients} clients over {timeout:.0f}s"}
        t0 = time.perf_counter()
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(one(s) for s in socks))
        except TimeoutError:
            timed_out = True
        out = _sweep_result(samples, time.perf_counter() - t0, timed_out)
        out["wall"] = time.perf_counter() - wall0
        for s in socks:
            s.close()
        return out

    return new_event_loop().run_until_complete(go())


def sweep_stream(url: str, clients: int, n: int, size: int, timeout: float,
                 kind: str = "zmq-stream") -> dict[str, Any]:
    """``clients`` byte-stream connections (``StreamClient``: a handshake each, then requests
    written whole) on one ``selectors`` loop, each with one request in flight: the sweep with a
    client that costs a few microseconds a request, not a library's."""
    wall0 = time.perf_counter()
    _raise_nofile(clients)
    cls = ZmtpStreamClient if kind == "zmq-stream" else SpStreamClient
    payload = b"x" * size
    makers = [cls(url) for _ in range(clients)]  # a handshake each, and its request ids
    conns = [c.connect(timeout) for c in makers]
    for s in conns:
        s.setblocking(False)
    sel = selectors.DefaultSelector()
    want: list[bytes] = [b""] * clients  # the reply each connection waits for: its request
    got: list[bytes] = [b""] * clients
    sent_at = [0] * clients
    for i, s in enumerate(conns):
        sel.register(s, selectors.EVENT_READ, i)
    clock = time.perf_counter_ns
    deadline = time.monotonic() + timeout
    samples: list[int] = []
    outs = [_Outbox(sel, s, i) for i, s in enumerate(conns)]

    def send(i: int) -> None:
        want[i] = req = makers[i].request(payload)
        got[i] = b""
        sent_at[i] = clock()
        outs[i].write(req)  # what the socket does not take now goes when it is writable

    def rounds(total: int, record: bool) -> int:
        left = total - min(total, clients)
        for i in range(min(total, clients)):
            send(i)
        busy = min(total, clients)
        while busy and time.monotonic() < deadline:
            for key, mask in sel.select(0.2):
                i = key.data
                if mask & selectors.EVENT_WRITE:
                    outs[i].flush()
                if not mask & selectors.EVENT_READ:
                    continue
                try:
                    chunk = conns[i].recv(1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    raise ConnectionError(f"connection {i} closed by the peer")
                have = got[i] = got[i] + chunk
                if len(have) < len(want[i]):
                    continue
                if have != want[i]:
                    raise ValueError(f"bad echo on connection {i}: {have[:24]!r}")
                if record:
                    samples.append(clock() - sent_at[i])
                if left > 0:
                    left -= 1
                    send(i)
                else:
                    busy -= 1
        return busy

    try:
        if rounds(clients, False):  # warm-up: one round trip per connection
            return {"error": f"{clients} clients: no warm-up reply within {timeout:.0f}s"}
        t0 = time.perf_counter()
        timed_out = bool(rounds(n, True))
        out = _sweep_result(samples, time.perf_counter() - t0, timed_out)
        out["wall"] = time.perf_counter() - wall0
        return out
    finally:
        sel.close()
        for s in conns:
            s.close()


def run_sweep_client(cfg: dict[str, Any]) -> None:
    """One point of the clients sweep: READY, then one ``{"op": "sweep", ...}`` command."""
    emit("READY", {"url": cfg["url"]})
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        if cmd.pop("op") != "sweep":
            break
        kind = cfg["client"]
        if kind in ("zmq-stream", "sp-stream"):
            cmd["kind"] = kind
            fn: Callable[..., dict[str, Any]] = sweep_stream
        else:
            fn = sweep_zmq if kind == "zmq" else sweep_native
        try:
            emit("RESULT", fn(cfg["url"], **cmd))
        except Exception as exc:  # noqa: BLE001 - reported to the harness
            emit("RESULT", {"error": f"{type(exc).__name__}: {exc}"})
    os._exit(0)


# --------------------------------------------------------------------------------------------
# pub/sub fan-out and pipeline (gateway.tools.bench.patterns)
# --------------------------------------------------------------------------------------------

END = b"END"


def commands(op: str) -> Iterator[dict[str, Any]]:
    """The harness's commands on stdin (one JSON object per line) while they say ``op``."""
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        if cmd.get("op") != op:
            return
        yield cmd


def _plain_socket(wire: str, kind: str, hwm: int = 1000) -> Any:
    """A cooked library socket of ``kind`` (PUB SUB PUSH PULL) on ``wire`` (zmq, sp), queues
    of ``hwm`` messages (nng: at most 8192)."""
    if wire == "zmq":
        import zmq

        ctx: Any = zmq.Context.instance()
        s = ctx.socket(getattr(zmq, kind))
        s.linger = 0
        s.sndhwm = s.rcvhwm = hwm
        return s
    import pynng

    buf = min(hwm, 8192)
    if kind in ("PUB", "PUSH"):
        return {"PUB": pynng.Pub0, "PUSH": pynng.Push0}[kind](send_buffer_size=buf)
    return {"SUB": pynng.Sub0, "PULL": pynng.Pull0}[kind](recv_buffer_size=buf)


def _bind_any(wire: str, s: Any) -> str:
    if wire == "zmq":
        s.bind("tcp://127.0.0.1:*")
        return bound_url(zmq_port(s))
    s.listen("tcp://127.0.0.1:0")
    return bound_url(nng_port(s))


def _dial(wire: str, s: Any, url: str) -> None:
    if wire == "zmq":
        s.connect(url)
    else:
        s.dial(url, block=False)


def serve_pattern_pub(cfg: dict[str, Any]) -> None:
    """A publisher (binds). ``{"op": "go", "n", "size", "warm"}``: ``warm`` seconds of ``w.``
    messages (subscriptions settle), ``n`` ``d.`` messages as fast as it can, then ``END``
    markers for a second. RESULT ``{"sent", "elapsed"}``."""
    wire = cfg["wire"]
    s = _plain_socket(wire, "PUB", int(cfg.get("hwm", 1000)))
    emit("READY", {"url": _bind_any(wire, s)})
    for cmd in commands("go"):
        end = time.monotonic() + float(cmd.get("warm", 1.0))
        while time.monotonic() < end:
            s.send(b"w.")
            time.sleep(0.002)
        body = b"d." + b"x" * max(0, int(cmd["size"]) - 2)
        send = s.send
        t0 = time.perf_counter()
        for _ in range(int(cmd["n"])):
            send(body)
        elapsed = time.perf_counter() - t0
        for _ in range(100):
            send(END)
            time.sleep(0.01)
        emit("RESULT", {"sent": int(cmd["n"]), "elapsed": elapsed})
    os._exit(0)


def run_pattern_subs(cfg: dict[str, Any]) -> None:
    """``count`` subscribers of ``d.`` and ``END`` on ``url``. ``{"op": "collect", "timeout"}``:
    count ``d.`` messages per socket until each saw END (or the timeout). RESULT ``{"received",
    "per_socket", "elapsed"}`` (first to last ``d.`` message over all sockets)."""
    import select as _select

    wire, n = cfg["wire"], int(cfg["count"])
    socks = [_plain_socket(wire, "SUB", int(cfg.get("hwm", 1000))) for _ in range(n)]
    for s in socks:
        s.subscribe(b"d.")
        s.subscribe(END)
        _dial(wire, s, cfg["url"])
    emit("READY", {"count": n})
    for cmd in commands("collect"):
        counts = [0] * n
        done = [False] * n
        first = last = 0.0
        deadline = time.monotonic() + float(cmd["timeout"])

        def note(i: int, m: bytes, counts: list[int] = counts, done: list[bool] = done) -> None:
            nonlocal first, last
            if m[:2] == b"d.":
                now = time.perf_counter()
                first = first or now
                last = now
                counts[i] += 1
            elif m == END:
                done[i] = True

        if wire == "zmq":
            import zmq

            poller = zmq.Poller()
            for s in socks:
                poller.register(s, zmq.POLLIN)
            index = {s: i for i, s in enumerate(socks)}
            while not all(done) and time.monotonic() < deadline:
                for s, _ in poller.poll(100):
                    with contextlib.suppress(zmq.Again):
                        while True:
                            note(index[s], s.recv(zmq.NOBLOCK))
        else:
            import pynng

            poll = _select.poll()
            by_fd = {}
            for i, s in enumerate(socks):
                by_fd[s.recv_fd] = i
                poll.register(s.recv_fd, _select.POLLIN)
            while not all(done) and time.monotonic() < deadline:
                for fd, _ in poll.poll(100):
                    with contextlib.suppress(pynng.TryAgain):
                        while True:
                            note(by_fd[fd], socks[by_fd[fd]].recv(block=False))
        emit("RESULT", {"received": sum(counts), "per_socket": counts,
                        "elapsed": max(last - first, 1e-9), "complete": all(done)})
    os._exit(0)


def serve_pattern_pull(cfg: dict[str, Any]) -> None:
    """A PULL server (binds). ``{"op": "collect", "n", "timeout"}``: RESULT ``{"received",
    "elapsed"}`` from its first message to its ``n``-th."""
    wire = cfg["wire"]
    s = _plain_socket(wire, "PULL", int(cfg.get("hwm", 1000)))
    emit("READY", {"url": _bind_any(wire, s)})
    for cmd in commands("collect"):
        n, got, t0 = int(cmd["n"]), 0, 0.0
        deadline = time.monotonic() + float(cmd["timeout"])
        if wire == "zmq":
            s.rcvtimeo = 200
            import zmq

            timeout_exc: Any = zmq.Again
        else:
            import pynng

            s.recv_timeout = 200
            timeout_exc = pynng.Timeout
        while got < n and time.monotonic() < deadline:
            try:
                s.recv()
            except timeout_exc:
                continue
            if not got:
                t0 = time.perf_counter()
            got += 1
        emit("RESULT", {"received": got, "elapsed": max(time.perf_counter() - t0, 1e-9)})
    os._exit(0)


def run_pattern_push(cfg: dict[str, Any]) -> None:
    """A PUSH client. ``{"op": "go", "n", "size"}``: ``n`` blocking sends. RESULT ``{"sent",
    "elapsed"}``."""
    wire = cfg["wire"]
    s = _plain_socket(wire, "PUSH", int(cfg.get("hwm", 1000)))
    _dial(wire, s, cfg["url"])
    emit("READY", {"url": cfg["url"]})
    for cmd in commands("go"):
        body = b"x" * int(cmd["size"])
        t0 = time.perf_counter()
        for _ in range(int(cmd["n"])):
            s.send(body)
        emit("RESULT", {"sent": int(cmd["n"]), "elapsed": time.perf_counter() - t0})
    os._exit(0)


def serve_pattern_proxy(cfg: dict[str, Any]) -> None:
    """libzmq's ``zmq.proxy``: XSUB (dials the publisher) -> XPUB (subscribers connect), or
    PULL (pushers connect) -> PUSH (dials the puller)."""
    import zmq

    ctx: Any = zmq.Context.instance()
    pubsub = cfg["pattern"] == "pubsub"
    front = ctx.socket(zmq.XPUB if pubsub else zmq.PULL)
    back = ctx.socket(zmq.XSUB if pubsub else zmq.PUSH)
    front.linger = back.linger = 0
    hwm = int(cfg.get("hwm", 1000))
    for sock in (front, back):
        sock.sndhwm = sock.rcvhwm = hwm
    front.bind("tcp://127.0.0.1:*")
    back.connect(cfg["upstream"])
    emit("READY", {"url": bound_url(zmq_port(front))})
    if pubsub:
        zmq.proxy(back, front)
    else:
        zmq.proxy(front, back)


def serve_pattern_device(cfg: dict[str, Any]) -> None:
    """nng_device between raw sockets: raw sub0 (dials the publisher) -> raw pub0, or raw
    pull0 (pushers dial it) -> raw push0 (dials the puller). Raw sub0 takes everything."""
    import pynng

    lib = pynng.lib
    if cfg["pattern"] == "pubsub":
        front = pynng.Pub0(opener=lib.nng_pub0_open_raw)
        back = pynng.Sub0(opener=lib.nng_sub0_open_raw)
    else:
        front = pynng.Pull0(opener=lib.nng_pull0_open_raw)
        back = pynng.Push0(opener=lib.nng_push0_open_raw)
    buf = min(int(cfg.get("hwm", 1000)), 8192)
    for sock in (front, back):
        for option in ("send_buffer_size", "recv_buffer_size"):
            try:
                setattr(sock, option, buf)
            except Exception:  # noqa: BLE001 - the protocol has no such buffer
                pass
    front.listen("tcp://127.0.0.1:0")
    back.dial(cfg["upstream"], block=False)
    run_nng_device(front, back)


ROLES = {
    "zmq-rep": serve_zmq_rep,
    "nng-rep": serve_nng_rep,
    "zmq-echo": serve_zmq_echo,
    "sp-echo": serve_sp_echo,
    "native-rep": serve_native_rep,
    "nng-blackhole": serve_nng_blackhole,
    "zmq-proxy": serve_zmq_proxy,
    "nng-device": serve_nng_device,
    "client": run_client,
    "idle-clients": run_idle_clients,
    "sweep-client": run_sweep_client,
    "pattern-pub": serve_pattern_pub,
    "pattern-subs": run_pattern_subs,
    "pattern-pull": serve_pattern_pull,
    "pattern-push": run_pattern_push,
    "pattern-proxy": serve_pattern_proxy,
    "pattern-device": serve_pattern_device,
}


def main(argv: list[str]) -> None:
    role, cfg = argv[0], json.loads(argv[1]) if len(argv) > 1 else {}
    client = role in ("client", "idle-clients", "sweep-client", "pattern-pub", "pattern-subs",
                      "pattern-pull", "pattern-push")
    die_with_parent()
    # clients read stdin themselves: EOF ends their command loop
    watchdog(float(cfg.get("lifetime", DEFAULT_LIFETIME)), watch_stdin=not client)
    try:
        ROLES[role](cfg)
    except KeyboardInterrupt:
        os._exit(130)


if __name__ == "__main__":
    main(sys.argv[1:])
