"""``python -m gateway.tools.bench.capture``: what a capture endpoint costs a bridge.

Issue 38 asks that a capture reader that never reads leaves a bridge at least 0.9x the
throughput it has without capture. This bench measures one zmq->sp request-reply bridge
(``gateway bridge``, native engine; the bench's C libzmq DEALER client with ``--window``
requests in flight; the C SP rep0 echo as the server) in four variants, all up for the whole
run and measured in interleaved rounds (the order rotated every round, one variant carrying
traffic at a time, so machine noise is shared):

- ``off``: no capture; the step runs in the compiled kernel;
- ``off-pure``: no capture with ``GATEWAY_NO_EXTENSIONS=1``: the pure-Python step, the one a
  bridge with a tap (control or capture) runs, since the kernel is switched off for it
  (``gateway.device.forward_async``);
- ``stalled``: ``--capture`` bound and a libzmq SUB connected that never reads;
- ``no-reader``: ``--capture`` bound, nobody connected.

Each variant's figure is the median of its rounds' requests/s; the report gives the capture
variants' ratios to both no-capture variants. Then one long slice on each capture variant,
with the gateway's RSS before and after, and its capture counters: every forwarded message is
either published to the capture PUB or counted in ``gateway_capture_dropped_total{reason}``
(the copies a stalled reader never took), and what is published to a stalled reader stops
growing once its queues are full.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.tools.bench.cpeers import peer
from gateway.tools.bench.procs import Proc, proc_memory_mib, tcp_address
from gateway.tools.bench.routes import C_CLIENT, C_SERVER, Route
from gateway.tools.bench.runner import RouteRun, Settings, bridge_endpoints, measure_round
from gateway.tools.harness import prometheus
from gateway.tools.harness.gateway import Gateway, GatewayDied, bridge_args
from gateway.tools.harness.procs import Unavailable

ROUTE = Route(name="gw-zmq-sp-capture", group="capture",
              description="C libzmq DEALER -> gateway bridge zmq->sp (native) -> C SP rep0 echo",
              client=C_CLIENT["zmq"], server=C_SERVER["sp"], middle="bridge", front="zmq",
              back="sp", backend="native")
CAPTURE_AT = "@zmq+tcp://127.0.0.1:0"
DROP_REASONS = ("no-reader", "hwm", "queue-full")


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    description: str
    env: tuple[tuple[str, str], ...] = ()
    capture: bool = False
    reader: bool = False


VARIANTS = (
    Variant("off", "no capture (compiled kernel step)"),
    Variant("off-pure", "no capture, GATEWAY_NO_EXTENSIONS=1 (pure-Python step)",
            env=(("GATEWAY_NO_EXTENSIONS", "1"),)),
    Variant("stalled", "--capture, a libzmq SUB connected that never reads", capture=True,
            reader=True),
    Variant("no-reader", "--capture, no reader connected", capture=True),
)
#: (capture variant, no-capture reference): the ratios the report gives
RATIOS = (("stalled", "off"), ("stalled", "off-pure"), ("no-reader", "off"),
          ("no-reader", "off-pure"))


@dataclass
class Live:
    variant: Variant
    run: RouteRun
    gateway: Gateway
    long: dict[str, Any] = field(default_factory=dict)


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "n/a"


def start(v: Variant, ready_timeout: float) -> Live:
    """The variant's echo, bridge (metrics on, JSON logs), reader and client, all ready."""
    run = RouteRun(ROUTE)
    try:
        server = peer(f"{v.name}/server", ROUTE.server)
        run.procs.append(server)
        run.server = server
        front, back = bridge_endpoints(ROUTE, str(server.wait_ready(ready_timeout)["url"]))
        extra = ["--capture", CAPTURE_AT] if v.capture else []
        gw = Gateway(*bridge_args(front, back, *extra), name=f"{v.name}/bridge", metrics=True,
                     ready_timeout=ready_timeout, extra_env=dict(v.env), new_session=False)
        try:
            gw.start()
        except GatewayDied as exc:
            raise Unavailable(str(exc)) from None
        run.procs.append(gw)
        run.middle = gw
        if v.reader:
            reader = Proc.peer(f"{v.name}/reader", "stalled-sub",
                               url=tcp_address(gw.ready["capture"]))
            run.procs.append(reader)
            reader.wait_ready(ready_timeout)
            gw.wait_event("pipe.up", ready_timeout, socket="bridge/capture")
        client = peer(f"{v.name}/client", ROUTE.client, url=tcp_address(gw.front))
        run.procs.append(client)
        client.wait_ready(ready_timeout)
        run.client = client
        run.status = "ok"
        return Live(v, run, gw)
    except BaseException:
        for proc in reversed(run.procs):
            proc.stop()
        raise


#: warm-up slices at most until the stalled reader is full (its first copy dropped at the mark)
STALL_SLICES = 20


def counters(gw: Gateway) -> dict[str, int]:
    m = gw.metrics()

    def total(name: str, **labels: str) -> int:
        return int(prometheus.total(m, name, **labels) or 0)

    out = {"forwarded": total("gateway_forwarded_messages_total"),
           "published": total("gateway_capture_published_total")}
    for reason in DROP_REASONS:
        out[f"dropped_{reason}"] = total("gateway_capture_dropped_total", reason=reason)
    return out


def long_slice(live: Live, settings: Settings, n: int) -> None:
    """One slice of ``n`` requests on a capture variant, its RSS and counters around it."""
    gw = live.gateway
    before, c0 = proc_memory_mib(gw.pid), counters(gw)
    measure_round(live.run, settings, 0, n)
    after, c1 = proc_memory_mib(gw.pid), counters(gw)
    live.long = {"requests": n, "rss_before_mib": round(before.get("rss_mib", 0), 1),
                 "rss_after_mib": round(after.get("rss_mib", 0), 1),
                 "peak_rss_mib": round(after.get("peak_rss_mib", 0), 1),
                 "before": c0, "after": c1}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings(requests=0, tput_requests=args.requests * args.rounds,
                        windows=(args.window,), rounds=args.rounds, size=args.size, warmup=0,
                        slice_timeout=args.slice_timeout, ready_timeout=30.0,
                        max_time=args.max_time, verbose=not args.quiet)
    Proc.lifetime = args.max_time + 900
    lives: list[Live] = []
    out: dict[str, Any] = {"command": " ".join(sys.argv), "loadavg_before": loadavg()}
    try:
        for v in VARIANTS:
            lives.append(start(v, settings.ready_timeout))
        for live in lives:  # warm-up, uncounted: connections, caches, the reader's SUBSCRIBE
            measure_round(live.run, settings, 0, args.requests // 4 or 1)
            # a reader that never reads: the steady state starts once its queue and the socket
            # buffers are full (its copies dropped at the mark); until then it takes copies
            for _ in range(STALL_SLICES if live.variant.name == "stalled" else 0):
                if counters(live.gateway)["dropped_hwm"] or live.run.status != "ok":
                    break
                measure_round(live.run, settings, 0, args.requests)
            live.run.round_rps.clear()
        for rnd in range(args.rounds):
            k = rnd % len(lives)
            for live in lives[k:] + lives[:k]:
                if live.run.status == "ok":
                    measure_round(live.run, settings, 0, args.requests)
            if not args.quiet:
                print(f"[capture-bench] round {rnd + 1}/{args.rounds}: " + ", ".join(
                    f"{x.variant.name} {x.run.round_rps.get(args.window, [0])[-1]}"
                    for x in lives), file=sys.stderr, flush=True)
        rounds = {x.variant.name: list(x.run.round_rps.get(args.window, [])) for x in lives}
        for live in lives:
            if live.variant.capture and live.run.status == "ok":
                long_slice(live, settings, args.long_requests)
        out["variants"] = {}
        for live in lives:
            rps = rounds[live.variant.name]
            out["variants"][live.variant.name] = {
                "description": live.variant.description, "status": live.run.status,
                "reason": live.run.reason, "rounds_rps": rps,
                "median_rps": round(statistics.median(rps)) if rps else None,
                "counters": counters(live.gateway), "long": live.long}
    finally:
        for live in lives:
            for proc in reversed(live.run.procs):
                proc.stop()
    out["loadavg_after"] = loadavg()
    med = {k: v["median_rps"] for k, v in out["variants"].items()}
    out["ratios"] = {f"{a}/{b}": round(med[a] / med[b], 3) for a, b in RATIOS
                     if med.get(a) and med.get(b)}
    return out


def report(d: dict[str, Any]) -> str:
    lines = [f"command: {d['command']}", f"loadavg before: {d['loadavg_before']}",
             f"loadavg after:  {d['loadavg_after']}", "",
             f"{'variant':<10} {'median req/s':>12}  rounds (req/s)  - what"]
    for name, v in d["variants"].items():
        lines.append(f"{name:<10} {v['median_rps'] or 0:>12}  {v['rounds_rps']}  - "
                     f"{v['description']}" + (f" [{v['status']}: {v['reason']}]"
                                              if v["status"] != "ok" else ""))
    lines += ["", "ratios (median / median): " + ", ".join(
        f"{k} {r:.3f}" for k, r in d["ratios"].items())]
    for name, v in d["variants"].items():
        if not v["long"]:
            continue
        lg, c = v["long"], v["counters"]
        took = c["published"] + sum(c[f"dropped_{r}"] for r in DROP_REASONS)
        lines += ["", f"{name}: long slice of {lg['requests']} requests: gateway RSS "
                      f"{lg['rss_before_mib']} -> {lg['rss_after_mib']} MiB "
                      f"(peak {lg['peak_rss_mib']}); published "
                      f"{lg['before']['published']} -> {lg['after']['published']}",
                  f"  totals: forwarded {c['forwarded']} = published {c['published']} + "
                  "dropped " + " + ".join(f"{c[f'dropped_{r}']} ({r})" for r in DROP_REASONS)
                  + f" = {took}" + ("" if took == c["forwarded"] else "  MISMATCH")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gateway.tools.bench.capture",
                                description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--requests", type=int, default=20000,
                   help="requests per variant per round (default 20000)")
    p.add_argument("--window", type=int, default=16,
                   help="requests in flight of the client (default 16)")
    p.add_argument("--size", type=int, default=64, help="request body bytes (default 64)")
    p.add_argument("--long-requests", type=int, default=100000,
                   help="the long slice on each capture variant (default 100000)")
    p.add_argument("--slice-timeout", type=float, default=60.0)
    p.add_argument("--max-time", type=float, default=900.0)
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    problems = [f"--{k.replace('_', '-')} must be at least 1" for k in
                ("rounds", "requests", "window", "size", "long_requests") if getattr(args, k) < 1]
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    t0 = time.monotonic()
    try:
        d = measure(args)
    except Unavailable as exc:
        print(f"capture bench unavailable: {exc}", file=sys.stderr)
        return 3
    d["wall_s"] = round(time.monotonic() - t0, 1)
    print(report(d))
    if args.json:
        Path(args.json).write_text(json.dumps(d, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
