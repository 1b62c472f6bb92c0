"""A middle's system calls, counted by the kernel: ``perf stat`` on the ``syscalls`` tracepoints
of every thread of the process, enabled for one slice and disabled after it (perf's control
file descriptors: ``--delay -1`` starts it disabled, ``enable``/``disable`` are acknowledged).

Unlike /proc/PID/io (``syscr``/``syscw`` count ``read``/``readv``/``write``/``writev`` but not
``recv``/``send``), the tracepoints count every kind, so libzmq (``recvfrom``/``sendto``), nng
(``readv``/``sendmsg``) and the gateway (libuv's ``read``/``write``) are counted alike. A counted
tracepoint costs each call a little CPU, so the bench counts in slices of their own, never in
the slices whose CPU and throughput it reports. Where perf or the tracepoints are missing (no
root, ``perf_event_paranoid``, no tracefs), :func:`problem` says why and nothing is counted.
"""

from __future__ import annotations

import functools
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

#: what the report adds up: the system calls of each kind
KINDS: dict[str, tuple[str, ...]] = {
    "reads": ("read", "readv", "recvfrom", "recvmsg", "recvmmsg"),
    "writes": ("write", "writev", "sendto", "sendmsg", "sendmmsg"),
    "waits": ("epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select",
              "pselect6"),
}
TIMEOUT = 10.0  # each step of perf (start, enable, disable, exit)


class CountError(Exception):
    """perf did not count (the reason in one line)."""


@functools.cache
def events() -> tuple[str, ...]:
    """The tracepoints of :data:`KINDS` this kernel has (``perf list``), or ()."""
    perf = shutil.which("perf")
    if perf is None:
        return ()
    try:
        out = subprocess.run([perf, "list", "syscalls:sys_enter_*"], capture_output=True,
                             text=True, timeout=TIMEOUT).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    have = {w.removeprefix("syscalls:sys_enter_") for w in out.split()
            if w.startswith("syscalls:sys_enter_")}
    return tuple(f"syscalls:sys_enter_{c}" for calls in KINDS.values() for c in calls
                 if c in have)


@functools.cache
def problem() -> str | None:
    """None when perf counts system calls here, else why not (one line)."""
    perf = shutil.which("perf")
    if perf is None:
        return "no perf on PATH (linux-perf): system calls not counted"
    if not events():
        return "perf lists no syscalls:sys_enter_* tracepoints (tracefs not mounted?)"
    try:
        r = subprocess.run([perf, "stat", "-x", ",", "-e", events()[0], "--", "true"],
                           capture_output=True, text=True, timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"perf stat did not run: {exc}"
    if r.returncode != 0:
        tail = [ln for ln in r.stderr.splitlines() if ln.strip()][-1:]
        return f"perf stat cannot count tracepoints here: {' '.join(tail)}"
    return None


class Count:
    """``with Count(pid) as c: ...`` counts the system calls of ``pid`` (all its threads) made
    inside the block; then ``c.counts`` is {kind: calls} for each of :data:`KINDS`. Raises
    :class:`CountError` (perf failed or did not answer in time; perf is stopped)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.counts: dict[str, int] = {}
        self._p: subprocess.Popen[bytes] | None = None
        self._ctl = self._ack = -1
        self._out = ""

    def __enter__(self) -> Count:
        if problem():
            raise CountError(str(problem()))
        ctl_r, self._ctl = os.pipe()
        self._ack, ack_w = os.pipe()
        fd, self._out = tempfile.mkstemp(prefix="bench-perf-", suffix=".csv")
        os.close(fd)
        try:
            self._p = subprocess.Popen(
                ["perf", "stat", "-x", ",", "--no-big-num", "-e", ",".join(events()),
                 "-p", str(self.pid), "--delay", "-1", f"--control=fd:{ctl_r},{ack_w}",
                 "-o", self._out], pass_fds=(ctl_r, ack_w), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        finally:
            os.close(ctl_r)
            os.close(ack_w)
        try:
            self._command(b"enable")
        except CountError:
            self._stop()
            Path(self._out).unlink(missing_ok=True)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        out = Path(self._out)
        try:
            try:
                self._command(b"disable")
            finally:
                code, err = self._stop()
            if kind is None and code not in (0, -signal.SIGINT):  # (perf re-raises SIGINT)
                raise CountError(f"perf stat exited {code}: {err}")
            if kind is None:
                self.counts = parse(out.read_text())
        finally:
            out.unlink(missing_ok=True)

    def _command(self, word: bytes) -> None:
        """Send ``word`` to perf and wait for its ``ack`` (at most :data:`TIMEOUT`)."""
        assert self._p is not None
        os.write(self._ctl, word + b"\n")
        with selectors.DefaultSelector() as sel:
            sel.register(self._ack, selectors.EVENT_READ)
            if not sel.select(TIMEOUT) or not os.read(self._ack, 64).startswith(b"ack"):
                raise CountError(f"perf did not acknowledge {word.decode()!r} within "
                                 f"{TIMEOUT:.0f}s (pid {self.pid} gone?)")

    def _stop(self) -> tuple[int | None, str]:
        """SIGINT perf (it writes its counts and exits), close the pipes; (exit, stderr tail)."""
        p, err = self._p, ""
        code: int | None = None
        if p is not None:
            p.send_signal(signal.SIGINT)
            try:
                _, raw = p.communicate(timeout=TIMEOUT)
                err = " ".join(raw.decode(errors="replace").split())[-200:]
                code = p.returncode
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                err = f"perf did not exit within {TIMEOUT:.0f}s"
        for fd in (self._ctl, self._ack):
            if fd >= 0:
                os.close(fd)
        self._ctl = self._ack = -1
        self._p = None
        return code, err


def parse(text: str) -> dict[str, int]:
    """perf stat's CSV (``-x ,``: count, unit, event, ...) -> {kind: calls} over :data:`KINDS`;
    an event perf could not count ("<not counted>") counts 0."""
    per_call: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or not fields[2].startswith("syscalls:sys_enter_"):
            continue
        try:
            n = int(fields[0])
        except ValueError:
            n = 0
        per_call[fields[2].removeprefix("syscalls:sys_enter_")] = n
    return {kind: sum(per_call.get(c, 0) for c in calls) for kind, calls in KINDS.items()}
