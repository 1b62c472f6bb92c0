"""Cell isolation: ``python -m gateway.tools.matrix.host`` runs cells, one forked child per cell.

Why a helper process: a cell opens libzmq contexts, nng sockets, an asyncio loop, CLI and
gateway subprocesses. Each cell runs in a fresh ``fork()`` of a process that has imported the
libraries but never *started* them (nng and libzmq threads do not survive a fork, so the caller
- a Spark Python worker, a pytest process that already used nng - must not be the one forked).
The child makes itself a process group leader; the CLI peers and the gateway it spawns stay in
that group, so the hard timeout kills the whole group at once.

Protocol: one JSON object per line on stdin ``{"cell": {...}, "timeout": 2.0}``, one JSON result
row per line on stdout. EOF on stdin: exit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from gateway.tools.matrix.cells import DEFAULT_TIMEOUT, Cell, hard_timeout
from gateway.tools.matrix.outcomes import error_row


def _run_forked(cell: Cell, timeout: float) -> dict[str, Any]:
    from gateway.tools.matrix.runner import run_cell_inline

    hard = hard_timeout(timeout)
    t0 = time.monotonic()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            os.setpgid(0, 0)
            os.dup2(2, 1)  # stray prints must not corrupt the result channel

            def send(row: dict[str, Any]) -> None:  # one JSON line per row; the last one counts
                view = memoryview(json.dumps(row).encode() + b"\n")
                while view:
                    n = os.write(w, view)
                    view = view[n:]

            try:
                if not cell.direct:  # fork the gateway's process now, before any thread
                    from gateway.tools.harness.gateway import Zygote
                    from gateway.tools.matrix import runner

                    runner.ZYGOTE = Zygote()
                row = run_cell_inline(cell, timeout,
                                      on_played=lambda early: send({**early, "_early": True}))
            except BaseException as exc:  # noqa: BLE001
                row = error_row(cell, f"cell crashed: {exc!r}")
            send(row)
        finally:
            os._exit(0)
    os.close(w)
    chunks: list[bytes] = []
    timed_out = False
    try:
        deadline = t0 + hard
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([r], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(r)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # the child and anything it left behind
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    if timed_out:
        return error_row(cell, f"hard timeout after {hard:.0f}s: process group killed",
                         time.monotonic() - t0)
    rows = []
    for line in b"".join(chunks).split(b"\n"):
        with contextlib.suppress(ValueError):
            rows.append(dict(json.loads(line)))
    if not rows:
        return error_row(cell, "cell process died without a result", time.monotonic() - t0)
    row = rows[-1]
    if row.pop("_early", False):  # the exchange's result, then the process died closing its peers
        note = "cell process died closing its peers (result taken before the close)"
        row["detail"] = "; ".join(d for d in (row.get("detail"), note) if d)[:2000]
    return row


def main() -> int:
    # import the libraries once, before any fork (imports only: no context, no socket)
    import pynng  # noqa: F401
    import zmq  # noqa: F401

    import gateway.tools.matrix.runner  # noqa: F401

    with contextlib.suppress(Exception):
        import gateway.engine.socket  # noqa: F401
    with contextlib.suppress(Exception):  # what a forked gateway (harness Zygote) runs
        import gateway.cli  # noqa: F401
        from gateway.plugins import manager

        manager()
    with contextlib.suppress(Exception):  # the keys and certificates, made once (openssl, RSA)
        from gateway.tools.harness.security import material

        material()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        cell = Cell.from_dict(req["cell"])
        row = _run_forked(cell, float(req.get("timeout", 2.0)))
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()
    return 0


# -- the caller's side -----------------------------------------------------------------------------
class Host:
    """A running ``gateway.tools.matrix.host``; one per calling process (lazily started)."""

    def __init__(self) -> None:
        from gateway.tools.harness.procs import child_env

        log = os.environ.get("GATEWAY_MATRIX_HOST_LOG")
        self._err = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.tools.matrix.host"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._err, env=child_env(), close_fds=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, cell: Cell, timeout: float) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps({"cell": cell.as_dict(), "timeout": timeout}) + "\n").encode())
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + hard_timeout(timeout) + 30
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("cell host did not answer")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError("cell host exited")
                buf += chunk
        return dict(json.loads(buf.split(b"\n", 1)[0]))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


_HOST: Host | None = None
_LOCK = threading.Lock()


def _close_host() -> None:
    global _HOST
    if _HOST is not None:
        _HOST.close()
        _HOST = None


atexit.register(_close_host)


def run_isolated(cell: Cell, timeout: float) -> dict[str, Any]:
    """Run ``cell`` in a forked child of this process's host; never raises."""
    global _HOST
    t0 = time.monotonic()
    with _LOCK:
        for attempt in range(2):
            try:
                if _HOST is None or not _HOST.alive():
                    _HOST = Host()
                return _HOST.run(cell, timeout)
            except Exception as exc:  # noqa: BLE001
                if _HOST is not None:
                    with contextlib.suppress(Exception):
                        _HOST.proc.kill()
                    _HOST = None
                if attempt:
                    return error_row(cell, f"cell host failed: {exc!r}", time.monotonic() - t0)
    return error_row(cell, "unreachable", time.monotonic() - t0)


if __name__ == "__main__":
    raise SystemExit(main())


def run_cell(cell: Cell, timeout: float = DEFAULT_TIMEOUT, *, isolate: bool = True) -> dict[str, Any]:
    """Run one cell and return its result row (``RESULT_COLUMNS``). Never raises.

    ``isolate=True`` runs it in a forked child of a clean helper process (``gateway.tools.matrix.host``)
    with a hard timeout after which the child's whole process group is killed; ``False`` runs it
    in this process (debugging).
    """
    if isolate:
        return run_isolated(cell, timeout)
    from gateway.tools.matrix.runner import run_cell_inline

    return run_cell_inline(cell, timeout)
