"""A soak: one ``gateway run`` process under steady mixed traffic for a long time, with client
churn, back-end restarts and SIGHUP reloads; then whether it stayed flat and lost nothing
uncounted. Not a test (it is not in CI): ``make soak DURATION=30m``, or

    python -m gateway.tools.soak --duration 30m --out out/soak

The gateway runs four bridges from one config (both wires, every pattern but pair):

| bridge | clients | server |
|---|---|---|
| ``rr-zmq-sp`` | libzmq DEALERs (one request at a time, ids) | nng rep0 (restarted) |
| ``rr-sp-zmq`` | nng req0 (cooked) | libzmq ROUTER (restarted) |
| ``pubsub`` | nng sub0 subscribers (fixed) | libzmq XPUB publisher |
| ``pipeline`` | nng push0 pushers | libzmq PULL |

Request-reply clients and pushers live a random time each and are replaced (churn; a client
closes only once its request in flight ended, a pusher after 0.5 s idle). Every ``--restart``
seconds one request-reply server (in turn) is SIGKILLed and started again 1 s later on the same
port. Every ``--reload`` seconds the config is rewritten and the gateway gets SIGHUP: in turn a
bridge ``extra`` is added, removed, or nothing changes (one name: a removed bridge's counters
stay exported, by design, so each new name would add its series for good). The publisher and the puller are never restarted (pub/sub and pipeline have no
per-message accounting of what a dead peer held).

Sampled every ``--sample`` seconds: the gateway's RSS and open descriptors (``/proc``), its
threads, its asyncio tasks (counted on its loop by :mod:`gateway.tools.soak_probe`, which runs
the CLI as it is plus that count; the gateway has no debug endpoint) and its metric cells (the
samples on /metrics). Descriptors, tasks and cells are judged on the samples taken while the
``extra`` bridge is out (it has sockets, tasks and gauges of its own). At the end, for each series: the
value after the warm-up and at the end, and the least-squares slope over the last third of the
run (per hour), judged flat within a stated tolerance; then the books: for each bridge,
``sent = received + counted drops`` with the gateway's counters. Files in ``--out``:
``samples.csv``, ``summary.json``, ``gateway.log`` (its JSON log), ``gateway.toml``.
Exit status 0 when everything is flat and accounted, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gateway.tools.harness import prometheus
from gateway.tools.harness.procs import child_env, free_port

LOCAL = "127.0.0.1"
REQREP = ("rr-zmq-sp", "rr-sp-zmq")
#: tolerated change over the last third of the run, per series (beyond it: not flat)
TOLERANCE = {"rss_mib": 4.0, "fds": 3.0, "threads": 1.0, "tasks": 3.0, "cells": 0.5}
#: series judged on every sample; the others only on samples taken while no extra bridge ran
WHOLE = frozenset({"rss_mib", "threads"})


def duration(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``1h`` -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    text = text.strip().lower()
    if text[-1:] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text)


class Child:
    """A :mod:`gateway.tools.soak_peers` process: ``READY``, then a JSON answer per command."""

    def __init__(self, role: str, **cfg: Any) -> None:
        self.role, self.cfg = role, cfg
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.tools.soak_peers", role, json.dumps(cfg)],
            env=child_env(), text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        first = self.lines.get(timeout=30)
        if first != "READY":
            raise RuntimeError(f"{role} did not start: {first!r}")

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def ask(self, command: str, timeout: float = 30) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise RuntimeError(f"{self.role} exited")
        return dict(json.loads(line))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


class GatewayProc:
    """``gateway run CONFIG`` under :mod:`gateway.tools.soak_probe`, its log in a file."""

    def __init__(self, config: Path, out: Path, metrics: int, bridges: int) -> None:
        self.metrics, self.tasks_file = metrics, out / "tasks.txt"
        self.tasks_file.write_text("")
        self.log = open(out / "gateway.log", "w", encoding="utf-8")  # noqa: SIM115 - closed in stop
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.tools.soak_probe", "run", str(config)],
            env=child_env(GATEWAY_SOAK_TASKS=str(self.tasks_file)), text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log)
        ready = 0
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        while ready < bridges and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the gateway exited; see {out / 'gateway.log'}")
            ready += line.startswith("READY ")
        threading.Thread(target=self._drain, daemon=True).start()  # later READY lines

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

    def metrics_text(self) -> str:
        return prometheus.scrape(f"{LOCAL}:{self.metrics}", timeout=10)

    def sample(self) -> dict[str, float]:
        pid = self.proc.pid
        status = Path(f"/proc/{pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        text = self.metrics_text()
        tasks = self.tasks_file.read_text().split("\n")
        last = [line for line in tasks if line.strip()]
        return {"rss_mib": int(fields["VmRSS"].split()[0]) / 1024,
                "fds": len(os.listdir(f"/proc/{pid}/fd")),
                "threads": int(fields["Threads"]),
                "tasks": float(last[-1].split()[1]) if last else float("nan"),
                "cells": sum(1 for line in text.splitlines() if line and line[0] != "#")}

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(5)
        self.log.close()
        return rc


def write_config(path: Path, ports: dict[str, int], extra: str | None) -> None:
    lines = ['[gateway]', 'log_format = "json"', 'log_level = "info"',
             f'metrics = "{LOCAL}:{ports["metrics"]}"', '']
    bridges = [
        ("rr-zmq-sp", f"@zmq+tcp://{LOCAL}:{ports['f1']}", f">sp+tcp://{LOCAL}:{ports['s1']}"),
        ("rr-sp-zmq", f"@sp+tcp://{LOCAL}:{ports['f2']}", f">zmq+tcp://{LOCAL}:{ports['s2']}"),
        ("pubsub", f"@sp+tcp://{LOCAL}:{ports['f3']}?pattern=pubsub",
         f">zmq+tcp://{LOCAL}:{ports['s3']}"),
        ("pipeline", f"@sp+tcp://{LOCAL}:{ports['f4']}?pattern=pipeline",
         f">zmq+tcp://{LOCAL}:{ports['s4']}"),
    ]
    if extra:
        bridges.append((extra, f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{ports['s1']}"))
    for name, front, back in bridges:
        lines += ["[[bridge]]", f'name = "{name}"', f'front = "{front}"', f'back = "{back}"',
                  'back_options = { reconnect_ivl = 100, reconnect_ivl_max = 500 }', '']
    path.write_text("\n".join(lines))


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(seconds, value)`` points, per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    den = sum((t - mx) ** 2 for t, _ in points)
    return 0.0 if den == 0 else sum((t - mx) * (v - my) for t, v in points) / den * 3600


def flatness(samples: list[dict[str, Any]], warmup: float) -> dict[str, dict[str, Any]]:
    """Per series: after the warm-up, at the end, and the slope over the last third."""
    out: dict[str, dict[str, Any]] = {}
    end = samples[-1]["t"]
    for key, tol in TOLERANCE.items():
        rows = [s for s in samples if s["t"] >= warmup and (key in WHOLE or not s["extra"])]
        if not rows:
            continue
        third = [(s["t"], s[key]) for s in rows if s["t"] >= end - (end - warmup) / 3]
        slope = slope_per_hour(third)
        span = (third[-1][0] - third[0][0]) / 3600 if len(third) > 1 else 0.0
        out[key] = {"start": round(rows[0][key], 2), "end": round(rows[-1][key], 2),
                    "last_third_min": round(min(v for _, v in third), 2),
                    "last_third_max": round(max(v for _, v in third), 2),
                    "slope_per_hour": round(slope, 3),
                    "change_over_last_third": round(slope * span, 3), "tolerance": tol,
                    "flat": abs(slope * span) <= tol}
    return out


def _metric(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
    return prometheus.total(prometheus.parse(text), name, **labels) or 0.0


def books(text: str, load: dict[str, dict[str, int]], published: int,
          pulled: int) -> dict[str, dict[str, Any]]:
    """``sent = received + counted drops`` for each bridge, from the clients and the gateway."""
    out: dict[str, dict[str, Any]] = {}
    for bridge in REQREP:
        c = load.get(bridge, {})
        sent, ok, late, lost = (c.get(k, 0) for k in ("sent", "ok", "late", "lost"))
        drops = _metric(text, "gateway_dropped_messages_total", bridge=bridge)
        replies = _metric(text, "gateway_forwarded_messages_total", bridge=bridge,
                          direction="reply")
        out[bridge] = {"sent": sent, "received": ok + late, "late": late, "lost": lost,
                       "counted_drops": drops, "forwarded_replies": replies,
                       "accounted": sent == ok + late + drops and lost == drops}
    c = load.get("pipeline", {})
    drops = _metric(text, "gateway_dropped_messages_total", bridge="pipeline")
    out["pipeline"] = {"sent": c.get("sent", 0), "received": pulled, "counted_drops": drops,
                       "accounted": c.get("sent", 0) == pulled + drops}
    c = load.get("pubsub", {})
    forwarded = _metric(text, "gateway_forwarded_messages_total", bridge="pubsub",
                        direction="reply")
    drops = _metric(text, "gateway_dropped_messages_total", bridge="pubsub")
    hwm = _metric(text, "gateway_socket_dropped_messages_total", reason="hwm")
    subs = c.get("subscribers", 0)
    out["pubsub"] = {"sent": published, "forwarded": forwarded, "counted_drops": drops,
                     "subscribers": subs, "received": c.get("received", 0),
                     "gaps": c.get("gap", 0), "socket_hwm_drops": hwm,
                     "accounted": published == forwarded + drops
                     and c.get("received", 0) + hwm == forwarded * subs}
    return out


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.ports = {k: free_port() for k in ("f1", "f2", "f3", "f4", "s1", "s2", "s3", "s4",
                                              "metrics")}
        self.config = self.out / "gateway.toml"
        self.servers: dict[str, Child] = {}
        self.events: list[tuple[float, str]] = []
        self.samples: list[dict[str, Any]] = []
        self.extra: str | None = None
        self.reloads = 0
        self.after: dict[str, float] = {}

    def _server(self, name: str) -> Child:
        role, port = {"s1": ("rep-nng", "s1"), "s2": ("router-zmq", "s2"),
                      "s3": ("pub-zmq", "s3"), "s4": ("pull-zmq", "s4")}[name]
        extra = {"rate": self.args.pub_rate} if role == "pub-zmq" else {}
        child = Child(role, port=self.ports[port], **extra)
        self.servers[name] = child
        return child

    def _load_config(self) -> dict[str, Any]:
        a = self.args
        life = [a.life / 2, a.life * 1.5]
        return {"timeout": a.timeout, "reqrep": [
            {"bridge": "rr-zmq-sp", "wire": "zmq", "url": f"tcp://{LOCAL}:{self.ports['f1']}",
             "clients": a.clients, "rate": a.rate, "life": life},
            {"bridge": "rr-sp-zmq", "wire": "sp", "url": f"tcp://{LOCAL}:{self.ports['f2']}",
             "clients": a.clients, "rate": a.rate, "life": life}],
            "subs": {"bridge": "pubsub", "url": f"tcp://{LOCAL}:{self.ports['f3']}",
                     "count": a.subscribers},
            "pushers": {"bridge": "pipeline", "url": f"tcp://{LOCAL}:{self.ports['f4']}",
                        "count": 2, "rate": a.rate, "life": life}}

    def _reload(self) -> None:
        self.reloads += 1
        step = self.reloads % 3
        if step == 1:
            self.extra = "extra"
        elif step == 2:
            self.extra = None
        write_config(self.config, self.ports, self.extra)
        self.gateway.proc.send_signal(signal.SIGHUP)
        self.events.append((self.now(), f"reload {['unchanged', 'add', 'remove'][step]}"))

    def now(self) -> float:
        return time.monotonic() - self.t0

    def run(self) -> dict[str, Any]:
        a = self.args
        for name in ("s1", "s2", "s3", "s4"):
            self._server(name)
        write_config(self.config, self.ports, None)
        self.gateway = GatewayProc(self.config, self.out, self.ports["metrics"], 4)
        self.t0 = time.monotonic()
        loadp = Child("load", **self._load_config())
        deadline = time.monotonic() + 30
        while _metric(self.gateway.metrics_text(), "gateway_peers", bridge="pubsub",
                      side="front") < a.subscribers and time.monotonic() < deadline:
            time.sleep(0.2)
        self.servers["s3"].ask("go")
        next_sample, next_restart, next_reload = 0.0, a.restart, a.reload
        restarted = 0
        try:
            while self.now() < a.duration:
                t = self.now()
                if t >= next_sample:
                    self.samples.append({"t": round(t, 1), "extra": self.extra is not None,
                                         **self.gateway.sample()})
                    next_sample += a.sample
                if t >= next_restart:
                    name = ("s1", "s2")[restarted % 2]
                    restarted += 1
                    self.servers[name].kill()
                    self.events.append((t, f"killed {self.servers[name].role}"))
                    time.sleep(1.0)
                    self._server(name)
                    next_restart += a.restart
                if t >= next_reload:
                    self._reload()
                    next_reload += a.reload
                time.sleep(0.2)
            published = int(self.servers["s3"].ask("stop")["sent"])
            time.sleep(1.0)  # the last messages reach the subscribers
            final_load = loadp.ask("stop", timeout=a.timeout + 60)
            time.sleep(2.0)  # what is in flight lands
            pulled = int(self.servers["s4"].ask("stats")["received"])
            self.after = self.gateway.sample()  # the load gone: back to its idle self?
            text = self.gateway.metrics_text()
        finally:
            loadp.kill()
            rc = self.gateway.stop()
            for child in self.servers.values():
                child.kill()
        return self._summary(final_load, published, pulled, text, rc, restarted)

    def _summary(self, load: dict[str, dict[str, int]], published: int, pulled: int,
                 text: str, rc: int, restarts: int) -> dict[str, Any]:
        a = self.args
        warmup = min(60.0, a.duration / 10)
        flat = flatness(self.samples, warmup)
        ledger = books(text, load, published, pulled)
        rates = {b: round(load.get(b, {}).get("sent", 0) / a.duration, 1)
                 for b in (*REQREP, "pipeline")}
        rates["pubsub"] = round(published / a.duration, 1)
        summary = {
            "command": " ".join(sys.argv), "duration_s": a.duration, "exit_code": rc,
            "rates_per_s": rates, "restarts": restarts, "reloads": self.reloads,
            "connections": {b: load.get(b, {}).get("connections", 0)
                            for b in (*REQREP, "pipeline")},
            "flatness": flat, "after_the_load": self.after, "books": ledger,
            "ok": rc == 0 and all(f["flat"] for f in flat.values())
            and all(b["accounted"] for b in ledger.values()),
        }
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2))
        with open(self.out / "samples.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(self.samples[0]))
            w.writeheader()
            w.writerows(self.samples)
        (self.out / "events.txt").write_text("".join(f"{t:.1f} {e}\n" for t, e in self.events))
        return summary


def render(summary: dict[str, Any]) -> str:
    lines = [f"soak: {summary['command']}",
             f"{summary['duration_s']:.0f} s, {summary['restarts']} back-end restarts, "
             f"{summary['reloads']} reloads, client connections {summary['connections']}, "
             f"gateway exit {summary['exit_code']}",
             f"rates (messages/s sent): {summary['rates_per_s']}", ""]
    lines.append(f"{'series':<9}{'start':>10}{'end':>10}{'slope/h':>10}{'last 1/3':>10}"
                 f"{'tol':>7}  flat")
    for key, f in summary["flatness"].items():
        lines.append(f"{key:<9}{f['start']:>10}{f['end']:>10}{f['slope_per_hour']:>10}"
                     f"{f['change_over_last_third']:>10}{f['tolerance']:>7}  {f['flat']}")
    after = summary["after_the_load"]
    lines.append("after the load stopped: " + ", ".join(f"{k} {v:g}" for k, v in after.items()))
    lines.append("")
    for bridge, b in summary["books"].items():
        detail = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                           for k, v in b.items() if k != "accounted")
        lines.append(f"{bridge:<10} {'accounted' if b['accounted'] else 'NOT ACCOUNTED'}: "
                     f"{detail}")
    lines.append("")
    lines.append("OK" if summary["ok"] else "NOT OK")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gateway.tools.soak", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=duration, default=300.0, help="e.g. 30m (default 5m)")
    p.add_argument("--out", default="out/soak")
    p.add_argument("--clients", type=int, default=4, help="request-reply clients per bridge")
    p.add_argument("--rate", type=float, default=20.0, help="requests/s of each client")
    p.add_argument("--subscribers", type=int, default=3)
    p.add_argument("--pub-rate", type=float, default=50.0)
    p.add_argument("--life", type=float, default=15.0, help="mean client life, s (churn)")
    p.add_argument("--timeout", type=float, default=10.0, help="a client's reply deadline, s")
    p.add_argument("--restart", type=float, default=60.0, help="s between back-end restarts")
    p.add_argument("--reload", type=float, default=45.0, help="s between SIGHUP reloads")
    p.add_argument("--sample", type=float, default=5.0, help="s between samples")
    args = p.parse_args(argv)
    summary = Soak(args).run()
    print(render(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
