"""nng 1.11 through pynng, in this process: cooked and raw request-reply (``nng-raw`` opens
``nng_req0_open_raw``/``nng_rep0_open_raw`` and handles the SP header through the pynng
adapter's header codec), pub/sub, pipeline, pair0 and pair1; TLS and wss with ``sec``."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from gateway.tools.harness import security as keys
from gateway.tools.harness.peers import SERVER_ID, Peer, Reply, Security, Seen, remaining
from gateway.tools.harness.procs import LOCAL, port_of


class NngPeer(Peer):
    """pynng's socket of ``kind``; ``impl == "nng-raw"``: a raw REQ or REP."""

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "", *,
                 sec: Security | None = None, **options: Any) -> None:
        super().__init__(impl, kind, wire, side, workdir, **options)
        import pynng

        self.pynng = pynng
        self.raw = impl == "nng-raw"
        cls = {"REQ": pynng.Req0, "REP": pynng.Rep0, "PUB": pynng.Pub0, "SUB": pynng.Sub0,
               "PUSH": pynng.Push0, "PULL": pynng.Pull0, "PAIR0": pynng.Pair0,
               "PAIR1": pynng.Pair1}[kind]
        kw: dict[str, Any] = {}
        if self.raw:
            kw["opener"] = pynng.lib.nng_req0_open_raw if kind == "REQ" else pynng.lib.nng_rep0_open_raw
        if kind == "PAIR1":
            kw["polyamorous"] = False
        if kind in ("SUB", "PULL", "PAIR0", "PAIR1"):
            kw["recv_buffer_size"] = 1024
        self.sock = cls(**kw)
        self.sock.send_timeout = 1000
        if sec is not None and sec.sp in ("tls+tcp", "wss"):
            self.sock.tls_config = keys.nng_tls_config(self.role, sec.bad and side == "client")
        for t in self.topics:
            self.subscribe(t)
        self._ok = 0
        self._lost = 0
        self.sock.add_post_pipe_connect_cb(self._on_add)
        self.sock.add_post_pipe_remove_cb(self._on_rem)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rid = 0
        self._active = threading.Event()
        self._abort: Callable[[], bool] | None = None
        self._watcher: threading.Thread | None = None

    def _on_add(self, _pipe: Any) -> None:
        self._ok += 1

    def _on_rem(self, _pipe: Any) -> None:
        if self._ok:
            self._lost += 1

    def bind(self, url: str) -> str:
        listener = self.sock.listen(url)
        if url.startswith(("ws://", "wss://")):  # nng's ws listener keeps ":0" in its URL
            scheme, _, rest = url.partition("://")
            path = "/" + rest.partition("/")[2]
            return f"{scheme}://{LOCAL}:{port_of(str(listener.local_address))}{path}"
        return str(listener.url)  # the real port after :0 (tcp, ipc, tls+tcp)

    def connect(self, url: str) -> None:
        self.sock.dial(url, block=False)

    def evidence(self) -> str | None:
        if self._ok:
            return "lost" if self._lost >= self._ok else "ok"
        return None  # nng rejects a wrong peer before any pipe callback: silence, not proof

    # -- request-reply ---------------------------------------------------------------------
    def _next_rid(self) -> bytes:
        if not self._rid:
            self._rid = int.from_bytes(os.urandom(4), "big") | 0x80000000
        else:
            self._rid = ((self._rid + 1) & 0x7FFFFFFF) | 0x80000000
        return self._rid.to_bytes(4, "big")

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        from gateway_plugins.pynng_adapter import recv_raw, send_raw

        pynng = self.pynng
        self._abort = abort
        self._active.set()
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, daemon=True, name="nng-watch")
            self._watcher.start()
        try:
            self.sock.send_timeout = max(1, int(remaining(deadline) * 1000))
            header = self._next_rid() if self.raw else b""
            if self.raw:
                send_raw(self.sock, (header,), payload)
            else:
                self.sock.send(payload)
            while True:
                ms = int(remaining(deadline) * 1000)
                if ms <= 0:
                    return None
                self.sock.recv_timeout = ms
                if not self.raw:  # recv_msg: pynng 0.9.0's recv() raises on an empty message
                    return Reply(body=self.sock.recv_msg().bytes)
                msg = recv_raw(self.sock)
                hdr = b"".join(msg.hops)
                if hdr != header:  # a raw REQ matches replies itself: drop stale ones
                    self.notes.append(f"raw REQ dropped a reply with header {hdr.hex()}")
                    continue
                return Reply(body=msg.body[0], header=hdr)
        except (pynng.Timeout, pynng.Closed):
            return None
        finally:
            self._active.clear()

    def _watch(self) -> None:
        """nng cancels a request when its recv times out, so a request waits whole; an abort
        (a refused handshake seen elsewhere) closes the socket instead."""
        while not self._stop.is_set():
            if not self._active.wait(0.1):
                continue
            if self._abort is not None and self._abort():
                with contextlib.suppress(Exception):
                    self.sock.close()
                return
            time.sleep(0.02)

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        from gateway_plugins.pynng_adapter import recv_raw, send_raw

        pynng = self.pynng
        sock = self.sock
        sock.recv_timeout = 100

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    if self.raw:
                        msg = recv_raw(sock)
                        body = msg.body[0]
                        self.seen.append(Seen(body=body, header=b"".join(msg.hops)))
                        send_raw(sock, msg.hops, reply_fn(body))
                    else:
                        body = sock.recv_msg().bytes  # recv() raises on empty messages (pynng 0.9.0)
                        self.seen.append(Seen(body=body))
                        sock.send(reply_fn(body))
                except pynng.Timeout:
                    continue
                except pynng.Closed:
                    return
                except Exception as exc:  # noqa: BLE001
                    if not self._stop.is_set():
                        self.problems.append(f"{self.label}: responder error: {exc!r}")
                    return

        self._thread = threading.Thread(target=loop, name=f"nng-{self.side}", daemon=True)
        self._thread.start()

    # -- pub/sub, pipeline, pair -----------------------------------------------------------
    def subscribe(self, topic: bytes) -> None:
        self.sock.subscribe(topic)

    def unsubscribe(self, topic: bytes) -> None:
        self.sock.unsubscribe(topic)

    def send(self, msg: bytes) -> None:
        with contextlib.suppress(self.pynng.Timeout):
            self.sock.send(msg)

    def drain(self, quiet: float, deadline: float) -> list[bytes]:
        out: list[bytes] = []
        if self.kind in ("PUB", "PUSH"):
            return out
        self.sock.recv_timeout = int(quiet * 1000)
        while time.monotonic() < deadline:
            try:  # recv_msg: pynng's recv() fails on an empty message (a NULL buffer)
                out.append(self.sock.recv_msg().bytes)
            except self.pynng.Timeout:
                break
        return out

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        with contextlib.suppress(Exception):
            self.sock.close()


# -- raw sockets for the suites (the pynng adapter's header codec) --------------------------------
def open_raw(kind: str, recv_timeout_ms: int = 5000) -> Any:
    """A raw nng socket: ``"REP"`` (xrep) or ``"REQ"`` (xreq)."""
    import pynng

    if kind == "REP":
        s = pynng.Rep0(opener=pynng.lib.nng_rep0_open_raw)
    else:
        s = pynng.Req0(opener=pynng.lib.nng_req0_open_raw)
    s.recv_timeout = recv_timeout_ms
    return s


def nng_raw_recv(sock: Any) -> tuple[list[bytes], bytes]:
    """Receive on a raw nng socket: (backtrace words, body). Raises ``pynng.Timeout``."""
    from gateway_plugins.pynng_adapter import recv_raw

    msg = recv_raw(sock)
    return list(msg.hops), msg.body[0]


def nng_raw_send(sock: Any, words: list[bytes], body: bytes) -> None:
    """Send ``words`` (the backtrace, on the wire as is) + ``body`` on a raw nng socket."""
    from gateway_plugins.pynng_adapter import send_raw

    send_raw(sock, tuple(words), body)
