"""Figures, derived ratios, goals (issues 5 and 13), and the three outputs: table, JSON, PNG.

Hop definitions (the cost one middle process adds to a round trip, at p50; "direct" = the library
client straight to the same echo server the middle forwards to: ``zmq-echo-direct``,
``sp-echo-direct``; ``zmq-direct`` / ``nng-direct`` when those were not measured):
- same family: ``hop = route p50 - direct p50 of that family`` (zmq direct for zmq->zmq,
  ``zmq.proxy``; SP direct for sp->sp, ``nng_device``);
- cross family (zmq->sp, sp->zmq): ``hop = route p50 - (zmq direct p50 + SP direct p50) / 2``.
  A cross round trip has one zmq leg (client <-> gateway) and one SP leg (gateway <-> server);
  a direct round trip of either family has two legs of that family, so the mean of the two direct
  round trips is the cost of one leg of each: what the route would cost with a free middle.
"""

from __future__ import annotations

import json
import math
import os
import platform
from pathlib import Path
from typing import Any

from gateway.tools.bench import real
from gateway.tools.bench.kernel import kernel_lines
from gateway.tools.bench.routes import REAL_GROUPS
from gateway.tools.bench.runner import RouteRun
from gateway.tools.bench.versus import cpeers as _cpeers
from gateway.tools.bench.versus import fmt as _fmt
from gateway.tools.bench.versus import group_lines
from gateway.tools.bench.versus import median as _median
from gateway.tools.bench.versus import p50 as _p50
from gateway.tools.bench.versus import r as _r
from gateway.tools.bench.versus import ratio as _ratio
from gateway.tools.bench.versus import round_p50s as _round_p50s_of
from gateway.tools.bench.versus import rps as _rps
from gateway.tools.bench.versus import security as _security
from gateway.tools.bench.versus import stream as _stream

GOAL_HOP_SAME = 1.5
GOAL_HOP_STRETCH = 1.0
GOAL_HOP_CROSS = 2.0
GOAL_TPUT = 0.5
GOAL_NATIVE = 1.5
GOAL_RSS_MIB = 80.0
# issue 13, from the ``stream`` routes (the middles' own ceilings; ratios to zmq-proxy-stream)
GOAL_TPUT_PROXY = 1.0  # throughput at the largest window, zmq->zmq, zmq->sp, sp->zmq
GOAL_CPU_SAME = 1.0  # the middle's CPU per request, zmq->zmq
GOAL_CPU_CROSS = 1.2  # the same, zmq->sp and sp->zmq
GOAL_HOP_NATIVE = 1.1  # hop / zmq.proxy hop at p50, every native route (library clients)
#: A ratio goal gets no verdict when its per-round values spread wider than this, relative to
#: their median: the rounds disagree, the machine was too noisy for a verdict.
SPREAD_TOLERANCE = 0.5
MIDDLE_KIND = {"zmq-proxy": "zmq.proxy", "nng-device": "nng_device", "bridge": "gateway",
               "floor": "C floor relay"}


def percentile(sorted_values: list[int], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return math.nan
    k = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return float(sorted_values[k])


def route_figures(run: RouteRun) -> dict[str, Any]:
    route = run.route
    out: dict[str, Any] = {
        "name": route.name, "group": route.group, "description": route.description,
        "status": run.status, "reason": run.reason or None,
        "front": route.front, "back": route.back, "backend": route.backend or None,
        "middle": MIDDLE_KIND.get(route.middle or "", None), "baseline": route.baseline,
        "rounds": run.rounds_done,
    }
    if route.security:
        out["security"], out["plain"] = route.security, route.plain
    s = sorted(run.samples_ns)
    if s:
        out["latency"] = {
            "n": len(s),
            "p50_us": _r(percentile(s, 50) / 1e3), "p90_us": _r(percentile(s, 90) / 1e3),
            "p99_us": _r(percentile(s, 99) / 1e3), "min_us": _r(s[0] / 1e3),
            "max_us": _r(s[-1] / 1e3), "mean_us": _r(sum(s) / len(s) / 1e3),
            "rps_1": _r(len(s) / run.lat_elapsed if run.lat_elapsed else None, 0),
        }
    tput = {}
    for window, (n, elapsed) in sorted(run.tput.items()):
        if n and elapsed:
            tput[str(window)] = {"n": int(n), "elapsed_s": _r(elapsed, 3), "rps": _r(n / elapsed, 0)}
    if tput:
        out["throughput"] = tput
    if run.round_p50_us or run.round_rps:
        out["per_round"] = {"p50_us": run.round_p50_us,
                            **{f"rps_{w}": v for w, v in sorted(run.round_rps.items())}}
    if route.middle is not None:
        cpu_total = sum(run.cpu.values())
        reqs_total = sum(run.reqs.values())
        mid: dict[str, Any] = {"kind": MIDDLE_KIND[route.middle]}
        if run.cpu:
            mid["cpu_s"] = _r(cpu_total, 3)
            mid["cpu_us_per_req"] = _r(cpu_total / reqs_total * 1e6 if reqs_total else None)
            for window, (n, elapsed) in run.tput.items():
                c = run.cpu.get(f"tput{window}")
                if c is not None and elapsed:
                    mid[f"cpu_pct_{window}"] = _r(100 * c / elapsed)
                if c is not None and n:
                    mid[f"cpu_us_per_req_{window}"] = _r(c / n * 1e6)
            for phase, (reads, writes) in run.syscalls.items():
                n_phase = run.reqs.get(phase)
                if n_phase:
                    key = "1" if phase == "lat" else phase.removeprefix("tput")
                    # read/write system calls per request (both sides, both directions)
                    mid[f"syscalls_per_req_{key}"] = [_r(reads / n_phase, 2),
                                                      _r(writes / n_phase, 2)]
            lat_cpu, lat_n = run.cpu.get("lat"), run.reqs.get("lat")
            if lat_cpu is not None and lat_n:
                mid["cpu_us_per_req_1"] = _r(lat_cpu / lat_n * 1e6)
        mid.update({k: _r(v) for k, v in run.memory.items()})
        out["middle_process"] = mid
    if run.server_cpu:
        srv_cpu, srv_n = sum(run.server_cpu.values()), sum(run.reqs.values())
        srv: dict[str, Any] = {"role": route.server, "cpu_s": _r(srv_cpu, 3)}
        if srv_n and srv_cpu > 0:
            # one request costs the server this much CPU: its ceiling on one core
            srv["cpu_us_per_req"] = _r(srv_cpu / srv_n * 1e6)
            srv["ceiling_rps_one_core"] = _r(srv_n / srv_cpu, 0)
        out["server_process"] = srv
    if run.client_cpu:  # the C clients: CPU per request and cores busy while they drive
        cli: dict[str, Any] = {"role": route.client}
        for window, c in sorted(run.client_cpu.items()):
            n, elapsed = run.tput.get(window, (0, 0.0))
            cli[f"cpu_us_per_req_{window}"] = _r(c / n * 1e6) if n else None
            cli[f"cores_{window}"] = _r(c / elapsed, 2) if elapsed else None
        out["client_process"] = cli
    if run.sweep:
        out["sweep"] = {str(k): v for k, v in sorted(run.sweep.items())}
    if route.group in REAL_GROUPS:
        out.update(real.route_record(run))
    return out


def _round_p50s(figs: dict[str, dict[str, Any]], name: str) -> list[float]:
    return _round_p50s_of(figs.get(name))


def baselines(figs: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """The (zmq, SP) direct routes hops are measured against: the echo servers' own direct
    routes when measured (the servers behind every middle), else the library REQ/REP ones."""
    z = "zmq-echo-direct" if _p50(figs.get("zmq-echo-direct")) is not None else "zmq-direct"
    n = "sp-echo-direct" if _p50(figs.get("sp-echo-direct")) is not None else "nng-direct"
    return z, n


def _paired_ratios(figs: dict[str, dict[str, Any]], name: str) -> list[float]:
    """Per round, (route hop / zmq.proxy hop) from the same round's p50s.

    Routes of one round run within seconds of each other, so this pairs up the noise; the
    median is a robustness check next to the pooled ratio, the spread says whether the rounds
    agree enough for a verdict."""
    fig = figs[name]
    z, n, p, r = (_round_p50s(figs, k) for k in (*baselines(figs), "zmq-proxy", name))
    k = len(r)
    if k == 0 or any(len(x) != k for x in (z, n, p)):
        return []
    ratios = []
    for i in range(k):
        if fig["front"] == fig["back"]:
            b = z[i] if fig["front"] == "zmq" else n[i]
        else:
            b = (z[i] + n[i]) / 2
        ph = p[i] - z[i]
        if ph > 0:
            ratios.append((r[i] - b) / ph)
    return sorted(ratios)


def derive(figs: dict[str, dict[str, Any]], windows: tuple[int, ...]) -> dict[str, Any]:
    zname, nname = baselines(figs)
    z, n = _p50(figs.get(zname)), _p50(figs.get(nname))
    base = {"zmq": z, "sp": n}
    proxy = figs.get("zmq-proxy")
    proxy_p50 = _p50(proxy)
    proxy_hop = proxy_p50 - z if proxy_p50 is not None and z is not None else None
    big = max(windows) if windows else None
    proxy_rps = _rps(proxy, big) if big else None
    hops: dict[str, Any] = {}
    for name, fig in figs.items():
        if fig.get("middle") is None or _p50(fig) is None or fig.get("group") in (
                "stream", "cpeers", *REAL_GROUPS):
            continue  # (these groups have baselines and references of their own)
        if fig["front"] == fig["back"]:
            b = base[fig["front"]]
        else:
            b = (z + n) / 2 if z is not None and n is not None else None
        if b is None:
            continue
        hop = _p50(fig) - b  # type: ignore[operator]
        entry: dict[str, Any] = {"hop_us": _r(hop), "baseline_us": _r(b),
                                 "baseline": fig["baseline"]}
        if proxy_hop and proxy_hop > 0:
            entry["hop_vs_zmq_proxy"] = _r(hop / proxy_hop, 2)
        rounds = _paired_ratios(figs, name)
        if rounds:
            entry["hop_vs_zmq_proxy_median_of_rounds"] = _r(_median(rounds), 2)
            entry["hop_vs_zmq_proxy_rounds"] = [_r(rounds[0], 2), _r(rounds[-1], 2)]
        rps = _rps(fig, big) if big else None
        if rps and proxy_rps:
            entry[f"tput{big}_vs_zmq_proxy"] = _r(rps / proxy_rps, 2)
        hops[name] = entry
    native: dict[str, Any] = {}
    lib = {"zmq": _p50(figs.get("zmq-direct")), "sp": _p50(figs.get("nng-direct"))}
    for name, fam in (("native-zmq", "zmq"), ("native-sp", "sp")):
        p, b = _p50(figs.get(name)), lib[fam]
        if p is not None and b:
            native[name] = {"p50_us": _r(p), "direct_p50_us": _r(b),
                            "vs_library_direct": _r(p / b, 2),
                            "library": "zmq-direct" if fam == "zmq" else "nng-direct"}
    return {"zmq_direct_p50_us": _r(lib["zmq"]), "nng_direct_p50_us": _r(lib["sp"]),
            "security": _security(figs, big), "stream": _stream(figs, big),
            "cpeers": _cpeers(figs, big), "real": real.derive(figs, big),
            "hop_baselines": [zname, nname], "hop_baseline_p50_us": [_r(z), _r(n)],
            "zmq_proxy_hop_us": _r(proxy_hop), f"zmq_proxy_tput{big}_rps": _r(proxy_rps, 0),
            "hops": hops, "native": native}


def goals(derived: dict[str, Any], memory: dict[str, Any] | None,
          windows: tuple[int, ...], full: bool = True) -> list[dict[str, Any]]:
    """The goals with a verdict each: PASS, FAIL, or none (``pass`` None, with ``missing``
    saying why: not measured, a quick run, a ratio noise made non-positive, or rounds that
    disagree beyond :data:`SPREAD_TOLERANCE`)."""
    big = max(windows) if windows else 64
    hops, native = derived["hops"], derived["native"]
    out: list[dict[str, Any]] = []

    def add(goal: str, value: float | None, limit: float | None, le: bool, source: str,
            why_missing: str = "") -> None:
        spread = hops.get(source, {}).get("hop_vs_zmq_proxy_rounds") if "hop" in goal else None
        why = why_missing if value is None else ""
        if value is not None and not full:
            why = "quick run: figures too small for a verdict"
        elif value is not None and value <= 0:
            why = "no verdict: noise made the ratio non-positive"
        elif value is not None and spread and abs(spread[1] - spread[0]) > SPREAD_TOLERANCE * max(
                abs(value), 1e-9):
            why = f"no verdict: the rounds disagree ({spread[0]}..{spread[1]})"
        ok = None if why or limit is None else (value <= limit if le else value >= limit)  # type: ignore[operator]
        out.append({"goal": goal, "value": value, "limit": limit,
                    "op": "<=" if le else ">=", "pass": ok, "source": source,
                    **({"rounds": spread} if spread else {}), **({"missing": why} if why else {})})

    zz = hops.get("gw-zmq-zmq-lib", {})
    add("gateway hop zmq->zmq (library) / zmq.proxy hop, p50", zz.get("hop_vs_zmq_proxy"),
        GOAL_HOP_SAME, True, "gw-zmq-zmq-lib", "route or zmq.proxy not measured")
    add("  stretch: same ratio", zz.get("hop_vs_zmq_proxy"), GOAL_HOP_STRETCH, True,
        "gw-zmq-zmq-lib", "route or zmq.proxy not measured")
    # the gateway's default backends for a zmq -> sp bridge are native (gateway.device.
    # default_backends, chosen by this very measurement); the library figure is shown as well
    zs = hops.get("gw-zmq-sp-native", {})
    add("cross hop zmq client -> nng server (default: native) / zmq.proxy hop, p50",
        zs.get("hop_vs_zmq_proxy"), GOAL_HOP_CROSS, True, "gw-zmq-sp-native",
        "route or zmq.proxy not measured")
    zl = hops.get("gw-zmq-sp-lib", {})
    add("  same, with ?backend=pyzmq / pynng", zl.get("hop_vs_zmq_proxy"), GOAL_HOP_CROSS, True,
        "gw-zmq-sp-lib", "route or zmq.proxy not measured")
    add(f"gateway zmq->zmq (library) throughput x{big} / zmq.proxy's",
        zz.get(f"tput{big}_vs_zmq_proxy"), GOAL_TPUT, False, "gw-zmq-zmq-lib",
        "route or zmq.proxy not measured")
    add("native REQ<->REP zmq+tcp p50 / libzmq direct p50",
        native.get("native-zmq", {}).get("vs_library_direct"), GOAL_NATIVE, True, "native-zmq",
        "native engine or zmq-direct not measured")
    stream = derived.get("stream") or {}
    for route, fam in (("gw-zmq-zmq-stream", "zmq->zmq"), ("gw-zmq-sp-stream", "zmq->sp"),
                       ("gw-sp-zmq-stream", "sp->zmq")):
        if not stream:
            break  # (the stream routes were not asked for)
        e = stream.get(route, {})
        why = "route or zmq-proxy-stream not measured"
        add(f"issue 13: gateway {fam} (native) throughput x{big} / zmq.proxy's, stream clients",
            e.get("tput_vs_reference"), GOAL_TPUT_PROXY, False, route, why)
        add(f"issue 13: gateway {fam} (native) CPU per request x{big} / zmq.proxy's",
            e.get("cpu_vs_reference"), GOAL_CPU_SAME if fam == "zmq->zmq" else GOAL_CPU_CROSS,
            True, route, why)
    for route in ("gw-zmq-zmq-native", "gw-zmq-sp-native", "gw-sp-zmq-native",
                  "gw-sp-sp-native"):
        if route in hops:
            add(f"issue 13: {route} hop / zmq.proxy hop, p50",
                hops[route].get("hop_vs_zmq_proxy"), GOAL_HOP_NATIVE, True, route)
    if memory is not None:
        for name, m in memory.get("idle", {}).items():
            if name.startswith("gw-"):
                add(f"gateway peak RSS with {m.get('clients')} connected clients (MiB), {name}",
                    m.get("peak_rss_mib"), GOAL_RSS_MIB, True, f"memory:{name}",
                    m.get("reason") or "not measured")
        for name, f in memory.get("flood", {}).items():
            limit = f.get("limit")
            add(f"pending tokens under a reply-less flood of {f.get('sent')} (max seen), {name}",
                f.get("max_pending"), float(limit) if limit is not None else None, True,
                f"flood:{name}", f.get("reason") or "gauge gateway_pending_tokens not read")
    return out


def build(runs: list[RouteRun], settings: Any, args: dict[str, Any],
          memory: dict[str, Any] | None, elapsed: float) -> dict[str, Any]:
    figs = {run.route.name: route_figures(run) for run in runs}
    derived = derive(figs, settings.windows)
    try:
        import pynng
        import zmq

        versions = {"pyzmq": zmq.__version__, "libzmq": zmq.zmq_version(),
                    "pynng": getattr(pynng, "__version__", "?")}
    except ImportError:
        versions = {}
    return {
        "meta": {
            "schema": 1, "time": _now(), "elapsed_s": round(elapsed, 1),
            "python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "versions": versions, "args": args,
            "settings": {"requests": settings.requests, "tput_requests": settings.tput_requests,
                         "windows": list(settings.windows), "rounds": settings.rounds,
                         "size": settings.size, "warmup": settings.warmup},
            "hop_definition": (__doc__ or "").split("Hop definitions", 1)[-1].strip(),
        },
        "routes": figs,
        "derived": derived,
        "memory": memory,
        "goals": goals(derived, memory, settings.windows, full=not args.get("quick")),
    }


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def table(result: dict[str, Any]) -> str:
    windows = result["meta"]["settings"]["windows"]
    d = result["derived"]
    head = ["route", "p50 us", "p99 us", "rps x1"] + [f"rps x{w}" for w in windows] + \
           ["hop us", "hop/proxy", "(rounds)", f"x{max(windows) if windows else 0}/proxy",
            "mid CPU us/req", f"mid us/req x{max(windows) if windows else 0}",
            f"mid r+w calls/req x{max(windows) if windows else 0}", "mid peak MiB",
            "srv us/req", "srv ceiling rps"]
    rows: list[list[str]] = []
    notes: list[str] = []
    for name, fig in result["routes"].items():
        if fig["status"] == "unavailable" or "latency" not in fig:
            notes.append(f"  {name}: {fig['status']}: {fig.get('reason') or 'no data'}")
            rows.append([name, fig["status"]] + [""] * (len(head) - 2))
            continue
        lat, tp = fig["latency"], fig.get("throughput", {})
        hop = d["hops"].get(name, {})
        mid = fig.get("middle_process", {})
        big = max(windows) if windows else 0
        rows.append([name, _fmt(lat["p50_us"]), _fmt(lat["p99_us"]), _fmt(lat["rps_1"], 0)]
                    + [_fmt(tp.get(str(w), {}).get("rps"), 0) for w in windows]
                    + [_fmt(hop.get("hop_us")), _fmt(hop.get("hop_vs_zmq_proxy"), 2),
                       _fmt(hop.get("hop_vs_zmq_proxy_median_of_rounds"), 2),
                       _fmt(hop.get(f"tput{big}_vs_zmq_proxy"), 2),
                       _fmt(mid.get("cpu_us_per_req")),
                       _fmt(mid.get(f"cpu_us_per_req_{big}")),
                       "+".join(_fmt(x, 2) for x in mid.get(f"syscalls_per_req_{big}") or [])
                       or "-",
                       _fmt(mid.get("peak_rss_mib")),
                       _fmt(fig.get("server_process", {}).get("cpu_us_per_req")),
                       _fmt(fig.get("server_process", {}).get("ceiling_rps_one_core"), 0)])
        if fig["status"] != "ok":
            notes.append(f"  {name}: {fig['status']}: {fig.get('reason')}")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in
                       enumerate(zip(head, widths, strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                               enumerate(zip(r, widths, strict=True))))
    s = result["meta"]["settings"]
    lines.append(f"({s['size']} B messages; latency: 1 client, {s['requests']} round trips/route; "
                 f"throughput: {s['tput_requests']} requests/route/window; {s['rounds']} "
                 "interleaved rounds; hop = p50 - direct p50, cross family vs the mean of both "
                 "directs; (rounds) = median over rounds of the same ratio from each round's "
                 "p50s; mid/srv us/req = CPU time of the middle / server process per request "
                 "(psutil), srv ceiling = requests per CPU-second of the server; r+w calls = "
                 "read/write system calls (/proc/PID/io: libuv's read/write/writev; libzmq's "
                 "send/recv are not counted, so compare gateway routes only))")
    sec = d.get("security") or {}
    if sec:
        big = max(windows) if windows else 0
        lines.append(f"security (ratios secured / reference: p50, throughput x{big}, middle "
                     "CPU per request):")
        for name, e in sec.items():
            parts = [f"{_fmt(e.get('p50_vs_' + k), 2)} / {_fmt(e.get(f'tput{big}_vs_' + k), 2)}"
                     f" / {_fmt(e.get('cpu_vs_' + k), 2)} vs {e[k]}"
                     for k in ("plain", "libzmq_curve") if e.get(k)]
            lines.append(f"  {name:<18} {e['security']:<5} " + "; ".join(parts))
    lines.extend(group_lines(d))
    lines.extend(real.lines(d.get("real") or {}))
    lines.extend(kernel_lines(result.get("kernel_hop"), d.get("real") or {}))
    lines.extend(real.load_line(result["meta"].get("loadavg")))
    sweeps = [(n, f["sweep"]) for n, f in result["routes"].items() if f.get("sweep")]
    if sweeps:
        lines.append("clients sweep (each client: its own connection, one request in flight):")
        for name, sw in sweeps:
            for k, p in sw.items():
                if p.get("error"):
                    lines.append(f"  {name:<20} x{k:>5}: error: {p['error']}")
                    continue
                lines.append(f"  {name:<20} x{k:>5}: p50 {_fmt(p.get('p50_us'))} us, p99 "
                             f"{_fmt(p.get('p99_us'))} us, p99/p50 "
                             f"{_fmt(_ratio(p.get('p99_us'), p.get('p50_us')), 1)}, "
                             f"{_fmt(p.get('rps'), 0)} req/s, mid CPU "
                             f"{_fmt(p.get('mid_cpu_us_per_req'))} us/req, cores busy: mid "
                             f"{_fmt(p.get('mid_cores'), 2)} client {_fmt(p.get('client_cores'), 2)}"
                             f", mid read+write calls/req {_fmt(p.get('mid_reads_per_req'), 2)}+"
                             f"{_fmt(p.get('mid_writes_per_req'), 2)}"
                             f" ({p.get('n')} round "
                             f"trips, {p.get('client')} clients"
                             f"{', TIMED OUT' if p.get('timed_out') else ''})")
    if notes:
        lines.append("not measured:")
        lines.extend(notes)
    mem = result.get("memory")
    if mem:
        lines.append("memory:")
        for name, m in mem.get("idle", {}).items():
            if m.get("reason"):
                lines.append(f"  {name}: idle clients: unavailable: {m['reason']}")
            else:
                lines.append(f"  {name}: {m['connected']}/{m['clients']} idle zmq clients "
                             f"connected; middle RSS {_fmt(m.get('rss_before_mib'))} -> "
                             f"{_fmt(m.get('rss_mib'))} MiB, peak {_fmt(m.get('peak_rss_mib'))} MiB")
        for name, f in mem.get("flood", {}).items():
            if f.get("reason"):
                lines.append(f"  {name}: flood: {f['reason']}")
            if f.get("sent") is not None:
                lines.append(f"  {name}: flood of {f['sent']} reply-less requests: pending "
                             f"tokens max {_fmt(f.get('max_pending'), 0)} (limit "
                             f"{_fmt(f.get('limit'))}, ttl {_fmt(f.get('ttl_s'))} s), last "
                             f"{_fmt(f.get('final_pending'), 0)}; peak RSS "
                             f"{_fmt(f.get('peak_rss_mib'))} MiB; counters "
                             f"{f.get('counters') or {}}")
    wc = result.get("workers_check")
    if wc:
        lines.append(f"workers check: {wc['route']}, {wc['clients']} client connections "
                     f"(one request in flight each), {wc['requests_per_round']} round trips per "
                     f"round; gateway CPU = parent + workers (psutil):")
        if wc.get("reason"):
            lines.append(f"  unavailable: {wc['reason']}")
        for n, f in wc.get("workers", {}).items():
            lines.append(f"  --workers {n}: {_fmt(f.get('rps'), 0)} req/s (rounds "
                         f"{f.get('rps_rounds')}), p50 {f.get('p50_us_rounds')} us, p99 "
                         f"{f.get('p99_us_rounds')} us, gateway CPU "
                         f"{_fmt(f.get('mid_cpu_us_per_req'))} us/req, "
                         f"{_fmt(f.get('mid_cores'), 2)} cores busy; cores busy per round: "
                         f"gateway {f.get('mid_cores_rounds')}, client "
                         f"{f.get('client_cores_rounds')}, server {f.get('server_cores_rounds')}")
        for k, v in wc.items():
            if k.startswith("ratio_"):
                lines.append(f"  throughput {k.removeprefix('ratio_').replace('_', ' ')}: "
                             f"{_fmt(v, 2)}x (clients, server and workers share "
                             f"{result['meta']['cpus']} cores)")
    if result.get("goals"):
        lines.append("goals (issue 5; issue 13 where it says so):")
        for g in result["goals"]:
            mark = {True: "PASS", False: "FAIL", None: "n/a "}[g["pass"]]
            val = _fmt(g["value"], 2) if g["value"] is not None else "-"
            rounds = f" (rounds {g['rounds'][0]}..{g['rounds'][1]})" if g.get("rounds") else ""
            why = f"; {g['missing']}" if g.get("missing") else ""
            lines.append(f"  [{mark}] {g['goal']}: {val}{rounds} {g['op']} "
                         f"{_fmt(g['limit'], 2)}{why}")
    return "\n".join(lines)


def write_json(result: dict[str, Any], path: str) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(result, indent=2, allow_nan=False, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and math.isnan(o):
        return None
    return str(o)
