"""``gateway bridge/run --workers N``: N gateway processes sharing each front's port.

The gateway is one Python process, so one bridge uses one core. With ``--workers N`` a parent
process starts N ordinary gateway processes (the same command without ``--workers``) and:

* **ports**: every worker binds its fronts with ``SO_REUSEPORT`` (Linux), so the kernel spreads
  incoming connections over the workers; a connection stays on the worker that accepted it, and
  so do its requests and the worker's own token table. A front with port 0 (``gateway bridge``
  only) is bound by worker 0 first, the others get its real port. Only native tcp fronts can share
  a port (libzmq and nng have no ``SO_REUSEPORT``), backs must connect (a bound back would take
  the servers to one worker only), and ``gateway run`` needs fixed front ports (a reload could
  not agree on a port 0): anything else is refused before a worker starts.
* **metrics**: each worker serves its own endpoint on 127.0.0.1:0; the parent serves the one
  the user asked for (``--metrics`` or the config's) and, at each scrape, reads every worker's
  ``/metrics`` and sums the series with equal names and labels (counters, gauges, histogram
  buckets; the open-files ratio is the workers' maximum), plus
  ``gateway_worker_processes{state=configured|answering}``; a worker that does not answer keeps
  its last counters and histograms in the sums (a sum that went down would read as a counter
  reset in Prometheus) and its gauges are left out. Chosen over prometheus_client's
  multiprocess mode: the hot path keeps its plain dict counters (no mmap file per process and
  metric), the gauges stay callbacks read at scrape time (multiprocess mode has no live gauges),
  and nothing is left behind in a directory when a worker dies. ``/readyz`` is ready when every
  worker is; ``/healthz`` is 200 while every worker runs.
* **signals**: SIGTERM/SIGINT are passed to every worker (each drains for its ``--grace``), SIGHUP
  too (each worker reloads the config itself). The parent exits 0 when every worker did.
* **readiness**: one set of ``READY`` lines (worker 0's, with ``workers=N`` and the parent's
  metrics address) once every worker is ready; systemd's ``READY=1`` from the parent only.
* **failure**: a worker that exits on its own stops the others; the parent exits 1 (systemd's
  ``Restart=`` restarts the whole set).

The default is 1, not one per core: a worker adds throughput only on a core nobody else needs
(on 2 cores shared with the peers, 2 workers gave 0.73x to 1.22x of 1); docs/design.md,
"Operating".
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.config import BridgeSpec
from gateway.errors import ConfigError
from gateway.logging import get_logger
from gateway.supervisor import parse_ready, ready_line

log = get_logger("gateway.workers")

#: set in a worker's environment: "INDEX/N"
ENV_WORKER = "GATEWAY_WORKER"
#: set in the environment of workers 1..N-1: JSON {bridge name: front URL with the real port}
ENV_FRONTS = "GATEWAY_WORKER_FRONTS"
#: how long a worker may take to print its READY lines
READY_TIMEOUT = 60.0
#: seconds between two looks at the workers and the signals while they stop
STOP_POLL = 0.05


def worker_index() -> int | None:
    """This process's worker index when it runs as a worker of ``--workers N``, else None."""
    text = os.environ.get(ENV_WORKER, "")
    head = text.partition("/")[0]
    return int(head) if head.isdigit() else None


def front_overrides() -> dict[str, str]:
    """{bridge name: front URL} worker 0 bound, for the other workers (empty elsewhere)."""
    try:
        data = json.loads(os.environ.get(ENV_FRONTS, "") or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def shared_front(name: str, front: str) -> str:
    """``front`` as given (its mode and ``?settings``: allow list, security...) with the address
    worker 0 bound for bridge ``name`` (whose READY line has no settings), else unchanged."""
    bound = front_overrides().get(name)
    head, sep, rest = front.partition("://")
    return front if bound is None else f"{head}{sep}{bound.partition('://')[2]}" \
        f"{''.join(rest.partition('?')[1:])}"


# -- what can be shared -------------------------------------------------------------------------
def check_shareable(bridges: Sequence[BridgeSpec], *, fixed_ports: bool) -> list[str]:
    """Every reason these bridges cannot run as several workers (empty: they can)."""
    import socket

    from gateway.device.sides import NATIVE, default_backends
    from gateway.url import parse

    errors = []
    if not sys.platform.startswith("linux") or not hasattr(socket, "SO_REUSEPORT"):
        return ["--workers needs Linux's SO_REUSEPORT (the kernel spreads connections over "
                "the workers); run one gateway per port instead"]
    for b in bridges:
        where = f"bridge {b.name!r}"
        try:
            front, back = default_backends(parse(b.front), parse(b.back))
        except ConfigError as exc:
            errors.append(f"{where}: {exc}")
            continue
        if b.control or b.capture:
            errors.append(f"{where}: --workers cannot share a control or capture endpoint "
                          "(each worker forwards its own connections): run one process")
            continue
        if b.forwarder == "proxy":
            errors.append(f"{where}: --workers needs the native engine; forwarder=proxy is "
                          "libzmq's proxy, which cannot share a port")
            continue
        if front.mode == "connect":
            errors.append(f"{where}: --workers shares a bound front; this front connects "
                          f"({b.front})")
        elif front.transport != "tcp" or front.backend != NATIVE:
            errors.append(f"{where}: --workers needs a native tcp front (SO_REUSEPORT); "
                          f"{b.front} is {front.transport} on backend {front.backend} "
                          "(libzmq and nng cannot share a port: run one gateway per port "
                          "instead, clients connect to several endpoints)")
        elif fixed_ports and front.host_port()[1] == 0:
            errors.append(f"{where}: --workers with a config needs a fixed front port, not 0 "
                          f"({b.front}): a reload could not give every worker the same one")
        if back.mode == "bind":
            errors.append(f"{where}: --workers needs a back that connects; a bound back "
                          f"({b.back}) would take the servers to one worker only")
    return errors


# -- metrics of the workers, summed -------------------------------------------------------------
def fetch(address: str, path: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as r:
            return int(r.status), r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode(errors="replace")


#: gauges of one value per process that the parent shows as their maximum over the workers,
#: not their sum (a ratio of each process's own limit: 2 workers at 50% are not at 100%)
MAX_OVER_WORKERS = frozenset({"gateway_open_files_ratio"})
#: families whose samples only grow: a worker that does not answer keeps its last values in
#: the sum, so that Prometheus never reads a counter going backwards (a reset, then a rate
#: spike when the worker answers again)
_MONOTONIC = frozenset({"counter", "histogram", "summary"})


def sum_metrics(texts: Iterable[str], stale: Iterable[str] = ()) -> list[Any]:
    """Prometheus texts of the workers -> metric families whose samples are summed over the
    workers (equal name and labels); ``gateway_build_info`` and ``-1`` peer gauges ("cannot
    tell") are not summed but kept, :data:`MAX_OVER_WORKERS` take the maximum. ``stale``: the
    last texts of workers that did not answer this time, of which only counters and histograms
    count (their gauges are unknown now)."""
    from prometheus_client.core import Metric
    from prometheus_client.parser import text_string_to_metric_families

    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    answers = [(text, False) for text in texts] + [(text, True) for text in stale]
    for text, old in answers:
        for fam in text_string_to_metric_families(text):
            if old and fam.type not in _MONOTONIC:
                continue
            if fam.name not in families:
                families[fam.name] = Metric(fam.name, fam.documentation, fam.type)
                values[fam.name] = {}
            acc = values[fam.name]
            for s in fam.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                if fam.name == "gateway_build_info" or (key in acc and -1.0 in (acc[key],
                                                                                s.value)):
                    acc[key] = -1.0 if fam.name != "gateway_build_info" else s.value
                elif fam.name in MAX_OVER_WORKERS:
                    acc[key] = max(acc.get(key, s.value), s.value)
                else:
                    acc[key] = acc.get(key, 0.0) + s.value
    for name, fam in families.items():
        for (sample, labels), value in values[name].items():
            fam.add_sample(sample, dict(labels), value)
    return list(families.values())


@dataclass
class Worker:
    index: int
    proc: subprocess.Popen[str]
    ready: list[str] = field(default_factory=list)  # its READY lines
    metrics: str = ""  # its own metrics address


class _Families:
    """A prometheus_client collector yielding pre-built families."""

    def __init__(self, families: list[Any]) -> None:
        self._families = families

    def collect(self) -> Iterable[Any]:
        return self._families


class Aggregator:
    """The parent's HTTP endpoint: /metrics summed over the workers, /readyz, /healthz."""

    def __init__(self, address: str, workers: Callable[[], list[Worker]]) -> None:
        from gateway.observe import HttpEndpoint

        self.workers = workers
        self._last: dict[int, str] = {}  # each worker's last /metrics text
        self._http = HttpEndpoint(address, self.app, "gateway-workers-http")
        self.address = self._http.address

    def metrics_text(self) -> str:
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.core import GaugeMetricFamily

        workers = self.workers()
        texts, stale = [], []
        for w in workers:
            try:
                status, text = fetch(w.metrics, "/metrics")
                error = "" if status == 200 else f"HTTP {status}"
            except OSError as exc:
                error = str(exc)
            if not error:
                texts.append(text)
                self._last[w.index] = text
                continue
            log.warning("workers.scrape_failed", worker=w.index, address=w.metrics, error=error)
            if w.index in self._last:  # its counters stay in the sums (see sum_metrics)
                stale.append(self._last[w.index])
        from gateway.metrics import SPECS

        families = sum_metrics(texts, stale)
        spec = SPECS["gateway_worker_processes"]
        gauge = GaugeMetricFamily("gateway_worker_processes", spec.help, labels=spec.labels)
        gauge.add_metric(["configured"], len(workers))
        gauge.add_metric(["answering"], len(texts))
        families = [f for f in families if f.name != "gateway_worker_processes"] + [gauge]
        reg = CollectorRegistry(auto_describe=False)
        reg.register(_Families(families))  # type: ignore[arg-type]
        return generate_latest(reg).decode()

    def app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        ctype = "text/plain; charset=utf-8"
        workers = self.workers()
        if path == "/metrics":
            from prometheus_client import CONTENT_TYPE_LATEST

            body, status, ctype = self.metrics_text().encode(), "200 OK", CONTENT_TYPE_LATEST
        elif path == "/healthz":
            alive = all(w.proc.poll() is None for w in workers)
            body = b"ok\n" if alive else b"a worker exited\n"
            status = "200 OK" if alive else "503 Service Unavailable"
        elif path == "/readyz":
            lines, ready = [], True
            for w in workers:
                try:
                    code, text = fetch(w.metrics, "/readyz")
                except OSError as exc:
                    code, text = 503, f"unreachable: {exc}\n"
                ready = ready and code == 200
                lines += [f"worker {w.index}: {ln}" for ln in text.splitlines()]
            body = ("\n".join(lines) + "\n").encode()
            status = "200 OK" if ready else "503 Service Unavailable"
        else:
            body, status = b"not found: try /metrics, /healthz or /readyz\n", "404 Not Found"
        start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
        return [body]

    def close(self) -> None:
        self._http.close()


# -- the parent ----------------------------------------------------------------------------------
def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def worker_argv(argv: Sequence[str]) -> list[str]:
    """The CLI arguments of a worker: ``argv`` without ``--workers`` and ``--metrics`` (each
    worker serves its own metrics on 127.0.0.1:0, the parent the summed ones)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--workers", "--metrics"):
            skip = True
            continue
        if arg.startswith(("--workers=", "--metrics=")):
            continue
        out.append(arg)
    return [*out, "--metrics", "127.0.0.1:0"]


class Parent:
    """Starts, watches and stops the workers; see the module docstring."""

    def __init__(self, argv: Sequence[str], n: int, bridges: Sequence[BridgeSpec],
                 metrics: str | None, grace: float) -> None:
        self.argv = worker_argv(argv)
        self.n = n
        self.bridges = list(bridges)
        self.metrics = metrics
        self.grace = grace
        self.workers: list[Worker] = []
        self.lines: queue.Queue[tuple[int, str | None]] = queue.Queue()
        self.signals: queue.Queue[int] = queue.Queue()
        self.aggregator: Aggregator | None = None

    # -- starting -------------------------------------------------------------------------
    def _spawn(self, index: int, fronts: dict[str, str]) -> Worker:
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)  # systemd hears the parent only
        env[ENV_WORKER] = f"{index}/{self.n}"
        if fronts:
            env[ENV_FRONTS] = json.dumps(fronts)
        env.setdefault("PYTHONUNBUFFERED", "1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", *self.argv], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=None, text=True, env=env,
            preexec_fn=_set_pdeathsig if sys.platform.startswith("linux") else None)
        w = Worker(index, proc)
        threading.Thread(target=self._pump, args=(w,), daemon=True,
                         name=f"gateway-worker-{index}").start()
        self.workers.append(w)
        return w

    def _pump(self, w: Worker) -> None:
        assert w.proc.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            for line in w.proc.stdout:
                self.lines.put((w.index, line.rstrip("\n")))
        self.lines.put((w.index, None))

    def _wait_ready(self, want: list[Worker], deadline: float) -> None:
        pending = {w.index: w for w in want}
        by_index = {w.index: w for w in self.workers}
        while any(len(w.ready) < len(self.bridges) for w in pending.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                slow = [i for i, w in pending.items() if len(w.ready) < len(self.bridges)]
                raise ConfigError(f"--workers: worker(s) {slow} not ready within "
                                  f"{READY_TIMEOUT:.0f}s")
            try:
                index, line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            w = by_index[index]
            if line is None:
                rc = w.proc.wait(5)
                raise ConfigError(f"--workers: worker {index} exited {rc} before it was ready "
                                  "(its error is above)")
            self._line(w, line)

    def _line(self, w: Worker, line: str) -> None:
        fields = parse_ready(line)
        if fields is None:
            if w.index == 0:
                print(line, flush=True)
            return
        w.metrics = fields.get("metrics", w.metrics)
        if len(w.ready) < len(self.bridges):
            w.ready.append(line)
        elif w.index == 0:  # a reload started bridges: say so once, like one gateway would
            print(self._shown(line), flush=True)

    def _shown(self, line: str) -> str:
        fields: dict[str, object] = dict(parse_ready(line) or {})
        fields["metrics"] = self.aggregator.address if self.aggregator is not None else None
        return ready_line(**fields, workers=self.n)

    def _fronts(self, first: Worker) -> dict[str, str]:
        out = {}
        for line in first.ready:
            fields = parse_ready(line) or {}
            name = fields.get("name") or (self.bridges[0].name if len(self.bridges) == 1 else "")
            if name and "front" in fields:
                out[name] = fields["front"]
        return out

    # -- running --------------------------------------------------------------------------
    def run(self) -> int:
        from gateway.supervisor import sd_notify

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda s, _f: self.signals.put(s))
        deadline = time.monotonic() + READY_TIMEOUT
        try:
            if self.metrics:
                self.aggregator = Aggregator(self.metrics, lambda: list(self.workers))
            first = self._spawn(0, {})
            self._wait_ready([first], deadline)
            fronts = self._fronts(first)
            rest = [self._spawn(i, fronts) for i in range(1, self.n)]
            self._wait_ready(rest, deadline)
        except BaseException:
            self._stop_all(signal.SIGTERM)
            if self.aggregator is not None:
                self.aggregator.close()
            raise
        for line in first.ready:
            print(self._shown(line), flush=True)
        log.info("workers.ready", workers=self.n,
                 pids=[w.proc.pid for w in self.workers],
                 metrics=[w.metrics for w in self.workers])
        sd_notify("READY=1")
        sd_notify(f"STATUS={self.n} workers")
        try:
            return self._serve()
        finally:
            if self.aggregator is not None:
                self.aggregator.close()

    def _serve(self) -> int:
        from gateway.supervisor import sd_notify

        by_index = {w.index: w for w in self.workers}
        while True:
            try:
                sig = self.signals.get_nowait()
            except queue.Empty:
                sig = None
            if sig in (signal.SIGINT, signal.SIGTERM):
                sd_notify("STOPPING=1")
                log.info("workers.stopping", signal=signal.Signals(sig).name)
                codes = self._stop_all(signal.SIGTERM)
                bad = {i: rc for i, rc in codes.items() if rc != 0}
                if bad:
                    log.error("workers.stopped", exit_codes=bad)
                return 1 if bad else 0
            if sig == signal.SIGHUP:
                log.info("workers.reload", workers=self.n)
                for w in self.workers:
                    with contextlib.suppress(OSError):
                        w.proc.send_signal(signal.SIGHUP)
            try:
                index, line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            w = by_index[index]
            if line is not None:
                self._line(w, line)
                continue
            rc = w.proc.wait(5)
            log.error("workers.exited", worker=index, exit_code=rc,
                      result="stopping the other workers")
            sd_notify("STOPPING=1")
            self._stop_all(signal.SIGTERM)
            return 1

    def _stop_all(self, sig: int) -> dict[int, int | None]:
        """``sig`` to every worker, then wait for them (``grace`` + 10 s, then kill); a
        SIGINT/SIGTERM that reaches the parent meanwhile is passed on (a second one forces
        the workers' drain to end now)."""
        for w in self.workers:
            if w.proc.poll() is None:
                with contextlib.suppress(OSError):
                    w.proc.send_signal(sig)
        deadline = time.monotonic() + self.grace + 10
        codes: dict[int, int | None] = {}
        while len(codes) < len(self.workers) and time.monotonic() < deadline:
            for w in self.workers:
                if w.index not in codes and (rc := w.proc.poll()) is not None:
                    codes[w.index] = rc
            try:
                again = self.signals.get(timeout=STOP_POLL)
            except queue.Empty:
                continue
            if again in (signal.SIGINT, signal.SIGTERM):
                log.warning("workers.forced", signal=signal.Signals(again).name)
                for w in self.workers:
                    if w.index not in codes and w.proc.poll() is None:
                        with contextlib.suppress(OSError):
                            w.proc.send_signal(again)
        for w in self.workers:
            if w.index not in codes and (rc := w.proc.poll()) is not None:
                codes[w.index] = rc
            elif w.index not in codes:
                log.error("workers.killed", worker=w.index, result="no exit within the grace")
                w.proc.kill()
                codes[w.index] = w.proc.wait(5)
        return codes

__all__ = ["Aggregator", "Parent", "check_shareable", "front_overrides", "shared_front",
           "sum_metrics", "worker_argv", "worker_index"]
