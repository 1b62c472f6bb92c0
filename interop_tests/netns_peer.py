"""Peer processes of the multi-host tests, run inside a network namespace (``ip netns exec``):
real libzmq (pyzmq) and nng (pynng) sockets, controlled over stdin/stdout in JSON lines.

Servers (they bind)::

    python -m interop_tests.netns_peer server zmq tcp://10.231.0.3:6000 [--delay S] [--slow P]
    python -m interop_tests.netns_peer server sp  tcp://10.231.0.3:6000 [--delay S] [--slow P]

A libzmq ROUTER or a raw nng rep0 that answers every request ``body`` with
``re:<body>|<peer address>`` (the address of the connection the request came on: which
gateway carried it), after ``--delay`` seconds (only for bodies starting with ``--slow``, when
given) without blocking the others.

Clients (they connect, to every URL given; both libraries spread requests over them)::

    python -m interop_tests.netns_peer client zmq tcp://G1:5555,tcp://G2:5555 --rate 100 \
        --timeout 1 [--size 64] [--name c1] [--burst N] [--immediate] [--heartbeat MS]

A libzmq DEALER (delimiter + body, as a REQ) or a raw nng req0 (its own request ids), sending
request ``i`` (body ``<name>:<i>:`` padded to ``--size``) at ``--rate`` per second, any number in
flight. Each request ends as ``ok`` (answered within ``--timeout``), ``lost`` (not answered
within it) or ``late`` (answered after it: counted lost first, then moved). ``--burst N`` sends
N requests at once first.

Commands on stdin, one per line: ``stats`` (a JSON line: counts so far), ``pause``/``resume``
(sending), ``send N`` (N requests now), ``stop`` (stop sending, wait ``--timeout`` for the requests in flight and ``--settle``
seconds more for late replies, or less once every request is answered, print the final JSON line with every request's record, exit).
Times are ``time.monotonic()`` (one clock for every process of the machine, namespaces or not).
The first stdout line is ``READY <url>``. Every loop is bounded by ``--lifetime`` (default
300 s): a peer whose test died exits by itself.
"""

from __future__ import annotations

import argparse
import heapq
import json
import queue
import sys
import time
from collections.abc import Callable
from typing import Any

import pynng
import zmq
from gateway_plugins.pynng_adapter.message import to_message
from pynng import ffi, lib

from gateway.tools.harness.peers.nng import nng_raw_recv, nng_raw_send, open_raw
from gateway.tools.soak_peers import stdin_commands

TOP = 0x80000000


def _say(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# servers

class _Delayed:
    """Replies due later, in order of their due time."""

    def __init__(self, delay: float, slow: bytes) -> None:
        self.delay, self.slow = delay, slow
        self.heap: list[tuple[float, int, Any]] = []
        self.seq = 0

    def add(self, body: bytes, reply: Any) -> None:
        self.seq += 1
        delay = self.delay if body.startswith(self.slow) else 0.0
        heapq.heappush(self.heap, (time.monotonic() + delay, self.seq, reply))

    def due(self) -> list[Any]:
        out = []
        now = time.monotonic()
        while self.heap and self.heap[0][0] <= now:
            out.append(heapq.heappop(self.heap)[2])
        return out

    def wait(self, cap: float) -> float:
        """Seconds until the next reply is due (at most ``cap``)."""
        if not self.heap:
            return cap
        return max(0.0, min(cap, self.heap[0][0] - time.monotonic()))


def serve(url: str, pending: _Delayed, lifetime: float,
          receive: Callable[[float], list[tuple[bytes, Any, str]]],
          send: Callable[[Any], None]) -> None:
    """The server loop of both libraries: ``receive(wait)`` gives ``(body, reply, via)`` for
    each request that came within ``wait`` seconds; each reply is ``send`` when it is due."""
    _say_ready(url)
    commands = stdin_commands()
    received: dict[str, int] = {}
    replied = 0
    deadline = time.monotonic() + lifetime
    while time.monotonic() < deadline:
        for body, reply, via in receive(pending.wait(0.02)):
            received[via] = received.get(via, 0) + 1
            pending.add(body, reply)
        for reply in pending.due():
            send(reply)
            replied += 1
        if _server_command(commands, received, replied):
            return


def serve_zmq(url: str, pending: _Delayed, lifetime: float) -> None:
    """A libzmq ROUTER, no send limit (it would drop replies without a word)."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.linger = 0
    sock.sndhwm = sock.rcvhwm = 0
    sock.bind(url)

    def receive(wait: float) -> list[tuple[bytes, Any, str]]:
        out: list[tuple[bytes, Any, str]] = []
        if sock.poll(int(wait * 1000), zmq.POLLIN):
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                via, body = str(frames[-1].get("Peer-Address")), frames[-1].bytes
                reply = [*(f.bytes for f in frames[:-1]), b"re:" + body + b"|" + via.encode()]
                out.append((body, reply, via))
        return out

    try:
        serve(url, pending, lifetime, receive, sock.send_multipart)
    finally:
        sock.close(0)
        ctx.term()


def serve_sp(url: str, pending: _Delayed, lifetime: float) -> None:
    """A raw nng rep0 (its replies restore the backtrace by hand)."""
    sock = open_raw("REP", 20)
    sock.listen(url)

    def receive(wait: float) -> list[tuple[bytes, Any, str]]:
        sock.recv_timeout = max(1, int(wait * 1000))
        try:
            words, body, via = _nng_recv_via(sock)
        except pynng.Timeout:
            return []
        return [(body, (words, b"re:" + body + b"|" + via.encode()), via)]

    try:
        serve(url, pending, lifetime, receive, lambda reply: nng_raw_send(sock, *reply))
    finally:
        sock.close()


def _nng_recv_via(sock: pynng.Socket) -> tuple[list[bytes], bytes, str]:
    """A raw receive with the remote address of the pipe it came on."""
    msg_p = ffi.new("nng_msg **")
    rv = lib.nng_recvmsg(sock.socket, msg_p, 0)
    if rv == lib.NNG_ETIMEDOUT:
        raise pynng.Timeout("timed out", rv)
    if rv:
        raise pynng.NNGException(ffi.string(lib.nng_strerror(rv)).decode(), rv)
    m = msg_p[0]
    addr = ffi.new("nng_sockaddr *")
    via = "?"
    if lib.nng_pipe_get_addr(lib.nng_msg_get_pipe(m), b"remote-address", addr) == 0:
        raw = int(addr.s_in.sa_addr).to_bytes(4, "little")  # network order, read as stored
        via = ".".join(str(b) for b in raw)
    msg = to_message(ffi.buffer(lib.nng_msg_header(m), lib.nng_msg_header_len(m))[:],
                     ffi.buffer(lib.nng_msg_body(m), lib.nng_msg_len(m))[:])
    lib.nng_msg_free(m)
    return list(msg.hops), msg.body[0], via


def _say_ready(url: str) -> None:
    sys.stdout.write(f"READY {url}\n")
    sys.stdout.flush()


def _server_command(commands: queue.Queue[str], received: dict[str, int], replied: int) -> bool:
    try:
        cmd = commands.get_nowait()
    except queue.Empty:
        return False
    _say({"received": received, "replied": replied})
    return cmd == "stop"


# ---------------------------------------------------------------------------------------------
# clients

class Ledger:
    """Every request of a client and how it ended."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.sent: dict[int, float] = {}  # id -> send time, for every request
        self.waiting: dict[int, float] = {}  # in flight, within the timeout
        self.done: dict[int, tuple[str, float, str]] = {}  # id -> (ok|late|lost, time, via)
        self.unsent = 0  # the library refused to queue it (no pipe, HWM): not a request
        self.foreign = 0  # a reply this client cannot place
        self.last_reply = 0.0  # when the latest reply came (ok or late)

    def on_sent(self, i: int, now: float) -> None:
        self.sent[i] = self.waiting[i] = now

    def on_reply(self, i: int, via: str, now: float) -> None:
        self.last_reply = now
        if self.waiting.pop(i, None) is not None:
            self.done[i] = ("ok", now, via)
        elif i in self.done and self.done[i][0] == "lost":
            self.done[i] = ("late", now, via)
        else:
            self.foreign += 1

    def expire(self, now: float) -> None:
        old = [i for i, t in self.waiting.items() if now - t > self.timeout]
        for i in old:
            del self.waiting[i]
            self.done[i] = ("lost", self.sent[i] + self.timeout, "")

    def settled(self) -> bool:
        """Every request answered, in time or late: nothing waits, nothing is lost (yet)."""
        return not self.waiting and all(d[0] != "lost" for d in self.done.values())

    def counts(self) -> dict[str, Any]:
        out = {"sent": len(self.sent), "ok": 0, "late": 0, "lost": 0,
               "in_flight": len(self.waiting), "unsent": self.unsent, "foreign": self.foreign,
               "last_reply": self.last_reply}
        via: dict[str, int] = {}
        for status, _, where in self.done.values():
            out[status] += 1
            if where:
                via[where] = via.get(where, 0) + 1
        out["via"] = via
        return out

    def records(self) -> list[list[Any]]:
        """``[id, sent at, status, ended at, via]`` for every request, in id order."""
        return [[i, t, *self.done.get(i, ("in-flight", 0.0, ""))]
                for i, t in sorted(self.sent.items())]


def _parse_reply(body: bytes) -> tuple[int, str] | None:
    if not body.startswith(b"re:"):
        return None
    head, _, via = body[3:].rpartition(b"|")
    parts = head.split(b":", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        return None
    return int(parts[1]), via.decode(errors="replace")


class ZmqClient:
    def __init__(self, urls: list[str], hwm: int, immediate: bool, heartbeat: int) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        self.sock.immediate = int(immediate)
        if heartbeat:
            self.sock.heartbeat_ivl = heartbeat
            self.sock.heartbeat_timeout = 5 * heartbeat
        self.sock.sndhwm = self.sock.rcvhwm = hwm
        self.sock.reconnect_ivl = 100
        self.sock.reconnect_ivl_max = 500
        for url in urls:
            self.sock.connect(url)

    def send(self, rid: int, body: bytes) -> bool:
        try:
            self.sock.send_multipart([b"", body], zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    def recv(self, wait: float) -> list[bytes]:
        out = []
        if self.sock.poll(int(wait * 1000), zmq.POLLIN):
            while True:
                try:
                    frames = self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                out.append(frames[-1])
        return out

    def close(self) -> None:
        self.sock.close(0)
        self.ctx.term()


class NngClient:
    def __init__(self, urls: list[str], hwm: int, immediate: bool, heartbeat: int) -> None:
        self.sock = open_raw("REQ", 1)
        self.sock.send_timeout = 100  # ms: a pipe busy writing the previous one is not ready
        self.sock.send_buffer = self.sock.recv_buffer = min(hwm, 8192)
        self.sock.reconnect_time_min = 100
        self.sock.reconnect_time_max = 500
        for url in urls:
            self.sock.dial(url, block=False)

    def send(self, rid: int, body: bytes) -> bool:
        try:
            nng_raw_send(self.sock, [(TOP | (rid & 0x7FFFFFFF)).to_bytes(4, "big")], body)
        except pynng.NNGException as exc:
            if exc.errno in (lib.NNG_ETIMEDOUT, lib.NNG_EAGAIN):
                return False
            raise
        return True

    def recv(self, wait: float) -> list[bytes]:
        out = []
        self.sock.recv_timeout = max(1, int(wait * 1000))
        while True:
            try:
                _words, body = nng_raw_recv(self.sock)
            except pynng.Timeout:
                break
            out.append(body)
            self.sock.recv_timeout = 1 if len(out) < 1000 else 0
            if len(out) >= 1000:
                break
        return out

    def close(self) -> None:
        self.sock.close()


def run_client(wire: str, urls: list[str], args: argparse.Namespace) -> None:
    client = (ZmqClient if wire == "zmq" else NngClient)(urls, args.hwm, args.immediate,
                                                         args.heartbeat)
    ledger = Ledger(args.timeout)
    commands = stdin_commands()
    _say_ready(",".join(urls))
    interval = 1.0 / args.rate if args.rate > 0 else 0.0
    next_id = 0
    sending = interval > 0 or args.burst > 0
    next_send = time.monotonic()
    stop_at: float | None = None
    deadline = time.monotonic() + args.lifetime
    name = args.name.encode()

    def send_one(now: float) -> None:
        nonlocal next_id
        body = (b"%s:%d:" % (name, next_id)).ljust(args.size, b".")
        if client.send(next_id, body):
            ledger.on_sent(next_id, now)
            next_id += 1
        else:
            ledger.unsent += 1

    try:
        for _ in range(args.burst):
            send_one(time.monotonic())
        while time.monotonic() < deadline:
            now = time.monotonic()
            if sending and interval and stop_at is None:
                if next_send < now - 1.0:  # fell behind by a second: do not catch up in a burst
                    next_send = now
                while next_send <= now:
                    send_one(now)
                    next_send += interval
            wait = min(0.01, max(0.0, next_send - time.monotonic())) if interval else 0.01
            for body in client.recv(wait):
                parsed = _parse_reply(body)
                if parsed is None:
                    ledger.foreign += 1
                else:
                    ledger.on_reply(parsed[0], parsed[1], time.monotonic())
            ledger.expire(time.monotonic())
            try:
                cmd = commands.get_nowait()
            except queue.Empty:
                cmd = ""
            if cmd == "stats":
                _say(ledger.counts())
            elif cmd.startswith("send "):
                for _ in range(int(cmd.split()[1])):
                    send_one(time.monotonic())
            elif cmd == "pause":
                sending = False
            elif cmd == "resume":
                sending, next_send = True, time.monotonic()
            elif cmd == "stop" and stop_at is None:
                stop_at = time.monotonic() + args.timeout + args.settle
            if stop_at is not None and (time.monotonic() >= stop_at or ledger.settled()):
                break  # the settle waits for late replies only while one may still come
        final = ledger.counts()
        final["records"] = ledger.records()
        _say(final)
    finally:
        client.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="netns_peer")
    p.add_argument("role", choices=("server", "client"))
    p.add_argument("wire", choices=("zmq", "sp"))
    p.add_argument("urls", help="server: the URL to bind; client: URLs to connect, comma-separated")
    p.add_argument("--delay", type=float, default=0.0, help="server: seconds before a reply")
    p.add_argument("--slow", default="", help="server: delay only bodies with this prefix")
    p.add_argument("--rate", type=float, default=50.0, help="client: requests per second")
    p.add_argument("--burst", type=int, default=0, help="client: requests sent at once first")
    p.add_argument("--timeout", type=float, default=1.0, help="client: a request's deadline")
    p.add_argument("--settle", type=float, default=1.0, help="client: late replies, after stop")
    p.add_argument("--size", type=int, default=64, help="client: request body bytes")
    p.add_argument("--hwm", type=int, default=100_000, help="client: send/receive queue")
    p.add_argument("--name", default="c", help="client: the prefix of its request bodies")
    p.add_argument("--immediate", action="store_true",
                   help="client, libzmq: ZMQ_IMMEDIATE (queue only on completed connections, "
                        "not on one that is reconnecting); nng always does")
    p.add_argument("--heartbeat", type=int, default=0, metavar="MS",
                   help="client, libzmq: ZMQ_HEARTBEAT_IVL (and a timeout of 5 intervals)")
    p.add_argument("--lifetime", type=float, default=300.0)
    args = p.parse_args(argv)
    if args.role == "server":
        pending = _Delayed(args.delay, args.slow.encode())
        (serve_zmq if args.wire == "zmq" else serve_sp)(args.urls, pending, args.lifetime)
    else:
        run_client(args.wire, args.urls.split(","), args)


if __name__ == "__main__":
    main()
