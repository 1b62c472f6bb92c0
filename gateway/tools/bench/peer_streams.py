"""The bench peer's byte-stream clients (``zmq-stream``, ``sp-stream``): each wire's handshake
written by hand, then whole requests on a plain TCP socket, checked byte for byte against the
echo (:class:`StreamClient`).
"""

from __future__ import annotations

import selectors
import socket
import struct
import time
from typing import Any

from .peer_base import timed_echo
from .peer_servers import SP_REP0_HEADER


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
