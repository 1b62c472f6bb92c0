"""``gateway bench --patterns``: pub/sub fan-out and pipeline throughput through the gateway,
side by side with libzmq's ``zmq.proxy`` (XSUB/XPUB, PULL/PUSH) and an nng device (raw
sockets, ``nng_device``), as ratios against ``zmq.proxy`` in one run.

Every peer is its own process (``gateway.tools.bench.peer`` roles ``pattern-*``; on the routes
whose name ends in ``-c``, the C peers ``c/zmq_patterns.c`` and ``c/nng_patterns.c``, issue 22,
with their own ``zmq-proxy-c`` reference); the middles are ``zmq.proxy``, ``nng_device`` or
``python -m gateway bridge ...?pattern=``.

* fan-out: one publisher (binds), the middle dials it, ``S`` subscribers (1, 10, 100; one
  process polling them all) dial the middle. The publisher first sends ``w.`` messages for a
  second (subscriptions settle), then ``n`` ``d.`` messages as fast as it can, then ``END``.
  Figure: ``d.`` messages delivered to all subscribers per second (first to last arrival), and
  the fraction of ``n x S`` delivered (pub/sub drops at every high-water mark on the way).
* pipeline: a PULL server (binds), the middle dials it, a PUSH client dials the middle and
  sends ``n`` messages (blocking sends: back-pressure). Figure: messages per second at the PULL.

Both figures are over the longer of the receivers' span (first to last message) and the
sender's (publishing, pushing): a middle that reads ahead into its queues and then delivers in
a burst is not credited with the burst.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.tools.bench import cpeers
from gateway.tools.bench.procs import Child, Proc, Unavailable, start_bridge, tcp_address
from gateway.tools.bench.versus import median

#: (name, publisher/puller wire, subscriber/pusher wire, middle); a gateway route's name ends
#: in its backends: ``native`` (the engine, the default) or ``lib`` (pyzmq/pynng adapters)
FANOUT_ROUTES = (
    ("zmq-proxy", "zmq", "zmq", "proxy"),
    ("nng-device", "sp", "sp", "device"),
    ("gw-zmq-zmq-native", "zmq", "zmq", "gateway"),
    ("gw-zmq-sp-native", "zmq", "sp", "gateway"),
    ("gw-sp-zmq-native", "sp", "zmq", "gateway"),
    ("gw-zmq-sp-lib", "zmq", "sp", "gateway"),
    ("gw-sp-zmq-lib", "sp", "zmq", "gateway"),
    # the same middles with C peers (a C publisher or pusher, C subscribers or puller), and
    # the C peers straight to each other: each wire's ceiling
    ("zmq-direct-c", "zmq", "zmq", "direct"),
    ("sp-direct-c", "sp", "sp", "direct"),
    ("nng-direct-c", "sp", "sp", "direct"),  # nng's own C peers: see cpeers.pattern_peer
    ("zmq-proxy-c", "zmq", "zmq", "proxy"),
    ("nng-device-c", "sp", "sp", "device"),
    ("gw-zmq-zmq-c", "zmq", "zmq", "gateway"),
    ("gw-zmq-sp-c", "zmq", "sp", "gateway"),
    ("gw-sp-zmq-c", "sp", "zmq", "gateway"),
)
_LIB = {"zmq": "pyzmq", "sp": "pynng"}
PIPELINE_ROUTES = FANOUT_ROUTES  # (name, PULL server wire, PUSH client wire, middle)


@dataclass
class PatternSettings:
    n: int = 20000  # messages the publisher / pusher sends per measurement
    size: int = 100
    subscribers: tuple[int, ...] = (1, 10, 100)
    timeout: float = 60.0
    ready_timeout: float = 30.0
    #: every queue on the path (libzmq HWMs, nng buffers up to 8192, the gateway's ?hwm=): a
    #: throughput figure, not a drop count (0: ``n``, so only nng's fixed queues drop)
    hwm: int = 0
    #: each route measured this many times, the routes interleaved (round 1: every route,
    #: then round 2...); a row is the route's median, its ratio also the median of each
    #: round's ratio to the same round's zmq.proxy (the subscribers' speed drifts between
    #: moments on a small machine: one sample per route cannot tell 0.9x from 1.1x)
    rounds: int = 1
    verbose: bool = True


def _log(settings: PatternSettings, text: str) -> None:
    if settings.verbose:
        import sys

        print(f"[bench patterns] {text}", file=sys.stderr, flush=True)


def _peer(route: str, name: str, role: str, wire: str, **cfg: Any) -> Proc:
    """A ``pattern-*`` peer: in C on a ``-c`` route, else the Python one."""
    if route.endswith("-c"):
        return cpeers.pattern_peer(name, role, wire, nng=route == "nng-direct-c", **cfg)
    return Proc.peer(name, role, wire=wire, **cfg)


def _middle(name: str, pattern: str, middle: str, upstream: str, up_wire: str, down_wire: str,
            settings: PatternSettings, procs: list[Child], hwm: int) -> str:
    """Start the middle dialling ``upstream``; return the URL the other side dials (no middle:
    ``upstream`` itself)."""
    if middle == "direct":
        return upstream
    if middle == "gateway":
        lib = name.endswith("-lib")
        fb, bb = (_LIB[down_wire], _LIB[up_wire]) if lib else ("native", "native")
        front = f"@{down_wire}+tcp://127.0.0.1:0?pattern={pattern}&hwm={hwm}&backend={fb}"
        back = f">{up_wire}+{upstream}?hwm={hwm}&backend={bb}"
        bridge = start_bridge(f"{name}/bridge", front, back, ["--log-format", "json"],
                              settings.ready_timeout)
        procs.append(bridge)
        return tcp_address(bridge.front)
    role = "pattern-proxy" if middle == "proxy" else "pattern-device"
    proc = Proc.peer(f"{name}/{middle}", role, pattern=pattern, upstream=upstream, hwm=hwm)
    procs.append(proc)
    return str(proc.wait_ready(settings.ready_timeout)["url"])


def fanout(route: tuple[str, str, str, str], subs: int, settings: PatternSettings) -> dict[str, Any]:
    name, pub_wire, sub_wire, middle = route
    procs: list[Child] = []
    try:
        hwm = settings.hwm or settings.n
        pub = _peer(name, f"{name}/pub", "pattern-pub", pub_wire, hwm=hwm)
        procs.append(pub)
        url = str(pub.wait_ready(settings.ready_timeout)["url"])
        front = _middle(name, "pubsub", middle, url, pub_wire, sub_wire, settings, procs, hwm)
        sub = _peer(name, f"{name}/subs", "pattern-subs", sub_wire, url=front, count=subs,
                    hwm=hwm)
        procs.append(sub)
        sub.wait_ready(settings.ready_timeout)
        sub.send(op="collect", timeout=settings.timeout)
        pub.send(op="go", n=settings.n, size=settings.size, warm=1.0)
        sent = pub.result(settings.timeout + 30)
        got = sub.result(settings.timeout + 30)
        # over the longer of the subscribers' span and the publishing: a middle that queues
        # what it reads delivers in a burst, faster than anything was published
        span = max(got["elapsed"], sent["elapsed"])
        rate = got["received"] / span if got["received"] else 0.0
        return {"route": name, "subscribers": subs, "delivered": got["received"],
                "fraction": got["received"] / (settings.n * subs), "msgs_per_s": rate,
                "publish_s": sent["elapsed"], "complete": got["complete"]}
    except Unavailable as exc:
        return {"route": name, "subscribers": subs, "error": str(exc)}
    finally:
        for p in reversed(procs):
            p.stop(1.0)


def pipeline(route: tuple[str, str, str, str], settings: PatternSettings) -> dict[str, Any]:
    """Back-pressure is the point here: the queues keep their default size (``hwm`` or 1000)."""
    name, pull_wire, push_wire, middle = route
    procs: list[Child] = []
    try:
        hwm = settings.hwm or 1000
        pull = _peer(name, f"{name}/pull", "pattern-pull", pull_wire, hwm=hwm)
        procs.append(pull)
        url = str(pull.wait_ready(settings.ready_timeout)["url"])
        front = _middle(name, "pipeline", middle, url, pull_wire, push_wire, settings, procs,
                        hwm)
        push = _peer(name, f"{name}/push", "pattern-push", push_wire, url=front, hwm=hwm)
        procs.append(push)
        push.wait_ready(settings.ready_timeout)
        pull.send(op="collect", n=settings.n, timeout=settings.timeout)
        time.sleep(0.3)  # the connections settle
        push.send(op="go", n=settings.n, size=settings.size)
        got = pull.result(settings.timeout + 30)
        sent = push.try_result(5) or {}
        # over the longer of the puller's span (first to last) and the pushing: a middle that
        # queues what it reads delivers in a burst, faster than anything was pushed
        span = max(got["elapsed"], float(sent.get("elapsed", 0.0)))
        return {"route": name, "received": got["received"], "lost": settings.n - got["received"],
                "msgs_per_s": got["received"] / span, "pull_s": got["elapsed"],
                "push_s": sent.get("elapsed")}
    except Unavailable as exc:
        return {"route": name, "error": str(exc)}
    finally:
        for p in reversed(procs):
            p.stop(1.0)


def _reference(route: str) -> str:
    """zmq.proxy with the same peers: ``zmq-proxy-c`` for a C row."""
    return "zmq-proxy-c" if route.endswith("-c") else "zmq-proxy"


def _rounds(rounds: list[list[dict[str, Any]]], key: tuple[str, ...]) -> list[dict[str, Any]]:
    """One row per route (and ``key``) from each round's rows: the round whose rate is the
    median (the lower middle one for an even count), with ``rounds_msgs_per_s`` and the ratio
    to zmq.proxy: the median row's over the median reference, and (more than one round, the
    route and its reference measured in every one) ``ratio_median_of_rounds`` and
    ``ratio_rounds`` (range) from each round's rate over that round's reference. A route that
    failed in any round is reported by its first failure."""
    def ident(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["route"], *(r.get(k) for k in key))

    by: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = {}
    for i, rows in enumerate(rounds):
        for r in rows:
            by.setdefault(ident(r), []).append((i, r))
    per_round_ref: list[dict[tuple[Any, ...], float]] = [
        {ident(r): r["msgs_per_s"] for r in rows if r.get("msgs_per_s")} for rows in rounds]
    out: list[dict[str, Any]] = []
    for ident_, numbered in by.items():
        rows = [r for _, r in numbered]
        failed = [r for r in rows if "msgs_per_s" not in r]
        if failed:
            out.append(failed[0])
            continue
        ordered = sorted(rows, key=lambda r: r["msgs_per_s"])
        row = dict(ordered[(len(ordered) - 1) // 2])
        row["rounds_msgs_per_s"] = [r["msgs_per_s"] for r in rows]
        ref_ident = (_reference(row["route"]), *ident_[1:])
        # each round's rate over the same round's reference (a rate of 0 is a ratio of 0)
        ratios = [r["msgs_per_s"] / per_round_ref[i][ref_ident] for i, r in numbered
                  if per_round_ref[i].get(ref_ident)]
        if len(rounds) > 1 and len(ratios) == len(rounds):
            row["ratio_median_of_rounds"] = median(ratios)
            row["ratio_rounds"] = [min(ratios), max(ratios)]
        out.append(row)
    refs = {ident(r): r.get("msgs_per_s") for r in out
            if r["route"] in ("zmq-proxy", "zmq-proxy-c")}
    for r in out:
        ref = refs.get((_reference(r["route"]), *ident(r)[1:]))
        rate = r.get("msgs_per_s")
        r["ratio_vs_zmq_proxy"] = (rate / ref) if ref and rate else None
    return out


def run(settings: PatternSettings, routes: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Both benchmarks over every route (or those named), fan-out for each subscriber count,
    ``settings.rounds`` times with the routes interleaved."""
    chosen = [r for r in FANOUT_ROUTES if routes is None or r[0] in routes]
    fan: list[list[dict[str, Any]]] = []
    pipe: list[list[dict[str, Any]]] = []
    for i in range(settings.rounds):
        tag = f" (round {i + 1}/{settings.rounds})" if settings.rounds > 1 else ""
        fan.append([])
        for subs in settings.subscribers:
            for route in chosen:
                _log(settings, f"fan-out {route[0]} x{subs}{tag}")
                fan[-1].append(fanout(route, subs, settings))
        pipe.append([])
        for route in [r for r in PIPELINE_ROUTES if routes is None or r[0] in routes]:
            _log(settings, f"pipeline {route[0]}{tag}")
            pipe[-1].append(pipeline(route, settings))
    return {"n": settings.n, "size": settings.size, "rounds": settings.rounds,
            "fanout": _rounds(fan, ("subscribers",)), "pipeline": _rounds(pipe, ())}


def table(result: dict[str, Any]) -> str:
    def ratio(r: dict[str, Any]) -> str:
        v = r.get("ratio_vs_zmq_proxy")
        text = f"{'-' if v is None else f'{v:.3f}':>12}"
        m, spread = r.get("ratio_median_of_rounds"), r.get("ratio_rounds")
        if m is not None and spread:
            text += f"  {m:.3f} [{spread[0]:.3f}-{spread[1]:.3f}]"
        return text

    rounds = int(result.get("rounds", 1))
    of_rounds = (f"; the median of {rounds} interleaved rounds, then the median [range] of "
                 f"each round's ratio" if rounds > 1 else "")
    col = "  rounds: ratio [range]" if rounds > 1 else ""

    lines = [f"pub/sub fan-out ({result['n']} messages of {result['size']} B published; "
             f"delivered msgs/s over all subscribers; -c routes: C peers, against zmq-proxy-c; "
             f"*-direct-c: no middle, the C peers' ceiling{of_rounds})",
             f"{'route':<18} {'subs':>5} {'msgs/s':>10} {'delivered':>9} {'vs zmq.proxy':>12}{col}"]
    def rows(found: list[dict[str, Any]], lead: Callable[[dict[str, Any]], str],
             cells: Callable[[dict[str, Any]], str]) -> list[str]:
        return [f"{lead(r)} unavailable: {r['error'][:60]}" if "error" in r
                else f"{lead(r)} {cells(r)} {ratio(r)}".rstrip() for r in found]

    lines += rows(result["fanout"], lambda r: f"{r['route']:<18} {r['subscribers']:>5}",
                  lambda r: f"{r['msgs_per_s']:>10.0f} {r['fraction']:>8.1%}")
    lines += ["", f"pipeline PUSH -> middle -> PULL ({result['n']} messages, blocking sends"
                  f"{of_rounds})",
              f"{'route':<18} {'msgs/s':>10} {'lost':>6} {'vs zmq.proxy':>12}{col}"]
    lines += rows(result["pipeline"], lambda r: f"{r['route']:<18}",
                  lambda r: f"{r['msgs_per_s']:>10.0f} {r['lost']:>6}")
    return "\n".join(lines)


__all__ = ["FANOUT_ROUTES", "PIPELINE_ROUTES", "PatternSettings", "fanout", "pipeline", "run",
           "table"]
