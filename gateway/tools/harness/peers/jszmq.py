"""jszmq (the JavaScript ZeroMQ, ZWS 2.0 over WebSocket) under Node as a peer process.

``jszmq_peer.js`` (package data next to this module) runs one jszmq socket, driven line by
line: ``SEND <hex>,...`` sends a message, ``SUB <hex>`` subscribes; every message received is
printed ``RECV <hex>,...``; ``serve=True`` makes a REP or ROUTER answer each request with its
body prefixed ``re:``. jszmq and its dependencies come from ``.node/node_modules``
(``.ci/npm-deps.sh`` installs them from the committed lock; ``JSZMQ_NODE_PATH`` overrides).

    with JszmqProc("REQ", "connect", "ws://127.0.0.1:5555/zmq") as req:
        req.send([b"hello"])
        assert req.recv(5) == [b"re:hello"]
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.tools.harness.peers import SERVER_ID, Peer, Reply, Seen, request_frames
from gateway.tools.harness.procs import Started, end_child, free_port, tcp_listening

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "jszmq_peer.js"
#: the checkout's npm packages (``.ci/npm-deps.sh``)
DEFAULT_MODULES = HERE.parents[3] / ".node" / "node_modules"


def node_modules() -> Path:
    return Path(os.environ.get("JSZMQ_NODE_PATH", DEFAULT_MODULES))


def missing() -> str | None:
    """Why the jszmq peer cannot run here (None: it can)."""
    if shutil.which("node") is None:
        return "node not found (Debian: apt-get install nodejs npm)"
    if not (node_modules() / "jszmq").is_dir():
        return f"jszmq not in {node_modules()} (run bash .ci/npm-deps.sh)"
    return None


def node_env(**extra: str) -> dict[str, str]:
    """The environment a node process needs to find the project's npm packages."""
    return {**os.environ, "NODE_PATH": str(node_modules()), **extra}


class JszmqProc(Started):
    """One jszmq socket in a node process; always killed on exit."""

    def __init__(self, kind: str, action: str, url: str, *, serve: bool = False,
                 env: dict[str, str] | None = None) -> None:
        self.args = ["node", str(SCRIPT), kind, action, url, *(["serve"] if serve else [])]
        self.env = env or {}
        self.received: queue.Queue[list[bytes]] = queue.Queue()
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._ready = threading.Event()
        self.problems: list[str] = []

    def start(self) -> JszmqProc:
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True,
                                     env=node_env(**self.env))
        self._reader = threading.Thread(target=self._read, name="jszmq-out", daemon=True)
        self._reader.start()
        if not self._ready.wait(20):
            self.close()
            raise RuntimeError(f"jszmq {' '.join(self.args[2:])} did not start")
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            if line == "READY":
                self._ready.set()
            elif line.startswith("RECV "):
                try:
                    self.received.put([bytes.fromhex(f) for f in line[5:].split(",")])
                except ValueError:  # (a line the peer garbled: kept for the test to show)
                    self.problems.append(line[:200])

    def _line(self, line: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def send(self, frames: list[bytes]) -> None:
        self._line("SEND " + ",".join(f.hex() for f in frames))

    def subscribe(self, topic: bytes) -> None:
        self._line("SUB " + topic.hex())

    def recv(self, timeout: float) -> list[bytes] | None:
        """The next message received within ``timeout`` seconds (None: none came)."""
        try:
            return self.received.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        end_child(self.proc, self._reader)

    end = close  # what leaving ``with`` does




class JszmqPeer(Peer):
    """jszmq as a matrix peer (ZWS 2.0 over ``ws://`` only): one :class:`JszmqProc`. It speaks
    the mechanism-less ``ZWS2.0``, which exchanges no socket type, so it cannot tell a
    completed handshake from a refused one (``evidence()`` is None)."""

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "",
                 **options: Any) -> None:
        super().__init__(impl, kind, wire, side, workdir, **options)
        self.proc: JszmqProc | None = None
        self._closed = threading.Event()

    def bind(self, url: str) -> str:
        """``ws://host:0/path``: jszmq cannot say which port it got, so one is chosen here."""
        host, _, rest = url.partition("://")[2].partition(":")
        port = int(rest.partition("/")[0]) or free_port(host)
        real = f"ws://{host}:{port}/{rest.partition('/')[2]}"
        self.proc = JszmqProc(self.kind, "bind", real).start()
        deadline = time.monotonic() + 10
        while not tcp_listening(port) and time.monotonic() < deadline:
            time.sleep(0.02)
        return real

    def connect(self, url: str) -> None:
        self.proc = JszmqProc(self.kind, "connect", url).start()

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        assert self.proc is not None
        self.proc.send(request_frames(self.kind, payload, peer_id))
        while not abort() and (left := deadline - time.monotonic()) > 0:
            got = self.proc.recv(min(left, 0.2))
            if got is not None:
                return Reply(body=got[-1], frames=tuple(got))
        return None

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        """Each request answered from here: its envelope (a ROUTER's) kept, the body
        ``reply_fn``'s; ``seen`` records what came."""
        proc = self.proc
        assert proc is not None

        def answer() -> None:
            while not self._closed.is_set():
                got = proc.recv(0.2)
                if got is not None:
                    self.seen.append(Seen(body=got[-1], frames=tuple(got[:-1])))
                    proc.send([*got[:-1], reply_fn(got[-1])])

        threading.Thread(target=answer, name="jszmq-serve", daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        if self.proc is not None:
            self.proc.close()


__all__ = ["DEFAULT_MODULES", "SCRIPT", "JszmqPeer", "JszmqProc", "missing", "node_env",
           "node_modules"]
