"""``gateway bench --workers-check 1,2``: one route through ``gateway bridge --workers N`` for
each N, many client connections (``SO_REUSEPORT`` spreads connections, not requests, over the
workers), measured in interleaved rounds.

Per N: throughput, p50/p99 round trip, and the CPU the gateway used per request and per second
of wall time (the parent and every worker, from psutil). On a machine where clients, server and
workers share few cores the throughput ratio is bounded by the peers' CPU; the CPU figures say
what the workers themselves cost (see the report's note).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.tools.bench.procs import Unavailable
from gateway.tools.bench.routes import Route
from gateway.tools.bench.runner import (
    RouteRun,
    Settings,
    log,
    start_server_and_middle,
    sweep_point,
    teardown,
)


def workers_check(route: Route, settings: Settings, counts: tuple[int, ...], clients: int,
                  requests: int) -> dict[str, Any]:
    out: dict[str, Any] = {"route": route.name, "description": route.description,
                           "clients": clients, "requests_per_round": requests, "workers": {}}
    runs: dict[int, RouteRun] = {}
    each = replace(settings, sweep_requests=requests)
    try:
        for n in counts:
            run = RouteRun(route)
            runs[n] = run
            run.front_url = start_server_and_middle(route, settings, run,
                                                    bridge_extra=("--workers", str(n)))
            run.status = "ok"
        acc: dict[int, dict[str, Any]] = {n: {"rounds": []} for n in counts}
        for rnd in range(settings.rounds):
            order = list(counts) if rnd % 2 == 0 else list(reversed(counts))
            for n in order:
                log(settings, f"workers-check {route.name}: --workers {n}, round {rnd + 1}/"
                              f"{settings.rounds}, {clients} clients")
                point = sweep_point(runs[n], each, clients)
                if "error" in point:
                    raise Unavailable(f"--workers {n}: {point['error']}")
                acc[n]["rounds"].append(point)
        for n, a in acc.items():
            pts = a["rounds"]
            total_n = sum(p["n"] for p in pts)
            elapsed = sum(p["elapsed"] for p in pts)
            cpu = [p.get("mid_cpu_us_per_req") for p in pts]
            cpu_s = sum(p.get("mid_cpu_s") or 0.0 for p in pts)
            out["workers"][str(n)] = {
                "rps": round(total_n / elapsed) if elapsed else None,
                "rps_rounds": [p.get("rps") for p in pts],
                "p50_us_rounds": [p.get("p50_us") for p in pts],
                "p99_us_rounds": [p.get("p99_us") for p in pts],
                "mid_cpu_us_per_req_rounds": cpu,
                # CPU-seconds of the gateway (parent + workers) per second of wall time
                "mid_cores": round(cpu_s / elapsed, 2) if elapsed else None,
                **{f"{who}_cores_rounds": [p.get(f"{who}_cores") for p in pts]
                   for who in ("mid", "client", "server")},
                "mid_cpu_us_per_req": round(sum(c for c in cpu if c is not None)
                                            / max(1, sum(c is not None for c in cpu)), 1),
            }
        base = out["workers"].get(str(counts[0]), {}).get("rps")
        for n in counts[1:]:
            rps = out["workers"][str(n)]["rps"]
            if base and rps:
                out[f"ratio_{n}_vs_{counts[0]}"] = round(rps / base, 2)
    except (Unavailable, ValueError, KeyError) as exc:
        out["reason"] = str(exc)
    finally:
        for run in runs.values():
            teardown(run)
    return out
