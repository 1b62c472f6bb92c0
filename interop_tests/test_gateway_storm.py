"""A connection storm (issue 23, "Must show"): 10,000 connections opened in waves of 100 every
20 ms, to a native gateway front and to a libzmq ROUTER (pyzmq) in the same run; then 3,000
connections that never say a word.

* Held: a connection is held once the server's ZMTP greeting and READY came back for the
  DEALER greeting + READY it sent (the server accepted it and ran its handshake). Time from the
  first connect to the last one held: the gateway's, less the time its loop waited for a CPU
  (a loaded machine's share, from /proc/PID/schedstat), must be within 2x libzmq's, and its
  ``gateway_peers{side="front"}`` must reach 10,000.
* Idle: 3,000 connections opened the same way while the 10,000 are held; each must be closed
  by the gateway within 1.5x its handshake timeout (10 s) of being accepted (when the
  gateway's greeting, which it sends on accept, reached the client; the time from the client's
  connect, which adds the wait in the accept queue, is printed too), and counted
  (``gateway_handshake_failures_total`` and ``gateway_pipes_closed_total``, reason
  ``handshake-timeout``).

The load comes from ``storm_client.c``, compiled for the run (non-blocking sockets on one epoll
loop in C, a few dozen bytes a connection: never the bottleneck; a Python client on selectors
fell behind the wave schedule when the machine was busy). Every process raises its soft
RLIMIT_NOFILE to the hard limit (which must allow 13,500 descriptors, or the test skips).
Both servers listen with the same backlog (the system maximum, the gateway's default; libzmq's
default ZMQ_BACKLOG is 100), so the kernel's queue is the same for both. Figures are printed
(``pytest -s``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import resource
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.tools.harness.gateway import Gateway, bridge_args
from gateway.tools.harness.peers.servers import NngServer
from gateway.tools.harness.procs import LOCAL, PY, child_env, port_of

pytestmark = pytest.mark.timeout(180)

HOLD = 10_000
IDLE = 3_000
WAVE, EVERY = 100, 0.02
#: the front's handshake timeout (the default; a shorter one would also close held connections
#: whose handshake a busy gateway reaches late)
HANDSHAKE = 10.0
NEEDED = HOLD + IDLE + 500  #: descriptors of the gateway at the peak

ROUTER = """
import resource, sys, time, zmq
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
ctx = zmq.Context()
s = ctx.socket(zmq.ROUTER)
s.linger = 0
s.setsockopt(zmq.BACKLOG, int(sys.argv[1]))
port = s.bind_to_random_port("tcp://127.0.0.1")
print(port, flush=True)
sys.stdin.readline()  # until the test says so
s.close(0)
ctx.term()
"""


@pytest.fixture
def descriptors() -> Iterator[None]:
    """The soft RLIMIT_NOFILE at the hard limit while the test runs (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < NEEDED:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {NEEDED} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _backlog() -> int:
    from gateway.transport import default_backlog

    return default_backlog()


@pytest.fixture(scope="module")
def storm_client(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``storm_client.c`` compiled for this run (skips without a C compiler)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (Debian: gcc) for the storm client")
    exe = tmp_path_factory.mktemp("storm") / "storm_client"
    subprocess.run([cc, "-O2", "-o", str(exe), str(Path(__file__).with_name("storm_client.c"))],
                   check=True, timeout=60, capture_output=True)
    return str(exe)


class Storm:
    """A ``storm_client`` process: its per-connection report, then (``hold``) the connections
    stay open until :meth:`close`."""

    def __init__(self, exe: str, mode: str, port: int, count: int, timeout: float) -> None:
        self.mode = mode
        self.proc = subprocess.Popen(
            [exe, mode, LOCAL, str(port), str(count), str(WAVE), str(int(EVERY * 1e6)),
             str(timeout)], text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        assert self._line(20) == "READY"

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def _line(self, timeout: float) -> str:
        line = self.lines.get(timeout=timeout)
        assert line is not None, "the storm client exited"
        return line

    def report(self, limit: float = 0.0, timeout: float = 90) -> dict[str, Any]:
        """The storm's figures, from the client's record of every connection."""
        conns = []
        while (line := self._line(timeout)) != "END":
            started, connected, first, ended, outcome = line.split()
            conns.append((float(started), float(connected), float(first), float(ended),
                          outcome))
        return summary(self.mode, conns, limit)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.write("close\n")
                self.proc.stdin.flush()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def summary(mode: str, conns: list[tuple[float, float, float, float, str]],
            limit: float) -> dict[str, Any]:
    """``hold``: how long until every connection was held (from the first connect), p50/p99;
    ``idle``: how long each lived until the server closed it, from its acceptance (the
    gateway's greeting, sent on accept, arrived) and from the client's connect."""
    t0 = min(c[0] for c in conns)
    outcomes: dict[str, int] = {}
    for c in conns:
        outcomes[c[4]] = outcomes.get(c[4], 0) + 1
    out: dict[str, Any] = {"count": len(conns), "outcomes": outcomes,
                           "opened_in": round(max(c[0] for c in conns) - t0, 3)}

    def pick(xs: list[float], q: float) -> float | None:
        return round(xs[min(len(xs) - 1, int(len(xs) * q))], 3) if xs else None

    if mode == "hold":
        held = sorted(c[3] - t0 for c in conns if c[4] == "H")
        out.update(held=len(held), all_held_in=round(held[-1], 3) if len(held) == len(conns)
                   else None,
                   held_p50=pick(held, 0.5), held_p99=pick(held, 0.99))
    else:
        closed = [c for c in conns if c[1] and c[2] and c[4] in "ER"]
        lives = sorted(c[3] - c[2] for c in closed)  # from the acceptance
        from_connect = sorted(c[3] - c[1] for c in closed)
        out.update(closed=len(closed), life_min=pick(lives, 0.0), life_p50=pick(lives, 0.5),
                   life_max=pick(lives, 1.0), from_connect_max=pick(from_connect, 1.0),
                   over_limit=sum(1 for x in lives if x > limit) + len(conns) - len(lives))
    return out


@contextlib.contextmanager
def storm(exe: str, mode: str, port: int, count: int, timeout: float = 60) -> Iterator[Storm]:
    s = Storm(exe, mode, port, count, timeout)
    try:
        yield s
    finally:
        s.close()


@contextlib.contextmanager
def libzmq_router(backlog: int) -> Iterator[int]:
    proc = subprocess.Popen([PY, "-c", ROUTER, str(backlog)], env=child_env(), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.write("\n")
            proc.stdin.flush()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_delay(pid: int) -> float:
    """Seconds the process's main thread (the gateway's loop) has waited for a CPU while
    runnable (/proc/PID/schedstat: on-CPU ns, run-queue wait ns, timeslices)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9


def _settled(read: Any, target: float, timeout: float) -> float:
    """``read()`` once it reaches ``target``, or its value after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    value = read()
    while value < target and time.monotonic() < deadline:
        time.sleep(0.2)
        value = read()
    return float(value)


def test_connection_storm_gateway_holds_them_within_twice_libzmq_and_closes_idle_ones(
        descriptors: None, storm_client: str) -> None:
    backlog = _backlog()
    with libzmq_router(backlog) as port, storm(storm_client, "hold", port, HOLD) as s:
        libzmq = s.report()
    assert libzmq["held"] == HOLD, libzmq

    with NngServer() as server, Gateway(
            *bridge_args(f"@zmq+tcp://{LOCAL}:0?backend=native&handshake_ivl={HANDSHAKE}s"
                         f"&max_connections={HOLD + IDLE + 100}",
                         f">sp+tcp://{LOCAL}:{server.port}?backend=native"),
            metrics=True) as gw:
        front = port_of(gw.front)
        assert gw.proc is not None
        cpu0, wait0 = _cpu_seconds(gw.proc.pid), _run_delay(gw.proc.pid)
        with storm(storm_client, "hold", front, HOLD) as held:
            ours = held.report()
            cpu = _cpu_seconds(gw.proc.pid) - cpu0
            starved = _run_delay(gw.proc.pid) - wait0  # runnable, but the machine was busy
            peers = _settled(lambda: gw.metric("gateway_peers", side="front"), HOLD, 30)
            with storm(storm_client, "idle", front, IDLE) as idle:
                # closed at the handshake timeout: within half of it again (the gateway, starved
                # on a loaded machine, closes 3,000 at once late; never, or at twice, still fails)
                quiet = idle.report(limit=HANDSHAKE * 1.5)
            timeouts = _settled(lambda: gw.metric("gateway_handshake_failures_total",
                                                  reason="handshake-timeout"), IDLE, 10)
            closed = gw.metric("gateway_pipes_closed_total", reason="handshake-timeout")
            still = gw.metric("gateway_peers", side="front")

    print(f"\n{HOLD} connections in waves of {WAVE} every {EVERY * 1e3:.0f} ms (opened in "
          f"{libzmq['opened_in']} s): libzmq ROUTER held all in {libzmq['all_held_in']} s "
          f"(p50 {libzmq['held_p50']}, p99 {libzmq['held_p99']}); the gateway in "
          f"{ours['all_held_in']} s (p50 {ours['held_p50']}, p99 {ours['held_p99']}), "
          f"gateway_peers {peers:.0f}, {cpu / HOLD * 1e6:.0f} us of its CPU a connection, "
          f"{starved:.2f} s waiting for a CPU; ratio "
          f"{(ours['all_held_in'] or float('inf')) / libzmq['all_held_in']:.2f}\n"
          f"{IDLE} idle connections: lives from acceptance {quiet['life_min']}.."
          f"{quiet['life_max']} s (p50 {quiet['life_p50']}; from the client's connect at most "
          f"{quiet['from_connect_max']} s), {quiet['over_limit']} over {HANDSHAKE * 1.5:.0f} s; "
          f"counted handshake-timeout {timeouts:.0f} (failures) / {closed:.0f} (pipes closed)")
    warnings = [line for line in gw.stderr_lines if '"warning"' in line][:5]
    assert ours["held"] == HOLD and peers == HOLD, (ours, warnings)
    # the gateway's own time: its wall time less what it spent runnable but waiting for a CPU
    # (libzmq's figure is the storm's pacing, ~2 s, on any machine; the gateway's was 8.0 s
    # on a loaded 2-core machine, 4 xdist workers and two CPU hogs, with 1.0 s of CPU: it
    # waited, it did not work; failed 1 of 3 runs). A slow accept path (CPU) or a stall of
    # its own (sleeping, retries) still counts in full
    assert ours["all_held_in"] - starved <= 2 * libzmq["all_held_in"], (ours, libzmq, starved)
    assert quiet["closed"] == IDLE and quiet["over_limit"] == 0, quiet
    assert timeouts == closed == IDLE
    assert still == HOLD  # the held ones were not touched
