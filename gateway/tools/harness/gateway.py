"""The one gateway launcher of the tools and tests: ``python -m gateway ARGS`` as a child.

:class:`Gateway` is a :class:`~gateway.tools.harness.procs.Proc` that waits for the READY line
of each bridge (``gateway.supervisor.parse_ready``, the codec of the line the supervisor
writes), keeps its stderr (``--log-format json`` gives one JSON object per line: ``events``,
``wait_event``), reads ``--metrics`` in Prometheus text (``metric``, ``wait_metric``) and is
always stopped on exit. It dies with the process that started it (Linux ``PDEATHSIG``).

    with Gateway(*bridge_args("@zmq+tcp://127.0.0.1:0", ">sp+tcp://127.0.0.1:5555")) as gw:
        ...connect a client to lib_url(gw.front)...

Endpoint builders for the suites: :func:`url`, :func:`bridge_args`, :func:`local_bridge` and
the backend matrix :data:`BACKENDS`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from gateway.supervisor import parse_ready
from gateway.tools.harness import prometheus
from gateway.tools.harness.procs import (
    ANY,
    LOCAL,
    PY,
    SOURCE_ROOT,
    Proc,
    Started,
    Unavailable,
    child_env,
    port_of,
    python_argv,
)

#: (front backend, back backend): the library adapter ("lib": pyzmq / pynng) or the engine.
BACKENDS = [("lib", "lib"), ("lib", "native"), ("native", "lib"), ("native", "native")]
BACKEND_IDS = [f"front_{f}-back_{b}" for f, b in BACKENDS]
LIB = {"zmq": "pyzmq", "sp": "pynng"}


class Forked:
    """A forked child as ``subprocess.Popen`` shows one (``pid``, ``stdout``, ``poll``,
    ``wait``, ``send_signal``, ``kill``), for :class:`Zygote`'s gateways."""

    stdin = None

    def __init__(self, pid: int, stdout_fd: int) -> None:
        self.pid = pid
        self.stdout = os.fdopen(stdout_fd, "r", buffering=1)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -9
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """A gateway process made ahead by ``fork()``, before the caller starts any thread: it has
    imported the gateway, its engine and its plugins once (in the parent), waits for one
    argument list, then runs ``gateway.cli.main(argv)`` itself: the CLI's own code, without
    an interpreter start and its imports (about 0.4 s of CPU a gateway, on this machine).

    Only for a process that has started no thread (nng's and libzmq's threads do not survive a
    fork): the matrix's cell processes make one first thing (``gateway.tools.matrix.host``).
    A zygote that is never used exits when the parent closes its command pipe."""

    def __init__(self) -> None:
        import gateway.cli  # noqa: F401 - imported before the fork, for the child
        from gateway.plugins import manager

        manager()  # the plugin modules, loaded once
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the zygote
            os.close(self._cmd_w)
            os.close(self._out_r)
            self._child(cmd_r, out_w)
        os.close(cmd_r)
        os.close(out_w)
        self.used = False

    @staticmethod
    def _child(cmd_r: int, out_w: int) -> None:
        code = 1
        try:
            with os.fdopen(cmd_r, "rb") as fh:
                raw = fh.read()
            if not raw:
                os._exit(0)
            job = json.loads(raw)
            os.dup2(out_w, 1)
            err = os.open(job["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(err, 2)
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            sys.stdout = os.fdopen(1, "w", buffering=1)
            sys.stderr = os.fdopen(2, "w", buffering=1)
            from gateway.cli import main

            code = main(job["argv"])
        except SystemExit as exc:  # argparse's --help, --version and usage errors
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except BaseException:  # noqa: BLE001 - what it said is on its stderr
            import traceback

            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)

    def spawn(self, argv: list[str], stderr_path: str) -> Forked:
        """Run ``gateway ARGV`` in the zygote (once); its stdout and pid as a Popen would."""
        if self.used:
            raise RuntimeError("a zygote runs one gateway")
        self.used = True
        with os.fdopen(self._cmd_w, "wb") as fh:
            fh.write(json.dumps({"argv": argv, "stderr": stderr_path}).encode())
        return Forked(self.pid, self._out_r)

    def close(self) -> None:
        """Let an unused zygote go (it exits on the closed pipe) and reap it."""
        if not self.used:
            self.used = True
            with contextlib.suppress(OSError):
                os.close(self._cmd_w)
            with contextlib.suppress(OSError):
                os.close(self._out_r)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)


class GatewayDied(AssertionError):
    """The gateway exited, or said no READY in time (an AssertionError: a test fails on it)."""


class Gateway(Proc, Started):
    """``gateway ARGS`` as a child process; ``start()`` (or ``with``) waits for ``bridges``
    READY lines, whose fields are in ``readies`` (``ready`` is the first).

    ``metrics=True`` adds ``--metrics 127.0.0.1:0`` (or ``metrics_port``), and the READY line
    says which port it got (``metrics_port`` then); for ``run`` it overrides the config's. ``command`` replaces ``python -m gateway`` (a
    script that execs the gateway). ``new_session=False`` keeps it in the caller's process
    group (a terminal's Ctrl-C reaches it too)."""

    def __init__(self, *args: str, bridges: int = 1, metrics: bool = False,
                 metrics_port: int | None = None, ready_timeout: float = 15,
                 extra_env: dict[str, str] | None = None, command: list[str] | None = None,
                 name: str = "gateway", new_session: bool = True,
                 stderr_path: str | None = None, zygote: Zygote | None = None) -> None:
        self.args = list(args)
        self.metrics_port = metrics_port
        self._metrics = metrics
        if metrics:  # port 0 unless given: the gateway binds it and its READY line says where
            self.args += ["--metrics", f"{LOCAL}:{metrics_port or 0}"]
        self.bridges = bridges
        self.ready_timeout = ready_timeout
        self.readies: list[dict[str, str]] = []
        self._start_args: dict[str, Any] = {
            "argv": [*(command or python_argv("-m", "gateway")), *self.args],
            "env": child_env(**(extra_env or {})), "new_session": new_session,
            "stderr_path": stderr_path, "name": name}
        self.zygote = zygote
        self._started = False

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Gateway:
        a = self._start_args
        spawn = None
        if self.zygote is not None:  # the same CLI, forked from a prepared process
            zygote, args = self.zygote, self.args
            if not a["stderr_path"]:
                fd, a["stderr_path"] = tempfile.mkstemp(prefix="gateway-", suffix=".err")
                os.close(fd)

            def spawn(path: str) -> Forked:
                return zygote.spawn(args, path)

        super().__init__(a["name"], a["argv"], new_session=a["new_session"], stdin=False,
                         env=a["env"], cwd=SOURCE_ROOT, stderr_path=a["stderr_path"],
                         spawn=spawn)
        self._started = True
        deadline = time.monotonic() + self.ready_timeout
        try:
            while len(self.readies) < self.bridges:
                fields = parse_ready("READY " + self.next_line(
                    "READY", max(0.01, deadline - time.monotonic())))
                if fields and "front" in fields:
                    self.readies.append(fields)
        except Unavailable as exc:
            self.kill()
            raise GatewayDied(str(exc)) from None
        self.ready = self.readies[0]
        if self._metrics and not self.metrics_port:
            self.metrics_port = port_of(self.ready["metrics"])
        if self.metrics_port:
            self._wait_metrics()
        return self

    def _wait_metrics(self) -> None:
        deadline = time.monotonic() + 5
        while True:
            try:
                self.metrics_text()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def alive(self) -> bool:
        return self._started and super().alive()

    @property
    def proc(self) -> subprocess.Popen[str] | None:
        """The child process (None before ``start``): to signal it (SIGHUP) or read /proc."""
        return self.p if self._started else None

    def kill(self) -> None:
        """SIGKILL (no drain); never raises."""
        if self._started:
            super().stop(grace=0.0, sig=signal.SIGKILL)

    end = kill  # what leaving ``with`` does

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        """Send ``sig`` and wait for the exit code (raises ``TimeoutExpired`` past ``timeout``:
        the bridges did not drain and exit in time). :meth:`stop` never raises."""
        self.p.send_signal(sig)
        rc = self.p.wait(timeout)
        self._reader.join(2)
        return rc

    def stop(self, grace: float = 5.0, sig: int = signal.SIGTERM) -> int | None:
        """SIGTERM (the bridges drain and exit 0), SIGKILL after ``grace``; the exit code."""
        if not self._started:
            return None
        return super().stop(grace=grace, sig=sig)

    # -- what it printed ---------------------------------------------------------------------
    @property
    def front(self) -> str:
        return self.readies[0]["front"]

    @property
    def back(self) -> str:
        return self.readies[0]["back"]

    @property
    def stdout(self) -> Any:
        """The queue of its stdout lines (None once it closed stdout)."""
        return self.lines

    @property
    def stderr(self) -> str:
        return self.stderr_text()

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr_text().splitlines(keepends=True)

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines so far (``--log-format json``)."""
        out = []
        for line in self.stderr_lines:
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
        return out

    def wait_event(self, event: str, timeout: float = 5.0, **fields: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for ev in self.events():
                if ev.get("event") == event and all(ev.get(k) == v for k, v in fields.items()):
                    return ev
            if time.monotonic() > deadline:
                raise AssertionError(f"no log event {event} {fields} within {timeout}s:\n"
                                     f"{self.stderr}")
            time.sleep(0.05)

    # -- metrics ---------------------------------------------------------------------------
    def metrics_text(self) -> str:
        assert self.metrics_port, "start the gateway with metrics=True"
        return prometheus.scrape(f"{LOCAL}:{self.metrics_port}")

    def metrics(self) -> dict[prometheus.Series, float]:
        return prometheus.parse(self.metrics_text())

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels`` (0 if none)."""
        return prometheus.total(self.metrics(), name, **labels) or 0.0

    def wait_metric(self, name: str, at_least: float, timeout: float = 5.0,
                    **labels: str) -> float:
        deadline = time.monotonic() + timeout
        while True:
            value = self.metric(name, **labels)
            if value >= at_least:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{name}{labels} = {value} < {at_least} after {timeout}s\n"
                                     f"{self.metrics_text()}\n{self.stderr}")
            time.sleep(0.05)


def url(wire: str, address: str, backend: str = "lib", prefix: str = "") -> str:
    """``url("zmq", "127.0.0.1:0", "native", "@")`` -> ``@zmq+tcp://127.0.0.1:0?backend=native``."""
    chosen = LIB[wire] if backend == "lib" else backend
    return f"{prefix}{wire}+tcp://{address}?backend={chosen}"


def bridge_args(front: str, back: str, *extra: str, log_format: str = "json") -> list[str]:
    return ["bridge", front, back, "--log-format", log_format, *extra]


def local_bridge(front: str, back: str, port: int, *extra: str, front_be: str = "lib",
                 back_be: str = "lib", prefix: str = "", **gateway: Any) -> Gateway:
    """``gateway bridge``: a ``front`` wire (``zmq``/``sp``) bound on an ephemeral local port,
    to a ``back`` wire server at the local ``port``; ``extra`` CLI options, ``gateway`` keywords
    for :class:`Gateway`, ``prefix`` on the front URL (``"@"``: bind)."""
    return Gateway(*bridge_args(url(front, ANY, front_be, prefix),
                                url(back, f"{LOCAL}:{port}", back_be), *extra), **gateway)


__all__ = ["ANY", "BACKENDS", "BACKEND_IDS", "LIB", "LOCAL", "PY", "Gateway", "GatewayDied",
           "bridge_args", "local_bridge", "url"]
