"""JeroMQ 0.3 (Debian's ``libjeromq-java``, a ZMTP 2.0 implementation) as a peer process.

``JeromqPeer.java`` (package data next to this module) is compiled once per process into a
temporary directory (``javac``, from a JDK) and run with ``java``; nothing compiled is
committed. One process plays one socket: a REQ or DEALER client sending ``count`` requests
(``req-<i>``; a DEALER pipelines them with its own delimiter frame) or a REP or ROUTER server
answering ``count`` requests (0: until stopped) with the body prefixed ``re:``. Its stdout says
``BOUND <endpoint>``, ``RECV <hex>,<hex>...`` per message, then ``DONE`` or ``TIMEOUT``.

    with JeromqProc("REP", "bind", "tcp://127.0.0.1:0", count=3) as rep:
        ...connect something to rep.endpoint...
        assert rep.wait_done(10)
        rep.received   # [[b"req-0"], ...]
"""

from __future__ import annotations

import hashlib
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.tools.harness.peers import SERVER_ID, Peer, Reply, Seen, request_frames
from gateway.tools.harness.procs import Started, end_child

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "JeromqPeer.java"
#: where Debian's libjeromq-java puts the jar (JEROMQ_JAR overrides)
DEFAULT_JAR = "/usr/share/java/jeromq.jar"
#: the JeroMQ generation that greets with ZMTP 2.0 (revision 1)
VERSION = "0.3"

_compiled: dict[str, str] = {}
_lock = threading.Lock()


def jar() -> str:
    return os.environ.get("JEROMQ_JAR", DEFAULT_JAR)


def missing() -> str | None:
    """Why the JeroMQ peer cannot run here (None: it can)."""
    if not Path(jar()).is_file():
        return f"{jar()} not found (Debian: apt-get install libjeromq-java)"
    if shutil.which("java") is None or shutil.which("javac") is None:
        return "java and javac not found (Debian: apt-get install default-jdk-headless)"
    return None


def classpath() -> str:
    """The classpath with ``JeromqPeer`` compiled into a temporary directory named after the
    source's hash (once per machine and source; processes racing to compile it each compile
    into their own directory and the first rename wins)."""
    with _lock:
        if "cp" not in _compiled:
            digest = hashlib.sha256(SOURCE.read_bytes() + jar().encode()).hexdigest()[:16]
            final = Path(tempfile.gettempdir()) / f"jeromq-peer-{digest}"
            if not (final / "JeromqPeer.class").is_file():
                work = tempfile.mkdtemp(prefix="jeromq-peer-build-")
                subprocess.run(["javac", "-nowarn", "-cp", jar(), "-d", work, str(SOURCE)],
                               check=True, capture_output=True, timeout=120)
                try:
                    os.rename(work, final)
                except OSError:  # another process was first
                    shutil.rmtree(work, ignore_errors=True)
            _compiled["cp"] = f"{jar()}{os.pathsep}{final}"
        return _compiled["cp"]


def argv(kind: str, action: str, endpoint: str, count: int, timeout_ms: int,
         identity: bytes | None = None) -> list[str]:
    args = ["java", "-Xss512k", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp",
            classpath(), "JeromqPeer", kind, action, endpoint, str(count), str(timeout_ms)]
    args.append(identity.decode() if identity else "-")
    return args


class JeromqProc(Started):
    """One JeroMQ peer process; always killed on exit."""

    def __init__(self, kind: str, action: str, endpoint: str, count: int = 1,
                 timeout_ms: int = 10_000, identity: bytes | None = None,
                 stderr_path: str | None = None) -> None:
        self.kind = kind
        self.action = action
        self.endpoint = endpoint
        self.args = argv(kind, action, endpoint, count, timeout_ms, identity)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.received: list[list[bytes]] = []
        self.status = ""  # DONE | TIMEOUT once the peer said so
        self._stderr_path = stderr_path
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self.driven = count < 0
        self.count = count

    def command(self, line: str) -> None:
        """A line for a driven peer (``count=-1``): ``SEND <hex>,...`` or ``SERVE``."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def next_line(self, timeout: float, prefix: str = "") -> str | None:
        """The next output line starting with ``prefix`` within ``timeout`` (None: none)."""
        return self._next_line(timeout, prefix)

    def start(self, bound_timeout: float = 30.0) -> JeromqProc:
        with open(self._stderr_path or os.devnull, "ab") as err:
            self.proc = subprocess.Popen(
                self.args, stdin=subprocess.PIPE if self.driven else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=err, text=True)
        self._reader = threading.Thread(target=self._read, name="jeromq-out", daemon=True)
        self._reader.start()
        if self.action == "bind":
            line = self._next_line(bound_timeout, prefix="BOUND ")
            if line is None:
                self.close()
                raise RuntimeError(f"JeroMQ {self.kind} did not bind {self.endpoint}")
            self.endpoint = line.split(" ", 1)[1]
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.rstrip("\r\n")  # "RECV " + an empty frame keeps its space
            if line.startswith("RECV "):
                body = line[5:]
                self.received.append([bytes.fromhex(f) for f in body.split(",")] if body else [b""])
            elif line in ("DONE", "TIMEOUT"):
                self.status = line
            self.lines.put(line)
        self.lines.put(None)

    def _next_line(self, timeout: float, prefix: str) -> str | None:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            if line.startswith(prefix):
                return line
        return None

    def wait_done(self, timeout: float) -> bool:
        """True when the peer handled its ``count`` messages (said ``DONE``) within ``timeout``."""
        deadline = time.monotonic() + timeout
        while not self.status and time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None and self._reader is not None:
                self._reader.join(1)
                break
            time.sleep(0.02)
        return self.status == "DONE"

    def close(self) -> None:
        end_child(self.proc, self._reader)

    end = close  # what leaving ``with`` does


class JeromqPeer(Peer):
    """Debian's JeroMQ 0.3.6 as a matrix peer: one :class:`JeromqProc` per socket, driven
    line by line (``SEND`` a request and print the reply, or ``SERVE``). It greets with ZMTP
    2.0, so it talks to peers that negotiate versions (libzmq 4, the native engine); it cannot
    tell a completed handshake from a refused one (``evidence()`` is None)."""

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "",
                 **options: Any) -> None:
        super().__init__(impl, kind, wire, side, workdir, **options)
        self.proc: JeromqProc | None = None
        self.stderr_path = os.path.join(workdir, f"{side}-jeromq.err") if workdir else None

    def _start(self, action: str, url: str) -> str:
        named = self.kind in ("DEALER", "ROUTER") and self.side == "server"
        self.proc = JeromqProc(self.kind, action, url, count=-1, timeout_ms=10_000,
                               identity=SERVER_ID if named else None,
                               stderr_path=self.stderr_path).start()
        return str(self.proc.endpoint)

    def bind(self, url: str) -> str:
        if not url.startswith("tcp://"):
            raise RuntimeError(f"the JeroMQ peer binds tcp only, not {url}")
        return self._start("bind", url)

    def connect(self, url: str) -> None:
        self._start("connect", url)

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        assert self.proc is not None and self.proc.proc is not None
        frames = request_frames(self.kind, payload, peer_id)
        self.proc.command("SEND " + ",".join(f.hex() for f in frames))
        while not abort():
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            line = self.proc.next_line(min(left, 0.2))
            if line is None:
                if self.proc.proc.poll() is not None:
                    return None
                continue
            if line.startswith("RECV "):
                got = tuple(bytes.fromhex(f) for f in line[5:].split(","))
                return Reply(body=got[-1], frames=got)
            if line == "TIMEOUT":  # the Java side's receive timeout (longer than any cell's)
                return None
        return None

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        """The Java side answers by itself, with the matrix's rule (every body byte + 1);
        ``seen`` fills from its RECV lines."""
        proc = self.proc
        assert proc is not None and proc.proc is not None
        proc.command("SERVE")

        def read() -> None:
            while proc.proc is not None and proc.proc.poll() is None:
                line = proc.next_line(0.2, "RECV ")
                if line is not None:
                    got = tuple(bytes.fromhex(f) for f in line[5:].split(","))
                    self.seen.append(Seen(body=got[-1], frames=got[:-1]))

        threading.Thread(target=read, name="jeromq-seen", daemon=True).start()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.close()
