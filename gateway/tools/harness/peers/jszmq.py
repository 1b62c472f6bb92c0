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
from pathlib import Path

from gateway.tools.harness.procs import Started, end_child

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


__all__ = ["DEFAULT_MODULES", "SCRIPT", "JszmqProc", "missing", "node_env", "node_modules"]
