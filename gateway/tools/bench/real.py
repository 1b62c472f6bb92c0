"""The ``real`` and ``dealers`` groups' figures (issue 36): every route's throughput against its
clients' own C tool (zmq.proxy for libzmq clients, nng_device for nng ones), the middle's CPU
per request against zmq.proxy's, its messages per read and CPU per wake-up, and its server's
direct ceiling (the clients straight to that server).

Every figure is the median over the rounds of that round's figure, and every ratio the median
of each round's own ratio (the routes of one round run within seconds of each other, so a
ratio pairs up the machine's drift), with the range of the rounds beside it. Per request:

- the middle's CPU: user + system time of its process (all threads and children) during the
  throughput slice, from its CPU clock, over the slice's requests; split into user and system
  by the system share of its /proc/PID/stat ticks (``utime``, ``stime``: 10 ms each, too coarse
  for one slice) summed over all the route's slices at the window (10 at least);
- vs floor (the gateway's routes): its CPU per request over the C floor relay's on the same
  route, same peers (``c/relay_floor.c``: one epoll loop, plain sockets, the same envelopes:
  the least any middle does there), each round's own ratio;
- messages per read: the middle receives two messages per request (the request from the
  client, the reply from the server; a ZeroMQ message of several frames is one), over its
  read-type system calls (read, readv, recvfrom, recvmsg, recvmmsg);
- wake-ups: the middle's calls that wait for events (epoll_wait, epoll_pwait, poll, ppoll,
  select): one per turn of an event loop (uvloop's, libzmq's I/O thread and zmq_poll, nng's
  poller), whether it slept or found events ready; CPU per wake-up = CPU per request / wake-ups
  per request (and CPU per read likewise: in the gateway a read is a callback into Python, and
  one loop turn may run many). Reads, writes and wake-ups are counted by the kernel's tracepoints (perf) in a
  slice of their own right after the measured one (:mod:`syscount`), as counting costs CPU;
- sleeps: the voluntary context switches of the middle's threads in the measured slice
  (/proc/PID/task/TID/status): a thread slept (in epoll_wait, poll, or a futex: nng's and
  libzmq's threads hand work over through them) and was woken. A busy loop that always finds
  events ready turns without sleeping.
"""

from __future__ import annotations

from typing import Any

from gateway.tools.bench.versus import fmt, median

#: the figures of one throughput slice that become per-request (or per-wake-up) figures
_PER_SLICE = ("n", "elapsed", "mid_cpu", "srv_cpu", "cli_cpu", "mid_wakeups", "mid_ticks")
LOAD_LIMIT = 1.5  # a load average above this on the machine is said next to the figures


def route_record(run: Any) -> dict[str, Any]:
    """What a real group's route adds to its figures (``run``: a ``runner.RouteRun``)."""
    route = run.route
    return {"tool": route.tool or None, "cpu_ref": route.cpu_ref or None,
            "ceiling": route.ceiling or None, "floor": route.floor or None,
            "client": route.client, "server": route.server,
            "slices": run.slices, "counted": run.counted,
            "count_problem": run.count_problem or None}


def _rounds(fig: dict[str, Any] | None, window: int) -> dict[int, dict[str, float]]:
    """round -> that round's per-request figures at ``window``."""
    out: dict[int, dict[str, float]] = {}
    for s in (fig or {}).get("slices") or []:
        if s["window"] != window or not s["n"] or not s["elapsed"]:
            continue
        n, e = s["n"], s["elapsed"]
        f: dict[str, float] = {"rps": n / e}
        if s.get("mid_cpu") is not None:
            f["cpu_us"] = s["mid_cpu"] / n * 1e6
            if s.get("mid_wakeups") is not None:
                f["sleeps_per_req"] = s["mid_wakeups"] / n
        if s.get("srv_cpu") is not None:
            f["srv_cpu_us"] = s["srv_cpu"] / n * 1e6
        if s.get("cli_cpu") is not None:
            f["cli_cpu_us"] = s["cli_cpu"] / n * 1e6
            f["cli_cores"] = s["cli_cpu"] / e
        out[s["round"]] = f
    for c in (fig or {}).get("counted") or []:
        if c["window"] == window and c["n"] and c["round"] in out:
            f = out[c["round"]]
            f["reads_per_req"] = c["reads"] / c["n"]
            f["writes_per_req"] = c["writes"] / c["n"]
            f["wakeups_per_req"] = c["waits"] / c["n"]
            if c["reads"]:
                f["msgs_per_read"] = 2 * c["n"] / c["reads"]
            if c["waits"] and "cpu_us" in f:
                f["cpu_us_per_wakeup"] = f["cpu_us"] / f["wakeups_per_req"]
            if c["reads"] and "cpu_us" in f:
                f["cpu_us_per_read"] = f["cpu_us"] / f["reads_per_req"]
    return out


def _sys_share(fig: dict[str, Any] | None, window: int) -> float | None:
    """The system share of the middle's CPU over every slice at ``window`` (its /proc ticks
    summed: 10 ms each, enough over the rounds, not within one)."""
    user = system = 0
    for s in (fig or {}).get("slices") or []:
        if s["window"] == window and s.get("mid_ticks"):
            user += s["mid_ticks"][0]
            system += s["mid_ticks"][1]
    return system / (user + system) if user + system >= 10 else None


def _med(rounds: dict[int, dict[str, float]], key: str, nd: int = 2) -> float | None:
    m = median([f[key] for f in rounds.values() if key in f])
    return round(m, nd) if m is not None else None


def _paired(mine: dict[int, dict[str, float]], theirs: dict[int, dict[str, float]],
            key: str) -> dict[str, Any]:
    """The median and range of each round's ``mine[key] / theirs[key]`` (same round only)."""
    ratios = sorted(mine[k][key] / theirs[k][key] for k in mine
                    if k in theirs and key in mine[k] and theirs[k].get(key))
    if not ratios:
        return {}
    m = median(ratios)
    return {"median": round(m, 2) if m is not None else None,
            "rounds": [round(ratios[0], 2), round(ratios[-1], 2)], "n": len(ratios)}


def derive(figs: dict[str, dict[str, Any]], window: int | None) -> dict[str, Any]:
    """Each real group's route: its medians and paired ratios at ``window`` (the largest)."""
    if not window:
        return {}
    rounds = {name: _rounds(fig, window) for name, fig in figs.items() if "slices" in fig}
    out: dict[str, Any] = {}
    for name, fig in figs.items():
        if name not in rounds:
            continue
        mine = rounds[name]
        e: dict[str, Any] = {
            "window": window, "middle": fig.get("middle"), "rounds": len(mine),
            "rps": _med(mine, "rps", 0), "cpu_us_per_req": _med(mine, "cpu_us", 1),
            "sys_share": _sys_share(fig, window),
            "msgs_per_read": _med(mine, "msgs_per_read"),
            "reads_per_req": _med(mine, "reads_per_req"),
            "writes_per_req": _med(mine, "writes_per_req"),
            "wakeups_per_req": _med(mine, "wakeups_per_req"),
            "sleeps_per_req": _med(mine, "sleeps_per_req"),
            "cpu_us_per_wakeup": _med(mine, "cpu_us_per_wakeup", 1),
            "cpu_us_per_read": _med(mine, "cpu_us_per_read", 1),
            "server_cpu_us_per_req": _med(mine, "srv_cpu_us", 1),
            "client_cpu_us_per_req": _med(mine, "cli_cpu_us", 1),
            "client_cores": _med(mine, "cli_cores"),
            "count_problem": fig.get("count_problem"),
            "description": fig.get("description"), "status": fig.get("status"),
        }
        for label, ref, key in (("tool", fig.get("tool"), "rps"),
                                ("cpu_ref", fig.get("cpu_ref"), "cpu_us"),
                                ("floor", fig.get("floor"), "cpu_us"),
                                ("ceiling", fig.get("ceiling"), "rps")):
            if not ref or (ref == name and label == "ceiling"):
                continue
            e[label] = ref
            e[f"vs_{label}"] = _paired(mine, rounds.get(ref, {}), key)
        ceiling = fig.get("ceiling")
        if ceiling and ceiling != name:
            e["ceiling_rps"] = _med(rounds.get(ceiling, {}), "rps", 0)
        out[name] = e
    return out


def _ratio(e: dict[str, Any], label: str) -> str:
    r = e.get(f"vs_{label}") or {}
    if r.get("median") is None:
        return "-"
    lo, hi = r["rounds"]
    return f"{fmt(r['median'], 2)} [{fmt(lo, 2)}-{fmt(hi, 2)}]"


def lines(real: dict[str, Any]) -> list[str]:
    """The table's section of the real groups (``real``: :func:`derive`'s)."""
    if not real:
        return []
    head = ["route", "req/s", "vs tool", "tool", "mid CPU us/req", "user+sys", "vs zmq.proxy",
            "vs floor", "msgs/read", "CPU us/read", "reads+writes/req", "wakeups/req", "CPU us/wakeup", "sleeps/req",
            "server ceiling", "of ceiling", "srv CPU us/req", "client cores"]
    rows = []
    for name, e in real.items():
        if e.get("rps") is None:
            rows.append([name, e.get("status") or "-"] + ["" for _ in head[2:]])
            continue
        rw = (f"{fmt(e['reads_per_req'], 2)}+{fmt(e['writes_per_req'], 2)}"
              if e.get("reads_per_req") is not None else "-")
        mid = e.get("middle") is not None
        share, cpu = e.get("sys_share"), e.get("cpu_us_per_req")
        split = (f"{fmt(cpu * (1 - share))}+{fmt(cpu * share)}"
                 if mid and share is not None and cpu is not None else "-")
        rows.append([name, fmt(e["rps"], 0), _ratio(e, "tool"), e.get("tool") or "-",
                     fmt(e.get("cpu_us_per_req")) if mid else "-", split, _ratio(e, "cpu_ref"),
                     _ratio(e, "floor"), fmt(e.get("msgs_per_read"), 2), fmt(e.get("cpu_us_per_read")), rw,
                     fmt(e.get("wakeups_per_req"), 2), fmt(e.get("cpu_us_per_wakeup")),
                     fmt(e.get("sleeps_per_req"), 2), fmt(e.get("ceiling_rps"), 0),
                     _ratio(e, "ceiling"), fmt(e.get("server_cpu_us_per_req")),
                     fmt(e.get("client_cores"), 2)])
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    window = next(iter(real.values()))["window"]
    out = [f"real peers (issue 36), x{window} in flight; medians over the rounds, ratios = the "
           "median [range] of each round's own ratio:"]
    for r in [head, ["-" * w for w in widths], *rows]:
        out.append("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                    for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    out.append("  (tool = the clients' own C tool, zmq.proxy or nng_device; mid CPU = user+sys "
               "of the middle per request (its CPU clock), split into user and system time by "
               "its /proc ticks over the rounds; vs floor = mid CPU over the C floor relay's on "
               "the same route (relay_floor.c: one epoll loop, plain sockets, the gateway's "
               "envelopes); msgs/read = 2 messages per request over the middle's "
               "read calls; wakeups = its event-loop waits (epoll_wait, poll...; one loop turn "
               "can serve many reads); reads, writes and wakeups counted by perf in a slice of "
               "their own; CPU/read and CPU/wakeup = CPU per request over reads or wakeups per "
               "request; sleeps = voluntary context switches of its "
               "threads; server ceiling = the clients straight to the route's server; srv CPU = "
               "the server's per request; client cores = CPU the C client kept busy)")
    problems = {e["count_problem"] for e in real.values() if e.get("count_problem")}
    for p in sorted(problems):
        out.append(f"  system calls not counted: {p}")
    for name, e in real.items():
        out.append(f"  {name}: {e.get('description')}")
    return out


def loadavg() -> list[float] | None:
    """The machine's load average over 1, 5 and 15 minutes (/proc/loadavg), or None."""
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None


def load_line(load: dict[str, Any] | None) -> list[str]:
    """The run's load averages at its start and end, and whether the machine was busy."""
    if not load:
        return []
    high = [k for k in ("start", "end") if load.get(k) and load[k][0] > LOAD_LIMIT]
    busy = (f"; above {LOAD_LIMIT} at the {' and '.join(high)}: other work shared the cores"
            if high else "")
    return [f"load average (1, 5, 15 min): start {load.get('start')}, end {load.get('end')}"
            f"{busy}"]
