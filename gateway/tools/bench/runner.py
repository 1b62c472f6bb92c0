"""Start every route's processes, then measure them interleaved in rounds.

All routes stay up for the whole run; in each round every route gets one latency slice and one
throughput slice per window, in a rotated order, so machine noise is shared between them. Only
one route carries traffic at a time. Every slice is bounded in requests and in seconds.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.tools.bench import syscount
from gateway.tools.bench.cpeers import SOCKETS_ROLES, floor_relay, peer
from gateway.tools.bench.procs import (
    Child,
    Proc,
    Unavailable,
    gateway_cli_problem,
    proc_cpu_seconds,
    proc_memory_mib,
    proc_syscalls,
    proc_user_sys_ticks,
    proc_wakeups,
    start_bridge,
    tcp_address,
)
from gateway.tools.bench.routes import LIB_BACKEND, REAL_GROUPS, Route

#: the routes of the clients sweep (when selected): the proxy and the native gateway routes
SWEEP_ROUTES = ("zmq-proxy", "gw-zmq-zmq-native", "gw-zmq-sp-native", "gw-sp-zmq-native",
                "gw-sp-sp-native")


@dataclass
class Settings:
    requests: int  # latency round trips per route, over all rounds
    tput_requests: int  # requests per window per route, over all rounds
    windows: tuple[int, ...]
    rounds: int
    size: int
    warmup: int
    slice_timeout: float
    ready_timeout: float
    max_time: float
    bridge_args: tuple[str, ...] = ()
    verbose: bool = True
    sweep: tuple[int, ...] = ()  # clients sweep: concurrent clients per point
    sweep_requests: int = 0  # timed round trips per point (at least 5 per client)
    sweep_routes: tuple[str, ...] = SWEEP_ROUTES


@dataclass
class RouteRun:
    route: Route
    status: str = "pending"  # ok | unavailable | error | incomplete
    reason: str = ""
    procs: list[Child] = field(default_factory=list)
    client: Proc | None = None
    middle: Child | None = None
    server: Proc | None = None
    samples_ns: list[int] = field(default_factory=list)
    lat_elapsed: float = 0.0
    tput: dict[int, list[float]] = field(default_factory=dict)  # window -> [n, elapsed]
    cpu: dict[str, float] = field(default_factory=dict)  # phase -> middle CPU seconds
    client_cpu: dict[int, float] = field(default_factory=dict)  # window -> client CPU s (C)
    server_cpu: dict[str, float] = field(default_factory=dict)  # phase -> server CPU seconds
    syscalls: dict[str, list[int]] = field(default_factory=dict)  # phase -> middle [reads, writes]
    sweep: dict[int, dict[str, Any]] = field(default_factory=dict)  # clients -> figures
    reqs: dict[str, int] = field(default_factory=dict)  # phase -> requests
    round_p50_us: list[float] = field(default_factory=list)  # per round: the spread
    round_rps: dict[int, list[float]] = field(default_factory=dict)
    rounds_done: int = 0
    memory: dict[str, float] = field(default_factory=dict)
    front_url: str = ""
    #: each throughput slice: round, window, n, elapsed, and the CPU seconds and wake-ups of
    #: the middle, the server and the client in it (the real groups' per-round medians)
    slices: list[dict[str, Any]] = field(default_factory=list)
    #: the real groups' counted slices (perf, :mod:`syscount`): round, window, n, and the
    #: middle's reads, writes and waits; or why none were counted
    counted: list[dict[str, Any]] = field(default_factory=list)
    count_problem: str = ""


def log(settings: Settings, msg: str) -> None:
    if settings.verbose:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)


def backend_query(route: Route, wire: str) -> str:
    return "native" if route.backend == "native" else LIB_BACKEND[wire]


def bridge_endpoints(route: Route, server_url: str) -> tuple[str, str]:
    host_port = tcp_address(server_url).split("://", 1)[1]
    transport = "tls+tcp" if route.security == "tls" else "tcp"
    front = (f"@{route.front}+{transport}://127.0.0.1:0"
             f"?backend={backend_query(route, route.front)}")
    if route.security:  # a CURVE server or TLS front, with the harness's keys
        from gateway.tools.harness import security

        front += security.query(security.settings(
            "CURVE" if route.security == "curve" else "", "tls+tcp", route.front, "server"))
    back = f">{route.back}+tcp://{host_port}?backend={backend_query(route, route.back)}"
    return front, back


def security_cfg(route: Route) -> dict[str, Any]:
    """What a secured route's client and middle need: the kind and where the keys are."""
    if not route.security:
        return {}
    from gateway.tools.harness.security import material

    return {"security": route.security, "root": str(material().root)}


def client_url_of(route: Route, url: str) -> str:
    """How the route's client dials the front (libraries: tcp://, tls+tcp:// for TLS)."""
    if route.client == "native":
        return url
    plain = tcp_address(url)
    return "tls+" + plain if route.security == "tls" else plain


def start_server_and_middle(route: Route, settings: Settings, run: RouteRun,
                            server_role: str | None = None,
                            bridge_extra: tuple[str, ...] = ()) -> str:
    """Start the server and the middle (if any); return the URL clients connect to."""
    role = server_role or route.server
    cfg: dict[str, Any] = {"wire": route.back} if role == "native-rep" else {}
    server = peer(f"{route.name}/server", role, **cfg)
    run.procs.append(server)
    run.server = server
    url = str(server.wait_ready(settings.ready_timeout)["url"])
    if route.middle is None:
        return url
    if route.middle == "bridge":
        front, back = bridge_endpoints(route, url)
        bridge = start_bridge(f"{route.name}/bridge", front, back,
                              [*settings.bridge_args, *size_args(settings.size),
                               *route.bridge_args, *bridge_extra], settings.ready_timeout)
        run.procs.append(bridge)
        run.middle = bridge
        return bridge.front
    middle = (floor_relay(f"{route.name}/floor", route.front, route.back, tcp_address(url))
              if route.middle == "floor" else
              Proc.peer(f"{route.name}/{route.middle}", route.middle, server=tcp_address(url),
                        **security_cfg(route)))
    run.procs.append(middle)
    run.middle = middle
    return str(middle.wait_ready(settings.ready_timeout)["url"])


def size_args(size: int) -> tuple[str, ...]:
    """The bridge's ``--max-message-size`` for bodies of ``size`` bytes where its default is too
    small (a body, its envelope and its frames' headers), else nothing."""
    from gateway.config import Limits

    need = size + 1024
    return ("--max-message-size", str(need)) if need > Limits().max_message_size else ()


def setup(route: Route, settings: Settings) -> RouteRun:
    run = RouteRun(route)
    try:
        url = start_server_and_middle(route, settings, run)
        run.front_url = url
        url = client_url_of(route, url)
        sockets = ({"sockets": max(settings.windows)} if route.client in SOCKETS_ROLES
                   else {})
        client = (peer(f"{route.name}/client", route.client, url=url, **sockets)
                  if route.client.startswith("c-") else
                  Proc.peer(f"{route.name}/client", "client", client=route.client, url=url,
                            **security_cfg(route)))
        run.procs.append(client)
        client.wait_ready(settings.ready_timeout)
        run.client = client
        run.status = "ok"
    except (Unavailable, ValueError, KeyError) as exc:
        run.status, run.reason = "unavailable", str(exc)
        teardown(run)
    return run


def teardown(run: RouteRun) -> None:
    for proc in reversed(run.procs):
        if proc is run.middle and proc.alive():
            run.memory = proc_memory_mib(proc.pid) or run.memory
        proc.stop()
    run.procs.clear()


Usage = tuple[float | None, float | None, tuple[int, int] | None, int | None,
              tuple[int, int] | None]


def _middle_cpu(run: RouteRun) -> Usage:
    """CPU seconds so far of the middle process and of the server (None: none or gone), the
    middle's (read, write) system calls (/proc/PID/io), its wake-ups and its (user, system)
    CPU ticks."""
    mid = proc_cpu_seconds(run.middle.pid) if run.middle is not None else None
    srv = proc_cpu_seconds(run.server.pid) if run.server is not None else None
    calls = proc_syscalls(run.middle.pid) if run.middle is not None else None
    wakeups = proc_wakeups(run.middle.pid) if run.middle is not None else None
    ticks = proc_user_sys_ticks(run.middle.pid) if run.middle is not None else None
    return mid, srv, calls, wakeups, ticks


def _record_slice(run: RouteRun, window: int, res: dict[str, Any], cpu0: Usage) -> None:
    """A real group's throughput slice, for its per-round figures."""
    cpu1 = _middle_cpu(run)

    def diff(a: float | int | None, b: float | int | None) -> float | int | None:
        return b - a if a is not None and b is not None else None

    run.slices.append({"round": run.rounds_done, "window": window, "n": res["n"],
                       "elapsed": res["elapsed"], "mid_cpu": diff(cpu0[0], cpu1[0]),
                       "srv_cpu": diff(cpu0[1], cpu1[1]), "cli_cpu": res.get("cpu_s"),
                       "mid_wakeups": diff(cpu0[3], cpu1[3]),
                       "mid_ticks": (None if cpu0[4] is None or cpu1[4] is None else
                                     [cpu1[4][0] - cpu0[4][0], cpu1[4][1] - cpu0[4][1]])})


def _counted_slice(run: RouteRun, settings: Settings, window: int, n: int) -> None:
    """A real group's slice with the middle's system calls counted (perf): not one whose CPU
    or throughput is reported. A failure to count is noted once; the route goes on."""
    if run.middle is None or run.count_problem:
        return
    try:
        with syscount.Count(run.middle.pid) as count:
            res = _ask(run, settings, f"counted x{window}", op="tput", window=window, n=n,
                       size=settings.size, timeout=settings.slice_timeout)
    except syscount.CountError as exc:
        run.count_problem = str(exc)
        log(settings, f"{run.route.name}: system calls not counted: {exc}")
        return
    if res is not None and not res.get("timed_out"):
        run.counted.append({"round": run.rounds_done, "window": window, "n": res["n"],
                            **count.counts})


def _account(run: RouteRun, phase: str, cpu0: Usage, n: int) -> None:
    cpu1 = _middle_cpu(run)
    for into, a, b in ((run.cpu, cpu0[0], cpu1[0]), (run.server_cpu, cpu0[1], cpu1[1])):
        if a is not None and b is not None:
            into[phase] = into.get(phase, 0.0) + (b - a)
    if cpu0[2] is not None and cpu1[2] is not None:
        acc = run.syscalls.setdefault(phase, [0, 0])
        acc[0] += cpu1[2][0] - cpu0[2][0]
        acc[1] += cpu1[2][1] - cpu0[2][1]
    run.reqs[phase] = run.reqs.get(phase, 0) + n


def _fail(run: RouteRun, why: str, settings: Settings) -> None:
    run.status = "error"
    middle = run.middle
    extra = ""
    if middle is not None and not middle.alive():
        extra = f"; {middle.name} exited {middle.p.poll()}: {middle.stderr_tail(3)}"
    elif middle is not None:  # a middle that dropped messages says why in its log: its last
        drops = [ln for ln in middle.stderr_text().splitlines() if "drop" in ln]
        extra = f"; {middle.name} logged {len(drops)} drop lines, the last: {drops[-1]}" \
            if drops else ""
    run.reason = why + extra
    log(settings, f"{run.route.name}: ERROR {run.reason}")


def _ask(run: RouteRun, settings: Settings, what: str, **cmd: Any) -> dict[str, Any] | None:
    """One command to the route's client and its RESULT; None (and the route failed) when the
    client is gone or says an error."""
    assert run.client is not None
    try:
        res = run.client.request(settings.slice_timeout + 10, **cmd)
    except Unavailable as exc:
        _fail(run, str(exc), settings)
        return None
    if "error" in res:
        _fail(run, f"{what}: {res['error']}", settings)
        return None
    return res


def measure_round(run: RouteRun, settings: Settings, n_lat: int, n_tput: int) -> None:
    timeout = settings.slice_timeout
    if n_lat > 0:
        cpu0 = _middle_cpu(run)
        res = _ask(run, settings, "latency", op="lat", n=n_lat, size=settings.size,
                   timeout=timeout, warmup=settings.warmup)
        if res is None:
            return
        _account(run, "lat", cpu0, n_lat)
        run.samples_ns.extend(res["samples_ns"])
        if res["samples_ns"]:
            run.round_p50_us.append(round(sorted(res["samples_ns"])[len(res["samples_ns"]) // 2]
                                          / 1e3, 1))
        run.lat_elapsed += res["elapsed"]
    for window in settings.windows:
        if n_tput <= 0:
            break
        cpu0 = _middle_cpu(run)
        res = _ask(run, settings, f"throughput x{window}", op="tput", window=window, n=n_tput,
                   size=settings.size, timeout=timeout)
        if res is None:
            return
        _account(run, f"tput{window}", cpu0, res["n"])
        if run.route.group in REAL_GROUPS:
            _record_slice(run, window, res, cpu0)
        acc = run.tput.setdefault(window, [0, 0.0])
        acc[0] += res["n"]
        acc[1] += res["elapsed"]
        if "cpu_s" in res:  # (the C clients say their own: is the client the bottleneck?)
            run.client_cpu[window] = run.client_cpu.get(window, 0.0) + res["cpu_s"]
        if res["elapsed"] > 0:
            run.round_rps.setdefault(window, []).append(round(res["n"] / res["elapsed"]))
        if res.get("timed_out"):
            _fail(run, f"throughput x{window}: {res['n']}/{n_tput} replies within {timeout:.0f}s "
                       "(requests lost?)", settings)
            return
        if run.route.group in REAL_GROUPS:
            _counted_slice(run, settings, window, max(16 * window, n_tput // 4))
            if run.status != "ok":
                return
    run.rounds_done += 1


def sweep_point(run: RouteRun, settings: Settings, clients: int) -> dict[str, Any]:
    """``clients`` concurrent clients (one connection and one request in flight each) in a
    fresh client process; p50/p99 round trip and the middle's CPU per request."""
    route = run.route
    if route.client in ("zmq-stream", "sp-stream"):  # byte-stream connections, one loop
        kind, url = route.client, tcp_address(run.front_url)
    elif route.front == "zmq":
        kind, url = "zmq", tcp_address(run.front_url)
    else:
        kind, url = "native", "sp+" + tcp_address(run.front_url)
    n = max(settings.sweep_requests, 5 * clients)
    timeout = max(settings.slice_timeout, 60.0)
    proc = Proc.peer(f"{route.name}/sweep{clients}", "sweep-client", client=kind, url=url)
    try:
        proc.wait_ready(settings.ready_timeout)
        cpu0 = _middle_cpu(run)
        client0 = proc_cpu_seconds(proc.pid)
        res = proc.request(timeout * 2 + 30, op="sweep", clients=clients, n=n,
                           size=settings.size, timeout=timeout)
        cpu1 = _middle_cpu(run)
        client1 = proc_cpu_seconds(proc.pid)
    except Unavailable as exc:
        return {"clients": clients, "error": str(exc)}
    finally:
        proc.stop()
    out: dict[str, Any] = {"clients": clients, "client": kind, **res}
    if res.get("n") and res.get("elapsed"):
        out["rps"] = round(res["n"] / res["elapsed"])
        if cpu0[0] is not None and cpu1[0] is not None:
            # includes the warm-up round trip of every client (and its connection set-up)
            out["mid_cpu_s"] = round(cpu1[0] - cpu0[0], 3)
            out["mid_cpu_us_per_req"] = round((cpu1[0] - cpu0[0]) / (res["n"] + clients) * 1e6,
                                              1)
        if cpu0[2] is not None and cpu1[2] is not None:
            done = res["n"] + clients
            out["mid_reads_per_req"] = round((cpu1[2][0] - cpu0[2][0]) / done, 2)
            out["mid_writes_per_req"] = round((cpu1[2][1] - cpu0[2][1]) / done, 2)
        # CPU-seconds per second of the whole point (warm-up included) of each process: who
        # was busy (on a small machine the peers can be the bottleneck, not the middle)
        for who, a, b in (("mid", cpu0[0], cpu1[0]), ("server", cpu0[1], cpu1[1]),
                          ("client", client0, client1)):
            if a is not None and b is not None and res.get("wall"):
                out[f"{who}_cores"] = round((b - a) / res["wall"], 2)
    return out


def run_sweep(runs: list[RouteRun], settings: Settings) -> None:
    for run in runs:
        if run.status != "ok" or run.route.name not in settings.sweep_routes:
            continue
        for clients in settings.sweep:
            log(settings, f"sweep {run.route.name}: {clients} clients")
            fig = sweep_point(run, settings, clients)
            run.sweep[clients] = fig
            if "error" in fig:
                log(settings, f"sweep {run.route.name} x{clients}: {fig['error']}")


def split(total: int, parts: int, index: int) -> int:
    """The ``index``-th of ``parts`` near-equal shares of ``total``."""
    return total // parts + (1 if index < total % parts else 0)


def run_routes(routes: list[Route], settings: Settings) -> list[RouteRun]:
    t_start = time.monotonic()
    Proc.lifetime = settings.max_time + 900
    runs: list[RouteRun] = []
    gw_problem = None
    if any(r.middle == "bridge" for r in routes):
        gw_problem = gateway_cli_problem()
        if gw_problem:
            log(settings, f"gateway CLI unavailable: {gw_problem}")
    try:
        for route in routes:
            if route.middle == "bridge" and gw_problem:
                runs.append(RouteRun(route, status="unavailable", reason=gw_problem))
                continue
            log(settings, f"starting {route.name}")
            run = setup(route, settings)
            if run.status != "ok":
                log(settings, f"{route.name}: unavailable: {run.reason}")
            runs.append(run)
        live = [r for r in runs if r.status == "ok"]
        for rnd in range(settings.rounds):
            k = rnd % len(live) if live else 0
            order = live[k:] + live[:k]  # rotate so no route is always first or last
            n_lat = split(settings.requests, settings.rounds, rnd)
            n_tput = split(settings.tput_requests, settings.rounds, rnd)
            log(settings, f"round {rnd + 1}/{settings.rounds}: {len(order)} routes, "
                          f"{n_lat} round trips + {n_tput} x {len(settings.windows)} windows each")
            for run in order:
                if run.status != "ok":
                    continue
                if time.monotonic() - t_start > settings.max_time:
                    run.status = "incomplete"
                    run.reason = f"--max-time {settings.max_time:.0f}s reached after " \
                                 f"{run.rounds_done} rounds"
                    continue
                measure_round(run, settings, n_lat, n_tput)
        if settings.sweep:
            run_sweep(runs, settings)
    finally:
        for run in runs:
            teardown(run)
    return runs
