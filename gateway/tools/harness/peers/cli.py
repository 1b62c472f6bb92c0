"""nanomsg 1.1.5 and nng 1.5.2 through their Debian command-line tools (``nanocat``,
``nngcat``), one process per responder or pattern socket, one per request.

A responder answers every request with one fixed file (a CLI cannot compute its answer) and
prints each request with ``--hex``; a requester process connects (or binds), sends one request
from a file and prints the reply. A pattern sender repeats its one ``data`` every
``interval`` seconds (a CLI cannot send a sequence); a receiver prints what arrives, a
subscriber with ``--subscribe`` per topic (none: everything).
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.tools.harness.peers import SERVER_ID, Peer, Reply, Seen
from gateway.tools.harness.procs import free_port, kill_proc, tcp_listening

CLI = {
    "nanomsg": {"exe": "nanocat", "bind": "--bind", "connect": "--connect"},
    "nng-1.5": {"exe": "nngcat", "bind": "--listen", "connect": "--dial"},
}
#: each tool's flag per socket type (nanocat's --pair is nanomsg's pair: pair0)
FLAGS = {("nanomsg", "REQ"): "--req", ("nanomsg", "REP"): "--rep",
         ("nanomsg", "PUB"): "--pub", ("nanomsg", "SUB"): "--sub",
         ("nanomsg", "PUSH"): "--push", ("nanomsg", "PULL"): "--pull",
         ("nanomsg", "PAIR0"): "--pair",
         ("nng-1.5", "REQ"): "--req", ("nng-1.5", "REP"): "--rep",
         ("nng-1.5", "PUB"): "--pub0", ("nng-1.5", "SUB"): "--sub0",
         ("nng-1.5", "PUSH"): "--push0", ("nng-1.5", "PULL"): "--pull0",
         ("nng-1.5", "PAIR0"): "--pair0", ("nng-1.5", "PAIR1"): "--pair1"}
_REQREP = ("REQ", "REP")


def parse_hex_line(line: str) -> bytes:
    """``"\\x70\\x6f"`` (``--hex`` output of nanocat/nngcat) -> ``b"po"``."""
    text = line.strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]
    return bytes.fromhex(text.replace("\\x", ""))


class CliPeer(Peer):
    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "",
                 **options: Any) -> None:
        super().__init__(impl, kind, wire, side, workdir, **options)
        self.tool = CLI[impl]
        self.proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self.url = ""
        self.mode = ""
        self.reply_file = ""
        self.request_file = ""
        self.stderr_path = os.path.join(workdir, f"{side}-{impl}.err")
        self.lines: list[bytes] = []  # what it printed (--hex), decoded
        self.requests_sent = 0
        self._taken = 0

    def configure(self, reply: bytes | None = None, request: bytes | None = None) -> None:
        """Request-reply: the fixed reply a responder answers, the request a requester sends."""
        if reply is not None:
            self.reply_file = os.path.join(self.workdir, f"{self.side}-reply.bin")
            Path(self.reply_file).write_bytes(reply)
        if request is not None:
            self.request_file = os.path.join(self.workdir, f"{self.side}-request.bin")
            Path(self.request_file).write_bytes(request)

    @property
    def interval(self) -> str:
        """Seconds between a pattern sender's repeats (nngcat takes whole seconds only)."""
        return "1" if self.impl == "nng-1.5" else "0.1"

    def _argv(self, mode: str, url: str, data_file: str = "") -> list[str]:
        t = self.tool
        flag = FLAGS[(self.impl, self.kind)]
        if self.kind in _REQREP:
            # nanocat 1.1.5 asserts on an empty --file (options.c:502 `data`): --data "" instead
            data = ["--data", ""] if os.path.getsize(data_file) == 0 else ["--file", data_file]
            return [t["exe"], flag, t[mode], url, "--hex", *data]
        # line-buffered: nngcat's stdio buffers a pipe until it exits
        argv = ["stdbuf", "-oL", t["exe"], flag, t[mode], url]
        if self.kind not in ("PUB", "PUSH"):  # the CLIs refuse an output format on these
            argv.append("--hex")
        for topic in self.topics:
            if topic:
                argv += ["--subscribe", topic.decode()]
        if self.kind in ("PUB", "PUSH", "PAIR0", "PAIR1") and self.data:
            argv += ["--data", self.data.decode(), "--interval", self.interval]
        return argv

    def _spawn(self, mode: str, url: str, data_file: str = "") -> subprocess.Popen[bytes]:
        with open(self.stderr_path, "ab") as err:
            return subprocess.Popen(self._argv(mode, url, data_file), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=err)

    def _data_file(self) -> str:
        f = self.reply_file if self.kind == "REP" else self.request_file
        if not f:  # an idle REQ (illegal pairing) still needs something to send
            f = os.path.join(self.workdir, f"{self.side}-idle.bin")
            Path(f).write_bytes(b"idle")
        return f

    def _start_long_running(self, mode: str, url: str) -> None:
        self.mode, self.url = mode, url
        self.proc = self._spawn(mode, url, self._data_file() if self.kind in _REQREP else "")
        if self.kind not in ("REQ", "PUB", "PUSH"):
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            with contextlib.suppress(ValueError):
                msg = parse_hex_line(raw.decode("ascii", "replace"))
                self.lines.append(msg)
                if self.kind == "REP":
                    self.seen.append(Seen(body=msg))

    def bind(self, url: str) -> str:
        """Bind on a concrete port (the CLIs cannot report ``:0``), retrying if it was taken."""
        last = ""
        for _attempt in range(5):
            if url.startswith("tcp://"):
                port = free_port()
                real = f"tcp://127.0.0.1:{port}"
            else:
                port, real = 0, url
            self._start_long_running("bind", real)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    break
                pid = self.proc.pid if self.proc is not None else None
                if (port and tcp_listening(port, pid)) or (not port and os.path.exists(real[6:])):
                    return real
                time.sleep(0.005)
            last = self.stderr_tail()
            self._stop_process()
            self.seen.clear()
            self.lines.clear()
        raise RuntimeError(f"{self.tool['exe']} could not bind {url}: {last}")

    def connect(self, url: str) -> None:
        self.mode, self.url = "connect", url
        if self.kind != "REQ" or not self.request_file:
            self._start_long_running("connect", url)  # responder, pattern socket, or idle
        # a requester client spawns one process per request()

    def stderr_tail(self, n: int = 300) -> str:
        with contextlib.suppress(OSError):
            return Path(self.stderr_path).read_bytes()[-n:].decode("utf-8", "replace").strip()
        return ""

    # -- request-reply ---------------------------------------------------------------------
    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        pass  # the responder process answers from its file since bind()/connect()

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        if self.mode == "bind":  # a binding requester was spawned by bind(): wait for its output
            proc = self.proc
        else:
            Path(self.request_file).write_bytes(payload)
            proc = self._spawn("connect", self.url, self.request_file)
        self.requests_sent += 1
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        try:
            while b"\n" not in buf:
                if time.monotonic() >= deadline or abort():
                    return None
                r, _, _ = select.select([fd], [], [], 0.02)
                if r:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        return None
                    buf += chunk
            line = buf.split(b"\n", 1)[0]
            return Reply(body=parse_hex_line(line.decode("ascii", "replace")))
        finally:
            if proc is not self.proc:
                kill_proc(proc)
                with contextlib.suppress(Exception):
                    proc.stdout.close()

    # -- pub/sub, pipeline, pair -----------------------------------------------------------
    def send(self, msg: bytes) -> None:
        pass  # the process repeats its data by itself

    def drain(self, quiet: float, deadline: float) -> list[bytes]:
        last_n, last_t = -1, time.monotonic()
        while time.monotonic() < deadline:
            n = len(self.lines)
            if n != last_n:
                last_n, last_t = n, time.monotonic()
            elif time.monotonic() - last_t >= quiet:
                break
            time.sleep(0.02)
        out = self.lines[self._taken:]
        self._taken += len(out)
        return out

    def _stop_process(self) -> None:
        kill_proc(self.proc)
        if self._reader is not None:
            self._reader.join(1)
        if self.proc is not None and self.proc.stdout is not None:
            with contextlib.suppress(Exception):
                self.proc.stdout.close()

    def close(self) -> None:
        self._stop_process()
