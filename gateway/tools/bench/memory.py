"""Memory checks: a middle process with many idle clients, and a reply-less flood.

- idle: ``clients`` zmq DEALER sockets (one client process) connect to the middle's front, each
  makes one round trip (so every connection is handshaken and has carried a request), then all
  stay connected while the middle's RSS and peak RSS (VmHWM) are read.
- flood: a bridge zmq->sp whose nng server reads requests and never answers; a zmq DEALER sends
  ``n`` requests as fast as the bridge takes them. ``gateway_pending_tokens`` is scraped from the
  bridge's ``--metrics`` endpoint during the flood and for ``ttl + 2`` s after: it must stay at or
  under the table size (``--pending-tokens``) and drain once tokens expire (``--token-ttl``).
"""

from __future__ import annotations

import time
from typing import Any

from gateway.tools.bench.procs import (
    Proc,
    Unavailable,
    bridge_help_text,
    proc_memory_mib,
    tcp_address,
)
from gateway.tools.bench.routes import Route
from gateway.tools.bench.runner import RouteRun, Settings, log, start_server_and_middle, teardown
from gateway.tools.harness import prometheus
from gateway.tools.harness.procs import free_port


def idle_check(route: Route, settings: Settings, clients: int, timeout: float) -> dict[str, Any]:
    run = RouteRun(route)
    out: dict[str, Any] = {"clients": clients, "route": route.description}
    try:
        url = start_server_and_middle(route, settings, run)
        assert run.middle is not None
        time.sleep(0.3)
        before = proc_memory_mib(run.middle.pid)
        idle = Proc.peer(f"{route.name}/idle-clients", "idle-clients", n=clients,
                         url=tcp_address(url), timeout=timeout)
        run.procs.append(idle)
        ready = idle.wait_ready(timeout + 30)
        time.sleep(0.5)  # let the middle settle with every client connected
        if not run.middle.alive():
            raise Unavailable(f"{run.middle.name} died: {run.middle.stderr_tail(3)}")
        after = proc_memory_mib(run.middle.pid)
        out.update({"connected": ready.get("connected"), "connect_s": round(ready["elapsed"], 2),
                    "rss_before_mib": round(before.get("rss_mib", 0.0), 1),
                    "rss_mib": round(after.get("rss_mib", 0.0), 1),
                    "peak_rss_mib": round(after.get("peak_rss_mib", after.get("rss_mib", 0.0)), 1)})
        if ready.get("connected") != clients:
            out["warning"] = f"only {ready.get('connected')} of {clients} clients got a reply"
    except (Unavailable, ValueError, KeyError) as exc:
        out["reason"] = str(exc)
    finally:
        teardown(run)
    return out


def flood_check(route: Route, settings: Settings, n: int, limit: int, ttl: float,
                duration: float) -> dict[str, Any]:
    out: dict[str, Any] = {"route": route.description, "requested": n}
    help_text = bridge_help_text()
    port = free_port()
    extra: list[str] = []
    if "--metrics" in help_text:
        extra += ["--metrics", f"127.0.0.1:{port}"]
    else:
        out["reason"] = "the bridge has no --metrics option: pending tokens not observable"
    if "--pending-tokens" in help_text:
        extra += ["--pending-tokens", str(limit)]
        out["limit"] = limit
    else:
        out["limit"] = None
        out["note"] = "no --pending-tokens option: default table size"
    if "--token-ttl" in help_text:
        extra += ["--token-ttl", str(ttl)]
        out["ttl_s"] = ttl
    run = RouteRun(route)
    try:
        url = start_server_and_middle(route, settings, run, server_role="nng-blackhole",
                                      bridge_extra=tuple(extra))
        assert run.middle is not None
        client = Proc.peer(f"{route.name}/flood-client", "client", client="zmq",
                           url=tcp_address(url))
        run.procs.append(client)
        client.wait_ready(settings.ready_timeout)
        address = f"127.0.0.1:{port}"

        def pending() -> float | None:
            try:
                return prometheus.total(prometheus.parse(prometheus.scrape(address, 2.0)),
                                        "gateway_pending_tokens")
            except (OSError, ValueError):
                return None

        if "--metrics" in extra and pending() is None:
            try:
                prometheus.scrape(address, 2.0)
                out["reason"] = "metrics served, but no gauge gateway_pending_tokens"
            except (OSError, ValueError) as exc:
                out["reason"] = f"metrics endpoint {address} not readable: {exc}"
        samples: list[tuple[float, float]] = []
        t0 = time.monotonic()
        client.send(op="flood", n=n, size=settings.size, duration=duration)
        res = None
        while res is None and time.monotonic() - t0 < duration + 30:
            res = client.try_result(0.2)
            p = pending()
            if p is not None:
                samples.append((round(time.monotonic() - t0, 2), p))
        if res is None or "error" in res:
            raise Unavailable(f"flood client: {res and res.get('error') or 'no result'}")
        out["sent"] = res["sent"]
        out["send_s"] = round(res["elapsed"], 2)
        settle_until = time.monotonic() + (ttl if "ttl_s" in out else 0) + 2
        while time.monotonic() < settle_until:
            time.sleep(0.25)
            p = pending()
            if p is not None:
                samples.append((round(time.monotonic() - t0, 2), p))
        if not run.middle.alive():
            raise Unavailable(f"{run.middle.name} died: {run.middle.stderr_tail(3)}")
        mem = proc_memory_mib(run.middle.pid)
        out["rss_mib"] = round(mem.get("rss_mib", 0.0), 1)
        out["peak_rss_mib"] = round(mem.get("peak_rss_mib", 0.0), 1)
        if samples:
            out["max_pending"] = max(v for _, v in samples)
            out["final_pending"] = samples[-1][1]
            out["samples"] = samples[:: max(1, len(samples) // 60)]
            try:
                series = prometheus.parse(prometheus.scrape(address, 2.0))
                out["counters"] = {prometheus.series_name(k): v for k, v in series.items()
                                   if k[0].startswith(("gateway_dropped", "gateway_forwarded",
                                                       "gateway_token"))}
            except (OSError, ValueError):
                pass
            if out.get("limit") is not None:
                out["bounded"] = out["max_pending"] <= out["limit"]
    except (Unavailable, ValueError, KeyError) as exc:
        out["reason"] = str(exc)
    finally:
        teardown(run)
    log(settings, f"flood {route.name}: sent {out.get('sent')}, max pending "
                  f"{out.get('max_pending')}, limit {out.get('limit')}")
    return out
