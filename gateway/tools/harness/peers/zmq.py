"""libzmq through pyzmq: every ZeroMQ socket type the matrix plays, in this process.

Request-reply (REQ, REP, DEALER, ROUTER) with a socket monitor for the handshake evidence, and
pub/sub (PUB, SUB, XPUB, XSUB), pipeline (PUSH, PULL) and PAIR. A ZMTP peer can send
heartbeats (``heartbeat=True``) and take CURVE or PLAIN keys (``sec``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gateway.tools.harness import peers as base
from gateway.tools.harness import security as keys
from gateway.tools.harness.peers import Peer, Reply, Seen
from gateway.tools.harness.peers.peerd_drivers import HandshakeEvents

#: the socket types that announce a routing id when they serve (a ROUTER client addresses them)
_NAMED = ("DEALER", "ROUTER")


class ZmqPeer(Peer):
    """One pyzmq socket of any kind. ``module`` is the pyzmq-API module that makes it."""

    def module(self) -> ModuleType:
        import zmq

        return zmq

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "", *,
                 connect_routing_id: bytes | None = None, heartbeat: bool = False,
                 sec: base.Security | None = None, **options: Any) -> None:
        super().__init__(impl, kind, wire, side, workdir, **options)
        zmq = self.zmq = self.module()
        self.ctx = zmq.Context(io_threads=1)
        self.sock = self.ctx.socket(getattr(zmq, kind))
        self.sock.linger = 0
        self.sock.sndtimeo = 1000
        self._auth: Any = None  # a CURVE or PLAIN server's ZAP authenticator
        if sec is not None and sec.zmtp:
            self._auth = keys.configure_libzmq(self.sock, self.ctx, sec.zmtp, self.role,
                                               sec.bad and side == "client")
        if heartbeat:
            self.sock.setsockopt(zmq.HEARTBEAT_IVL, base.HEARTBEAT["ivl_ms"])
            self.sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, base.HEARTBEAT["timeout_ms"])
        if kind in _NAMED and side == "server":
            self.sock.setsockopt(zmq.ROUTING_ID, base.SERVER_ID)
        if kind == "ROUTER":
            self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        if connect_routing_id is not None:
            self.sock.setsockopt(zmq.CONNECT_ROUTING_ID, connect_routing_id)
        for t in self.topics:
            self.subscribe(t)
        self.mon = self.sock.get_monitor_socket()
        self._handshakes = HandshakeEvents(zmq)
        self.events: list[str] = []
        self._ev_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def bind(self, url: str) -> str:
        if url.startswith("tcp://") and url.endswith(":0"):
            url = url[:-2] + ":*"
        self.sock.bind(url)
        return str(self.sock.getsockopt_string(self.zmq.LAST_ENDPOINT))

    def connect(self, url: str) -> None:
        self.sock.connect(url)

    def evidence(self) -> str | None:
        from zmq.utils.monitor import recv_monitor_message

        zmq = self.zmq
        with self._ev_lock, contextlib.suppress(Exception):
            while self.mon.poll(0):
                ev = recv_monitor_message(self.mon)["event"]
                self.events.append(zmq.Event(ev).name if ev in zmq.Event._value2member_map_
                                   else str(ev))
                self._handshakes.feed(ev)
        return self._handshakes.verdict()

    # -- request-reply ---------------------------------------------------------------------
    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = base.SERVER_ID) -> Reply | None:
        zmq = self.zmq
        frames = base.request_frames(self.kind, payload, peer_id)
        while True:  # a REQ/DEALER with no pipe yet, a ROUTER whose peer is not up yet: retry
            try:
                self.sock.send_multipart(frames, flags=zmq.NOBLOCK)
                break
            except zmq.Again:
                pass
            except zmq.ZMQError as exc:
                if exc.errno != zmq.EHOSTUNREACH:
                    raise
            if time.monotonic() >= deadline or abort():
                return None
            time.sleep(0.005)
        while True:
            if self.sock.poll(20):
                got = self.sock.recv_multipart()
                return Reply(body=got[-1], frames=tuple(got))
            if time.monotonic() >= deadline or abort():
                return None

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        zmq = self.zmq
        sock = self.sock

        def loop() -> None:
            try:
                while not self._stop.is_set():
                    if not sock.poll(50):
                        continue
                    got = sock.recv_multipart()
                    body = got[-1]
                    self.seen.append(Seen(body=body, frames=tuple(got[:-1])))
                    try:
                        sock.send_multipart(got[:-1] + [reply_fn(body)], flags=zmq.NOBLOCK)
                    except zmq.ZMQError as exc:
                        self.problems.append(f"{self.label}: reply failed: {exc}")
            except Exception as exc:  # noqa: BLE001 - a dying responder is a finding, not a crash
                if not self._stop.is_set():
                    self.problems.append(f"{self.label}: responder died: {exc!r}")
            finally:
                sock.close(0)

        self._thread = threading.Thread(target=loop, name=f"zmq-{self.side}", daemon=True)
        self._thread.start()

    # -- pub/sub, pipeline, pair -----------------------------------------------------------
    def subscribe(self, topic: bytes) -> None:
        if self.kind == "SUB":
            self.sock.subscribe(topic)
        elif self.kind == "XSUB":
            self.sock.send(b"\x01" + topic)

    def unsubscribe(self, topic: bytes) -> None:
        if self.kind == "SUB":
            self.sock.unsubscribe(topic)
        elif self.kind == "XSUB":
            self.sock.send(b"\x00" + topic)

    def send(self, msg: bytes) -> None:
        with contextlib.suppress(self.zmq.Again):  # a PUSH/PAIR with no peer: nothing crosses
            self.sock.send(msg)

    def drain(self, quiet: float, deadline: float) -> list[bytes]:
        out: list[bytes] = []
        if self.kind in ("PUB", "PUSH"):
            return out
        while time.monotonic() < deadline and self.sock.poll(int(quiet * 1000)):
            frames = self.sock.recv_multipart()
            if self.kind == "XPUB":
                continue  # subscriptions
            out.append(b"".join(frames))
        return out

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        with self._ev_lock:
            with contextlib.suppress(Exception):
                self.sock.disable_monitor()
            with contextlib.suppress(Exception):
                self.mon.close(0)
        if self._thread is None:
            with contextlib.suppress(Exception):
                self.sock.close(0)
        if self._auth is not None:
            with contextlib.suppress(Exception):
                self._auth.stop()
        if self._thread is None or not self._thread.is_alive():
            with contextlib.suppress(Exception):
                self.ctx.term()
