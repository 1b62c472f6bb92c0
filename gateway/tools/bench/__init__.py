"""``gateway bench``: latency and throughput side by side with libzmq, nng and ``zmq.proxy``.

Every peer and every proxy runs in its own process; all routes are measured in one run,
interleaved in rounds (docs/design.md, "Benchmarks"). Routes whose software is missing are reported as
unavailable with the reason. Output: a table on stdout, ``--json FILE``, ``--png FILE``.

    python -m gateway bench --quick --routes library
    python -m gateway bench --json out/bench.json --png out/bench.png --memory
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from gateway.tools.bench.runner import SWEEP_ROUTES

QUICK = {"requests": 300, "tput_requests": 600, "rounds": 2, "warmup": 30, "clients": 100,
         "flood": 3000, "flood_time": 5.0, "flood_ttl": 2.0, "sweep": (1, 10, 50),
         "sweep_requests": 200}
FULL = {"requests": 10000, "tput_requests": 20000, "rounds": 10, "warmup": 200, "clients": 1000,
        "flood": 50000, "flood_time": 20.0, "flood_ttl": 5.0, "sweep": (1, 100, 1000),
        "sweep_requests": 20000}
MEMORY_TARGETS = ("zmq-proxy", "gw-zmq-zmq-lib", "gw-zmq-sp-lib", "gw-zmq-zmq-native",
                  "gw-zmq-sp-native")
FLOOD_TARGETS = ("gw-zmq-sp-lib", "gw-zmq-sp-native")


def _windows(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None
    if not vals or any(v < 1 or v > 1024 for v in vals):
        raise argparse.ArgumentTypeError("windows must be 1..1024")
    return vals


def _sweep(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None
    if any(v < 1 or v > 5000 for v in vals):
        raise argparse.ArgumentTypeError("clients must be 1..5000")
    return vals


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return v

    return parse


def _count(group: Any, flag: str, **options: Any) -> None:
    """An option whose value is a count N (a positive integer)."""
    group.add_argument(flag, type=_positive(int), metavar="N", **options)


def configure_parser(p: argparse.ArgumentParser) -> None:
    """Add the ``gateway bench`` options to ``p``."""
    p.description = (__doc__ or "").split("\n\n")[0].replace("``", "")
    pint, pfloat = _positive(int), _positive(float)
    g = p.add_argument_group("what to measure")
    g.add_argument("--routes", metavar="LIST",
                   help="comma list of route names, globs (gw-*-lib) or groups (library, "
                        "native, gateway, stream, security, cpeers, real, dealers, all); '-name' "
                        "excludes. "
                        "Default: "
                        "library, native, gateway and stream; 'stream' drives zmq.proxy, "
                        "nng_device and the native gateway with byte-stream clients that are "
                        "never the bottleneck (issue 13's ratios); 'security' runs CURVE and "
                        "TLS fronts beside their plain routes and libzmq's own CURVE through "
                        "zmq.proxy; 'cpeers' drives them with C load peers built with gcc "
                        "against libzmq (SP peers on plain sockets), beside the direct C "
                        "ceilings (issue 22); 'real' drives them with C peers shaped as "
                        "applications write them (a libzmq DEALER and ROUTER echo, 64 nng req0 "
                        "sockets, an nng rep0 server with one context per worker), beside each "
                        "server's direct ceiling and the idealised SP echo, and reports "
                        "messages per read and CPU per wake-up (issue 36); 'dealers' adds "
                        "libzmq clients of one DEALER per request in flight. See --list")
    g.add_argument("--list", action="store_true", help="list the routes and exit")
    g.add_argument("--quick", action="store_true",
                   help="small counts (seconds, for make demo and tests)")
    _count(g, "--requests",
           help="latency round trips per route, over all rounds (default 10000; "
                "quick 300)")
    _count(g, "--tput-requests",
           help="requests per route per in-flight window (default 20000; quick 600)")
    g.add_argument("--windows", type=_windows, default=(8, 64), metavar="LIST",
                   help="requests in flight for throughput (default 8,64)")
    _count(g, "--rounds", help="interleaved rounds (default 10; quick 2)")
    g.add_argument("--size", type=pint, default=100, metavar="BYTES",
                   help="request body size (default 100)")
    g.add_argument("--warmup", type=int, metavar="N",
                   help="unrecorded round trips before each latency slice (default 200)")
    g.add_argument("--sweep", type=_sweep, metavar="LIST",
                   help="clients sweep, after the rounds: concurrent clients per point, each "
                        "with its own connection and one request in flight; p50/p99 round "
                        "trip and the middle's CPU per request (default 1,100,1000; quick "
                        "1,10,50; '' for none). Routes: " + ", ".join(SWEEP_ROUTES))
    _count(g, "--sweep-requests",
           help="timed round trips per sweep point, at least 5 per client (default "
                "20000; quick 200)")
    w = p.add_argument_group("workers check")
    w.add_argument("--workers-check", type=_sweep, metavar="LIST",
                   help="also run one route through `gateway bridge --workers N` for each N "
                        "(e.g. 1,2): throughput, p50/p99 and the gateway's CPU (all workers)")
    w.add_argument("--workers-route", default="gw-zmq-zmq-native", metavar="NAME",
                   help="the route of the workers check (default gw-zmq-zmq-native; a "
                        "stream route, e.g. gw-zmq-sp-stream, uses byte-stream connections, "
                        "the cheapest clients the bench has)")
    _count(w, "--workers-clients", default=64,
           help="client connections, one request in flight each (default 64)")
    _count(w, "--workers-requests",
           help="timed round trips per N per round (default 20000; quick 300)")
    pg = p.add_argument_group("pub/sub fan-out and pipeline (gateway.tools.bench.patterns)")
    pg.add_argument("--patterns", action="store_true",
                    help="also run pub/sub fan-out and pipeline throughput against zmq.proxy "
                         "and an nng device")
    pg.add_argument("--patterns-only", action="store_true",
                    help="only the pub/sub fan-out and pipeline benchmarks")
    pg.add_argument("--subscribers", type=_windows, metavar="LIST",
                    help="fan-out subscriber counts (default 1,10,100; quick 1,10)")
    _count(pg, "--messages",
           help="messages published / pushed per measurement (default 20000; "
                "quick 2000)")
    _count(pg, "--pattern-rounds",
           help="measure each fan-out and pipeline route N times, the routes interleaved; "
                "a row is the median, with the median and range of each round's ratio to "
                "zmq.proxy (default 1)")
    pg.add_argument("--pattern-routes", metavar="LIST",
                    help="comma list of the fan-out and pipeline routes to run (their own "
                         "names, e.g. zmq-proxy-c,zmq-direct-c,gw-sp-zmq-c; default: all)")
    m = p.add_argument_group("memory checks")
    m.add_argument("--memory", action="store_true",
                   help="also run the memory checks: idle clients and a reply-less flood")
    m.add_argument("--memory-only", action="store_true", help="only the memory checks")
    _count(m, "--clients",
           help="idle zmq clients connected to the middle (default 1000; quick 100)")
    _count(m, "--flood", help="reply-less requests in the flood (default 50000; quick 3000)")
    _count(m, "--flood-limit", default=10000,
           help="--pending-tokens given to the flooded bridge (default 10000)")
    m.add_argument("--flood-ttl", type=pfloat, metavar="S",
                   help="--token-ttl given to the flooded bridge (default 5; quick 2)")
    m.add_argument("--flood-time", type=pfloat, metavar="S",
                   help="time bound of the flood (default 20 s; quick 5)")
    o = p.add_argument_group("output and limits")
    o.add_argument("--json", metavar="FILE", help="write every figure as JSON")
    o.add_argument("--png", metavar="FILE", help="write a bar chart (matplotlib, Agg)")
    o.add_argument("--bridge-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for every `gateway bridge` (repeat; e.g. "
                        "--bridge-arg=--log-level=warning)")
    o.add_argument("--slice-timeout", type=pfloat, default=60.0, metavar="S",
                   help="time bound of one measurement slice (default 60)")
    o.add_argument("--ready-timeout", type=pfloat, default=30.0, metavar="S",
                   help="time for a process to report READY (default 30)")
    o.add_argument("--max-time", type=pfloat, default=1800.0, metavar="S",
                   help="no new slice starts after this many seconds (default 1800)")
    o.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _get(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    return getattr(args, name, default)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args`` (from ``configure_parser``). Exit status."""
    from gateway.tools.bench import chart, report
    from gateway.tools.bench.routes import ROUTES, select
    from gateway.tools.bench.runner import Settings, log, run_routes

    if _get(args, "list"):
        for r in ROUTES:
            print(f"{r.name:<20} {r.group:<8} {r.description}")
        return 0
    base = QUICK if _get(args, "quick") else FULL

    def opt(name: str) -> Any:
        v = _get(args, name)
        return base[name] if v is None else v

    try:
        routes = select(_get(args, "routes"))
        _pattern_routes(args)  # (checked before anything runs)
    except ValueError as exc:
        print(f"gateway bench: {exc}", file=sys.stderr)
        return 2
    windows = tuple(_get(args, "windows") or (8, 64))
    settings = Settings(
        requests=opt("requests"), tput_requests=opt("tput_requests"), windows=windows,
        rounds=opt("rounds"), size=_get(args, "size") or 100, warmup=opt("warmup"),
        slice_timeout=_get(args, "slice_timeout") or 60.0,
        ready_timeout=_get(args, "ready_timeout") or 30.0,
        max_time=_get(args, "max_time") or 1800.0,
        bridge_args=tuple(_get(args, "bridge_arg") or ()), verbose=not _get(args, "quiet"),
        sweep=tuple(opt("sweep")), sweep_requests=opt("sweep_requests"))
    t0 = time.monotonic()
    from gateway.tools.bench.real import loadavg

    load0 = loadavg()
    if _get(args, "patterns_only"):
        return run_patterns(args, settings.verbose)
    memory_only = bool(_get(args, "memory_only"))
    runs = [] if memory_only else run_routes(routes, settings)
    kernel_cost = None
    if not memory_only and any(r.cpu_ref for r in routes):  # the real group: its floor's floor
        from gateway.tools.bench.kernel import measure

        kernel_cost = measure(settings.size, 20000 if _get(args, "quick") else 200000)
    memory = None
    if memory_only or _get(args, "memory"):
        memory = run_memory(routes if _get(args, "routes") else ROUTES, settings, args, opt)
    scale = None
    if _get(args, "workers_check"):
        from gateway.tools.bench.scale import workers_check

        name = _get(args, "workers_route") or "gw-zmq-zmq-native"
        try:  # one route by its name (select brings a stream route's reference along)
            [route] = [r for r in select(name) if r.name == name] or select(name)
        except ValueError as exc:
            print(f"gateway bench: --workers-route: {exc}", file=sys.stderr)
            return 2
        scale = workers_check(route, settings, tuple(args.workers_check),
                              _get(args, "workers_clients") or 64,
                              _get(args, "workers_requests") or (300 if _get(args, "quick")
                                                                 else 20000))
    args_record = {k: v for k, v in vars(args).items()
                   if not callable(v) and k not in ("command", "func")}
    result = report.build(runs, settings, args_record, memory, time.monotonic() - t0)
    result["meta"]["loadavg"] = {"start": load0, "end": loadavg()}
    if kernel_cost is not None:
        result["kernel_hop"] = kernel_cost
    if scale is not None:
        result["workers_check"] = scale
    unwritten = False
    if _get(args, "json"):  # first: the figures survive whatever happens next
        try:
            report.write_json(result, args.json)
            log(settings, f"wrote {args.json}")
        except OSError as exc:
            print(f"gateway bench: cannot write {args.json}: {exc.strerror or exc}",
                  file=sys.stderr)
            unwritten = True
    print(report.table(result))
    if _get(args, "png"):
        try:
            why = chart.write_png(result, args.png)
        except OSError as exc:
            why = f"cannot write {args.png}: {exc.strerror or exc}"
        if why:
            print(f"gateway bench: no PNG: {why}", file=sys.stderr)
            unwritten = True
        else:
            log(settings, f"wrote {args.png}")
    measured = any("latency" in f for f in result["routes"].values()) or (
        scale is not None and "reason" not in scale)
    if _get(args, "patterns") and run_patterns(args, settings.verbose):
        return 1
    return 0 if (measured or memory_only) and not unwritten else 1


def _pattern_routes(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The fan-out and pipeline routes ``--pattern-routes`` names (None: all of them);
    ValueError for it or ``--pattern-rounds`` without ``--patterns``/``--patterns-only``."""
    patterns = _get(args, "patterns") or _get(args, "patterns_only")
    if _get(args, "pattern_rounds") is not None and not patterns:
        raise ValueError("--pattern-rounds: only with --patterns or --patterns-only")
    given = _get(args, "pattern_routes")
    if given is None:
        return None
    if not patterns:
        raise ValueError("--pattern-routes: only with --patterns or --patterns-only")
    from gateway.tools.bench.patterns import FANOUT_ROUTES

    routes = tuple(n.strip() for n in given.split(",") if n.strip())
    known = [r[0] for r in FANOUT_ROUTES]
    unknown = [n for n in routes if n not in known]
    if unknown or not routes:
        raise ValueError(f"--pattern-routes: unknown route(s) {', '.join(unknown) or '(none)'}; "
                         f"known: {', '.join(known)}")
    return routes


def run_patterns(args: argparse.Namespace, verbose: bool) -> int:
    """The fan-out and pipeline benchmarks (``--patterns``): a table on stdout and, with
    ``--json FILE``, ``FILE`` with ``.patterns.json`` in place of ``.json``. Exit status."""
    import json

    from gateway.tools.bench import patterns

    quick = bool(_get(args, "quick"))
    try:
        routes = _pattern_routes(args)
    except ValueError as exc:
        print(f"gateway bench: {exc}", file=sys.stderr)
        return 2
    settings = patterns.PatternSettings(
        n=_get(args, "messages") or (2000 if quick else 20000),
        subscribers=tuple(_get(args, "subscribers") or ((1, 10) if quick else (1, 10, 100))),
        timeout=_get(args, "slice_timeout") or 60.0,
        ready_timeout=_get(args, "ready_timeout") or 30.0,
        rounds=_get(args, "pattern_rounds") or 1, verbose=verbose)
    result = patterns.run(settings, routes)
    print(patterns.table(result))
    out = _get(args, "json")
    if out:
        path = out[:-5] + ".patterns.json" if out.endswith(".json") else out + ".patterns.json"
        try:
            with open(path, "w") as fh:
                json.dump(result, fh, indent=1)
        except OSError as exc:
            print(f"gateway bench: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    rows = result["fanout"] + result["pipeline"]
    return 0 if any("msgs_per_s" in r for r in rows) else 1


def run_memory(routes: list[Any], settings: Any, args: argparse.Namespace,
               opt: Any) -> dict[str, Any]:
    from gateway.tools.bench.memory import flood_check, idle_check
    from gateway.tools.bench.procs import gateway_cli_problem
    from gateway.tools.bench.runner import log

    by_name = {r.name: r for r in routes}
    problem = None
    if any(n.startswith("gw-") and n in by_name for n in MEMORY_TARGETS):
        problem = gateway_cli_problem()
    out: dict[str, Any] = {"idle": {}, "flood": {}}
    for name in MEMORY_TARGETS:
        route = by_name.get(name)
        if route is None:
            continue
        if route.middle == "bridge" and problem:
            out["idle"][name] = {"clients": opt("clients"), "reason": problem}
            continue
        log(settings, f"memory: {opt('clients')} idle clients on {name}")
        out["idle"][name] = idle_check(route, settings, opt("clients"),
                                       timeout=max(60.0, settings.slice_timeout))
    for name in FLOOD_TARGETS:
        route = by_name.get(name)
        if route is None:
            continue
        if problem:
            out["flood"][name] = {"reason": problem}
            continue
        log(settings, f"memory: flood of {opt('flood')} reply-less requests on {name}")
        out["flood"][name] = flood_check(route, settings, opt("flood"),
                                         limit=_get(args, "flood_limit") or 10000,
                                         ttl=opt("flood_ttl"), duration=opt("flood_time"))
    return out


__all__ = ["configure_parser", "run"]
