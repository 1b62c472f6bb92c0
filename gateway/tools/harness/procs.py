"""Child processes and ports: what the bench, the matrix and the test suites share (one copy).

* ports and URLs: :func:`free_port`, :func:`lib_url`, :func:`port_of`, :func:`tcp_listening`;
* the environment of a child Python process: :func:`child_env`;
* :class:`Proc`, a child speaking lines: its stdout read by a thread into a queue (it can never
  block on a full pipe), its stderr kept in a file (quoted when it fails), every wait bounded;
  it says ``READY ...`` once (``READY {json}`` for a bench or matrix peer, the gateway's
  ``READY front=... back=...``), then answers ``RESULT {json}`` per command line;
* :func:`kill_proc` (SIGKILL that never hangs), :func:`proc` (a helper process killed on exit),
  :func:`run_cli` (``gateway ARGS`` to completion).

No pytest here: the tools import it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Self

#: The directory that holds the ``gateway`` package (the checkout, or site-packages).
SOURCE_ROOT = Path(__file__).resolve().parents[3]
PY = sys.executable
LOCAL = "127.0.0.1"
ANY = f"{LOCAL}:0"  # an ephemeral local port: what a gateway binds its front on


class Unavailable(Exception):
    """A child could not do its part (software missing, or its process failed or ended)."""


def free_port(host: str = LOCAL) -> int:
    """A TCP port that was free a moment ago (for peers that cannot bind ``:0`` themselves:
    nanocat, nngcat, ``--metrics``)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python process: this ``gateway`` first on ``PYTHONPATH``
    (so a checkout's children import the checkout), unbuffered output, plus ``extra``."""
    env = dict(os.environ)
    parts = [str(SOURCE_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


def lib_url(url: str) -> str:
    """A gateway endpoint as the libraries spell it: ``@zmq+tcp://h:p?backend=x`` ->
    ``tcp://h:p``; ``nng+ipc:///x`` -> ``ipc:///x``; ``sp+tls+tcp://h:p`` -> ``tls+tcp://h:p``."""
    scheme, sep, rest = url.lstrip("@>").partition("://")
    wire, plus, transport = scheme.partition("+")  # sp+tls+tcp -> tls+tcp, sp+ws -> ws
    return f"{transport if plus else wire}{sep}{rest.split('?', 1)[0]}"


def port_of(url: str) -> int:
    """The TCP port of an endpoint URL (gateway or library spelling) or of ``host:port``."""
    port = url.split("?", 1)[0].split("/", 3)[:3][-1].rpartition(":")[2]
    if not port.isdigit():
        raise ValueError(f"no port in {url!r}")
    return int(port)


def tcp_listening(port: int, pid: int | None = None) -> bool:
    """True when ``port`` is in LISTEN state — and, with ``pid``, listened on by that process
    (another cell may have grabbed the port we picked: then our CLI failed, not succeeded)."""
    want = f":{port:04X}"
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                cols = row.split()
                if len(cols) > 9 and cols[1].endswith(want) and cols[3] == "0A":
                    inodes.add(f"socket:[{cols[9]}]")
    if not inodes or pid is None:
        return bool(inodes)
    fd_dir = f"/proc/{pid}/fd"
    with contextlib.suppress(OSError):
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                if os.readlink(f"{fd_dir}/{fd}") in inodes:
                    return True
    return False


def kill_proc(p: subprocess.Popen[Any] | None, sig: int = signal.SIGKILL) -> None:
    """Send ``sig``, then SIGKILL if it is still there after 2 s; never raises, never hangs."""
    if p is None or p.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        p.send_signal(sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(2)
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(2)


@contextlib.contextmanager
def proc(*args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A helper process (nanocat, nngcat) that is killed on exit whatever happens."""
    p = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        yield p
    finally:
        kill_proc(p)
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
            p.communicate(timeout=5)


def run_cli(*args: str, timeout: float = 20, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run ``gateway ARGS`` to completion (for commands that exit by themselves)."""
    return subprocess.run([PY, "-m", "gateway", *args], cwd=SOURCE_ROOT, env=child_env(),
                          text=True, capture_output=True, timeout=timeout, **kw)


#: exec'd in front of a child Python on Linux: SIGTERM it if the harness dies (prctl
#: PDEATHSIG survives execve; the pid stays the same, so CPU and RSS are still read from the
#: child). The signal follows the *thread* that started the child: start it from a thread
#: that lives as long as the child should.
_DEATHSIG = ("import ctypes, os, signal, sys\n"
             "try:\n"
             "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n"
             "except (OSError, AttributeError):\n"
             "    pass\n"
             "if os.getppid() == 1:\n"
             "    sys.exit(1)\n"
             "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n")


def python_argv(*args: str, die_with_parent: bool = True) -> list[str]:
    """``python ARGS`` for this interpreter, with the PDEATHSIG wrapper on Linux."""
    if die_with_parent and sys.platform.startswith("linux"):
        return [PY, "-c", _DEATHSIG, *args]
    return [PY, *args]


def parse_ready(rest: str) -> dict[str, Any]:
    """What follows ``READY``: a peer's ``{json}`` or the gateway's ``front=... back=...``."""
    if rest.startswith("{"):
        return dict(json.loads(rest))
    from gateway.supervisor import parse_ready as gateway_ready

    return dict(gateway_ready(f"READY {rest}") or {})


def end_child(p: subprocess.Popen[Any] | None, reader: threading.Thread | None) -> None:
    """Kill a line-driven peer's child ``p`` (if it still runs), wait for it, let its output
    ``reader`` thread finish, close its pipes; never raises, never hangs."""
    if p is not None:
        if p.poll() is None:
            p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(5)
    if reader is not None:
        reader.join(2)
    if p is not None:
        for stream in (p.stdout, p.stdin):
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()


class Started:
    """``with x:`` is ``x.start()``, and ``x.end()`` on the way out, or at once when the start
    fails (a half-started child is never left behind)."""

    def start(self) -> Any:
        raise NotImplementedError

    def end(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.end()
            raise

    def __exit__(self, *exc: object) -> None:
        self.end()


class Proc:
    """A child process speaking lines: ``READY ...`` once, then ``RESULT {json}`` per command.

    ``stdin=False`` gives the child no stdin (``/dev/null``); ``stderr_path`` keeps its stderr
    in that file instead of an anonymous temporary one; ``new_session`` puts it in a session of
    its own (not reached by the terminal's Ctrl-C). ``spawn`` starts the child another way
    than ``Popen(argv)`` (it gets ``stderr_path`` and returns what Popen would: a forked
    gateway, :class:`gateway.tools.harness.gateway.Zygote`)."""

    def __init__(self, name: str, argv: list[str], *, new_session: bool = True,
                 stdin: bool = True, env: dict[str, str] | None = None,
                 cwd: str | Path | None = None, stderr_path: str | None = None,
                 spawn: Callable[[str], Any] | None = None) -> None:
        self.name = name
        self.argv = argv
        self.err: IO[bytes] = (open(stderr_path, "w+b") if stderr_path  # noqa: SIM115
                               else tempfile.TemporaryFile(mode="w+b"))
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.other: list[str] = []
        self.ready: dict[str, Any] = {}
        if spawn is not None:
            assert stderr_path, "a spawned child writes its stderr to a path"
            self.p = spawn(stderr_path)
        else:
            self.p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=self.err,
                                      env=env if env is not None else child_env(), cwd=cwd,
                                      text=True, bufsize=1, start_new_session=new_session)
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"proc-{name}")
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.p.pid

    def _read(self) -> None:
        assert self.p.stdout is not None
        try:
            for line in self.p.stdout:
                self.lines.put(line.rstrip("\n"))
        except (OSError, ValueError):
            pass
        self.lines.put(None)

    def stderr_text(self) -> str:
        """Everything the child wrote on stderr so far."""
        try:
            fd = self.err.fileno()
            return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def stderr_tail(self, n: int = 6) -> str:
        lines = [ln for ln in self.stderr_text().splitlines() if ln.strip()]
        return " | ".join(lines[-n:])

    def _why(self, what: str) -> str:
        rc = self.p.poll()
        tail = self.stderr_tail()
        state = f"exited {rc}" if rc is not None else "still running"
        return f"{self.name}: {what} ({state}){': ' + tail if tail else ''}"

    def next_line(self, prefix: str, timeout: float) -> str:
        """The rest of the next stdout line that starts with ``prefix`` (other lines are kept
        in ``other``); raises :class:`Unavailable` after ``timeout`` or when the child ends."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Unavailable(self._why(f"no {prefix} line within {timeout:.0f}s"))
            try:
                line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if line is None:
                self.lines.put(None)  # keep the end marker for later readers
                time.sleep(0.05)  # let the exit status settle for the message
                raise Unavailable(self._why(f"ended before {prefix}"))
            if line.startswith(prefix + " ") or line == prefix:
                return line[len(prefix):].strip()
            self.other.append(line)
            del self.other[:-20]

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        self.ready = parse_ready(self.next_line("READY", timeout))
        return self.ready

    def send(self, **cmd: Any) -> None:
        assert self.p.stdin is not None
        try:
            self.p.stdin.write(json.dumps(cmd) + "\n")
            self.p.stdin.flush()
        except (OSError, ValueError) as exc:
            raise Unavailable(self._why(f"cannot send command: {exc}")) from None

    def result(self, timeout: float) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.next_line("RESULT", timeout))
        return out

    def try_result(self, timeout: float) -> dict[str, Any] | None:
        """The next RESULT, or None if none came within ``timeout`` (the process still runs)."""
        try:
            return self.result(timeout)
        except Unavailable:
            if self.alive():
                return None
            raise

    def request(self, wait: float, **cmd: Any) -> dict[str, Any]:
        self.send(**cmd)
        return self.result(wait)

    def alive(self) -> bool:
        return self.p.poll() is None

    def stop(self, grace: float = 3.0, sig: int = signal.SIGTERM) -> int | None:
        """Close stdin, send ``sig``, wait ``grace``, SIGKILL. Returns the exit code."""
        if self.p.poll() is None:
            if self.p.stdin:
                with contextlib.suppress(OSError, ValueError):
                    self.p.stdin.close()
            try:
                self.p.send_signal(sig)
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                kill_proc(self.p)
            except OSError:
                pass
        self._reader.join(2)
        with contextlib.suppress(OSError):
            self.err.close()
        return self.p.poll()
