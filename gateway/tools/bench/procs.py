"""Child processes of the benchmark: peers, proxies and gateway bridges (on the harness's
:class:`~gateway.tools.harness.procs.Proc` and its gateway launcher), and what the bench reads
from them: CPU, system calls and memory from /proc.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gateway.tools.harness import procs
from gateway.tools.harness.gateway import Gateway, GatewayDied
from gateway.tools.harness.procs import Unavailable, child_env

PEER = Path(__file__).with_name("peer.py")


def tcp_address(url: str) -> str:
    """``@zmq+tcp://127.0.0.1:5555?backend=x`` or ``tcp://h:p`` -> ``tcp://h:p`` (for libraries)."""
    url = url.lstrip("@>")
    parts = urlsplit(url)
    if not parts.hostname or parts.port is None:
        raise ValueError(f"no host:port in {url!r}")
    return f"tcp://{parts.hostname}:{parts.port}"


def _cpu_clock(pid: int) -> float:
    """A live process's CPU time (all its threads), to the nanosecond: Linux's per-process CPU
    clock (``clock_getcpuclockid``: ``(~pid << 3) | 2``, CPUCLOCK_SCHED), which counts the
    scheduler's run time; /proc and psutil give the same in ticks of 10 ms, too coarse for a
    run of a few thousand requests at a microsecond each."""
    return time.clock_gettime((~pid << 3) | 2)


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process (all threads) and of its live children (the
    workers of ``gateway bridge --workers N``), from the processes' CPU clocks (ns); None once
    the process is gone."""
    try:
        import psutil

        children = [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except ImportError:
        children = []
    except Exception:  # noqa: BLE001 - process gone
        return None
    try:
        total = _cpu_clock(pid)
    except OSError:  # gone, or not Linux
        return None
    for child in children:
        try:
            total += _cpu_clock(child)
        except OSError:  # a child that ended meanwhile
            continue
    return total


def _family(pid: int) -> list[int]:
    """A process and its children (psutil; the process alone without it or once it is gone)."""
    pids = [pid]
    try:
        import psutil

        pids += [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except Exception:  # noqa: BLE001 - psutil missing or process gone: the process alone
        pass
    return pids


def proc_syscalls(pid: int) -> tuple[int, int] | None:
    """(read, write) system calls so far of a process and its children (Linux /proc/PID/io:
    ``syscr``/``syscw`` count read- and write-type calls, which is what libuv does on a TCP
    stream); None where /proc has no io file."""
    r = w = 0
    for p in _family(pid):
        try:
            fields = dict(line.split(":", 1) for line in
                          Path(f"/proc/{p}/io").read_text().splitlines() if ":" in line)
            r += int(fields["syscr"])
            w += int(fields["syscw"])
        except (OSError, KeyError, ValueError):
            if p == pid:
                return None
    return r, w


def proc_user_sys_ticks(pid: int) -> tuple[int, int] | None:
    """User and system CPU time so far of a process and its children, in clock ticks
    (/proc/PID/stat ``utime``, ``stime``: 10 ms each, too coarse for a CPU figure of its own
    but enough to split the CPU clock's figure over a run into user and system shares); None
    where /proc has none."""
    user = system = 0
    seen = False
    for p in _family(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            user += int(fields[11])
            system += int(fields[12])
            seen = True
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    return (user, system) if seen else None


def proc_wakeups(pid: int) -> int | None:
    """Wake-ups so far of a process and its children: the voluntary context switches of each
    of their threads (Linux /proc/PID/task/TID/status ``voluntary_ctxt_switches``), one each
    time a thread went to sleep (epoll_wait, poll, a futex) and was woken again. Threads that
    ended are not counted (the bench's middles keep theirs); None where /proc has none."""
    total, seen = 0, False
    for p in _family(pid):
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                for line in (task / "status").read_text().splitlines():
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
                        seen = True
            except (OSError, ValueError):  # a thread that ended meanwhile
                continue
    return total if seen else None


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


#: any child of the bench (a peer, a proxy, a gateway bridge)
Child = procs.Proc


class Proc(procs.Proc):
    """A bench child (:class:`gateway.tools.harness.procs.Proc`); :meth:`peer` starts a bench
    peer program (``peer.py ROLE JSON``, run by path: library peers import no ``gateway``)."""

    #: peers exit on their own after this many seconds (the harness sets it from --max-time)
    lifetime: float = 3600.0

    @classmethod
    def peer(cls, name: str, role: str, **cfg: Any) -> Proc:
        cfg.setdefault("lifetime", cls.lifetime)
        return cls(name, [sys.executable, "-P", str(PEER), role, json.dumps(cfg)])


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


def start_bridge(name: str, front: str, back: str, extra: list[str],
                 ready_timeout: float) -> Gateway:
    """``python -m gateway bridge FRONT BACK ...`` (:class:`~gateway.tools.harness.gateway.
    Gateway`); same process group, so Ctrl-C reaches it."""
    gw = Gateway("bridge", front, back, *extra, name=name, ready_timeout=ready_timeout,
                 new_session=False)
    try:
        return gw.start()
    except GatewayDied as exc:
        raise Unavailable(str(exc)) from None
