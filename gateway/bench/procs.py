"""Child processes of the benchmark: peers, proxies and gateway bridges.

Every child has its stdout read by a thread into a queue (so it can never block on a full pipe)
and its stderr in a temporary file (quoted when it fails). Every wait has a timeout.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gateway.testing.procs import child_env

PEER = Path(__file__).with_name("peer.py")


class Unavailable(Exception):
    """A route cannot run here (software missing, or its process failed to start)."""


def tcp_address(url: str) -> str:
    """``@zmq+tcp://127.0.0.1:5555?backend=x`` or ``tcp://h:p`` -> ``tcp://h:p`` (for libraries)."""
    url = url.lstrip("@>")
    parts = urlsplit(url)
    if not parts.hostname or parts.port is None:
        raise ValueError(f"no host:port in {url!r}")
    return f"tcp://{parts.hostname}:{parts.port}"


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process (all threads) and of its live children (the
    workers of ``gateway bridge --workers N``)."""
    try:
        import psutil

        p = psutil.Process(pid)
        t = p.cpu_times()
        total = float(t.user + t.system)
        for child in p.children(recursive=True):
            try:
                c = child.cpu_times()
                total += float(c.user + c.system)
            except psutil.Error:
                continue
        return total
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - process gone
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def proc_syscalls(pid: int) -> tuple[int, int] | None:
    """(read, write) system calls so far of a process and its children (Linux /proc/PID/io:
    ``syscr``/``syscw`` count read- and write-type calls, which is what libuv does on a TCP
    stream); None where /proc has no io file."""
    pids = [pid]
    try:
        import psutil

        pids += [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except Exception:  # noqa: BLE001 - psutil missing or process gone: the process alone
        pass
    r = w = 0
    for p in pids:
        try:
            fields = dict(line.split(":", 1) for line in
                          Path(f"/proc/{p}/io").read_text().splitlines() if ":" in line)
            r += int(fields["syscr"])
            w += int(fields["syscw"])
        except (OSError, KeyError, ValueError):
            if p == pid:
                return None
    return r, w


def proc_memory_mib(pid: int) -> dict[str, float]:
    """Current RSS and peak RSS (VmHWM) in MiB, from /proc (psutil as fallback for RSS)."""
    out: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                key = "rss_mib" if line.startswith("VmRSS") else "peak_rss_mib"
                out[key] = int(line.split()[1]) / 1024
    except OSError:
        try:
            import psutil

            out["rss_mib"] = psutil.Process(pid).memory_info().rss / 2**20
        except Exception:  # noqa: BLE001
            pass
    return out


class Proc:
    """A child process speaking lines: ``READY ...`` once, then ``RESULT {json}`` per command."""

    def __init__(self, name: str, argv: list[str], *, new_session: bool = True) -> None:
        self.name = name
        self.argv = argv
        self.err = tempfile.TemporaryFile(mode="w+b")
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.other: list[str] = []
        self.ready: dict[str, Any] = {}
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, env=child_env(), text=True, bufsize=1,
                                  start_new_session=new_session)
        threading.Thread(target=self._read, daemon=True, name=f"bench-{name}").start()

    #: peers exit on their own after this many seconds (the harness sets it from --max-time)
    lifetime: float = 3600.0

    @classmethod
    def peer(cls, name: str, role: str, **cfg: Any) -> Proc:
        cfg.setdefault("lifetime", cls.lifetime)
        return cls(name, [sys.executable, "-P", str(PEER), role, json.dumps(cfg)])

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

    def stderr_tail(self, n: int = 6) -> str:
        try:
            self.err.seek(0)
            text = self.err.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return " | ".join(lines[-n:])

    def _why(self, what: str) -> str:
        rc = self.p.poll()
        tail = self.stderr_tail()
        state = f"exited {rc}" if rc is not None else "still running"
        return f"{self.name}: {what} ({state}){': ' + tail if tail else ''}"

    def _next_line(self, prefix: str, timeout: float) -> str:
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
        rest = self._next_line("READY", timeout)
        if rest.startswith("{"):
            self.ready = json.loads(rest)
        else:  # the gateway CLI: READY front=<url> back=<url>
            self.ready = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        return self.ready

    def send(self, **cmd: Any) -> None:
        assert self.p.stdin is not None
        try:
            self.p.stdin.write(json.dumps(cmd) + "\n")
            self.p.stdin.flush()
        except (OSError, ValueError) as exc:
            raise Unavailable(self._why(f"cannot send command: {exc}")) from None

    def result(self, timeout: float) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self._next_line("RESULT", timeout))
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

    def stop(self, grace: float = 3.0) -> int | None:
        """Close stdin, SIGTERM, wait ``grace``, SIGKILL. Returns the exit code."""
        if self.p.poll() is None:
            try:
                if self.p.stdin:
                    self.p.stdin.close()
            except (OSError, ValueError):
                pass
            try:
                self.p.send_signal(signal.SIGTERM)
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                self.p.kill()
                try:
                    self.p.wait(grace)
                except subprocess.TimeoutExpired:
                    pass
            except OSError:
                pass
        try:
            self.err.close()
        except OSError:
            pass
        return self.p.poll()


def gateway_cli_problem(timeout: float = 30.0) -> str | None:
    """None when ``python -m gateway bridge --help`` works, else the reason in one line."""
    try:
        r = subprocess.run([sys.executable, "-m", "gateway", "bridge", "--help"],
                           capture_output=True, text=True, timeout=timeout, env=child_env())
    except subprocess.TimeoutExpired:
        return f"`python -m gateway bridge --help` took over {timeout:.0f}s"
    except OSError as exc:
        return f"cannot run the gateway CLI: {exc}"
    if r.returncode != 0:
        tail = [ln for ln in (r.stderr or r.stdout).splitlines() if ln.strip()][-1:]
        return f"`python -m gateway bridge --help` exited {r.returncode}: {' '.join(tail)}"
    return None


def bridge_help_text() -> str:
    try:
        r = subprocess.run([sys.executable, "-m", "gateway", "bridge", "--help"],
                           capture_output=True, text=True, timeout=30, env=child_env())
        return r.stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


#: exec'd in front of the bridge on Linux: SIGTERM it if the harness dies (prctl PDEATHSIG
#: survives execve; the pid stays the same, so CPU and RSS are still read from the bridge).
_DEATHSIG = ("import ctypes, os, signal, sys\n"
             "try:\n"
             "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n"
             "except (OSError, AttributeError):\n"
             "    pass\n"
             "if os.getppid() == 1:\n"
             "    sys.exit(1)\n"
             "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n")


def start_bridge(name: str, front: str, back: str, extra: list[str],
                 ready_timeout: float) -> Proc:
    """``python -m gateway bridge FRONT BACK ...``; same process group, so Ctrl-C reaches it."""
    argv = [sys.executable, "-m", "gateway", "bridge", front, back, *extra]
    if sys.platform.startswith("linux"):
        argv = [sys.executable, "-c", _DEATHSIG, *argv[1:]]
    proc = Proc(name, argv, new_session=False)
    try:
        proc.wait_ready(ready_timeout)
    except Unavailable:
        proc.stop()
        raise
    if "front" not in proc.ready:
        proc.stop()
        raise Unavailable(f"{name}: READY line without front=: {proc.ready}")
    return proc


def scrape_metrics(address: str, timeout: float = 2.0) -> dict[str, float]:
    """Prometheus text from ``http://ADDRESS/metrics`` -> {series (name{labels}): value}."""
    import urllib.request

    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as r:
        text = r.read().decode(errors="replace")
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        try:
            key, value = line.rsplit(None, 1)
            out[key] = float(value)
        except ValueError:
            continue
    return out


def metric_sum(series: dict[str, float], name: str) -> float | None:
    """Sum of every series of metric ``name`` (all label sets); None when absent."""
    vals = [v for k, v in series.items() if k == name or k.startswith(name + "{")]
    return sum(vals) if vals else None
