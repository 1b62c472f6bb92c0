"""``gateway bench --routes real`` (issue 36): the routes and the references each brings, the
figures (medians over rounds, each round's own ratios, messages per read, CPU per wake-up), the
system-call counter and a tiny run's report. No timing assertions: benchmarks are for
``gateway bench`` / ``make bench``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.tools import bench
from gateway.tools.bench import cpeers, real, report, syscount
from gateway.tools.bench import kernel as kernel_mod
from gateway.tools.bench.procs import proc_wakeups
from gateway.tools.bench.routes import REAL_GROUPS, ROUTES, select
from gateway.tools.harness.procs import Unavailable

FLOORS = ["floor-zmq-zmq-real", "floor-zmq-sp-real", "floor-sp-zmq-real", "floor-sp-sp-real"]
REAL = ["zmq-echo-real", "nng-rep-real", "sp-echo-ideal", "zmq-proxy-real", "nng-device-real",
        *FLOORS, "gw-zmq-zmq-real", "gw-zmq-sp-real", "gw-sp-zmq-real", "gw-sp-sp-real",
        "gw-zmq-sp-ideal", "gw-sp-sp-ideal"]


def test_real_routes_and_the_references_each_brings() -> None:
    assert [r.name for r in select("real")] == REAL
    assert [r.name for r in select("dealers")] == [
        "nng-rep-real", "zmq-echo-dealers", "zmq-proxy-dealers", "gw-zmq-zmq-dealers",
        "gw-zmq-sp-dealers"]  # (nng-rep-real: gw-zmq-sp-dealers's server's ceiling)
    # one route brings its clients' tool, zmq.proxy (the CPU reference) and its server's ceiling
    # (and the C floor relay's route between the same peers)
    assert [r.name for r in select("gw-sp-sp-real")] == [
        "nng-rep-real", "zmq-proxy-real", "nng-device-real", "floor-sp-sp-real", "gw-sp-sp-real"]
    assert all(r.group not in REAL_GROUPS for r in select(None))  # asked for by name
    by_name = {r.name: r for r in ROUTES}
    for r in ROUTES:
        if r.group in REAL_GROUPS:
            assert r.ceiling in by_name and by_name[r.ceiling].middle is None, r
            if r.middle:
                assert {r.tool, r.cpu_ref} <= set(by_name), r
                assert by_name[r.tool].front == r.front  # the clients' own tool
    assert by_name["gw-sp-zmq-real"].tool == "nng-device-real"
    assert by_name["gw-zmq-sp-real"].tool == "zmq-proxy-real"
    assert by_name["gw-zmq-sp-real"].server == "c-nng-rep"
    assert by_name["gw-zmq-sp-ideal"].server == "c-sp-echo"  # the idealised echo, named so
    assert "idealised" in by_name["gw-zmq-sp-ideal"].description
    assert by_name["gw-sp-sp-real"].baseline == "nng-rep-real"
    assert by_name["gw-sp-zmq-real"].baseline == "mean(nng-rep-real, zmq-echo-real)"
    for floor in FLOORS:  # the same peers as the gateway route it is the floor of
        gw = by_name[floor.replace("floor-", "gw-")]
        f = by_name[floor]
        assert gw.floor == floor and f.middle == "floor" and not f.floor
        assert (f.client, f.server, f.front, f.back, f.tool) == (
            gw.client, gw.server, gw.front, gw.back, gw.tool)
    assert cpeers.SOCKETS_ROLES == {by_name["nng-rep-real"].client,
                                    by_name["zmq-echo-dealers"].client}


def _fig(name: str, rps: list[float], cpu_us: list[float] | None = None, *,
         reads: int | None = None, waits: int = 0, sleeps: int = 0,
         ticks: tuple[int, int] | None = None, **refs: str) -> dict[str, Any]:
    """A real route's figures: one slice of 1,000 requests per round at x64 (``ticks``: the
    middle's user and system ticks in each)."""
    n = 1000
    slices = [{"round": i, "window": 64, "n": n, "elapsed": n / r,
               "mid_cpu": cpu_us[i] * n / 1e6 if cpu_us else None, "srv_cpu": 0.002,
               "cli_cpu": n / r / 2, "mid_wakeups": sleeps if cpu_us else None,
               "mid_ticks": list(ticks) if ticks else None}
              for i, r in enumerate(rps)]
    counted = ([{"round": i, "window": 64, "n": 500, "reads": reads, "writes": reads,
                 "waits": waits} for i in range(len(rps))] if reads is not None else [])
    return {"name": name, "middle": "gateway" if cpu_us else None, "slices": slices,
            "counted": counted, "status": "ok", "description": name, **refs}


def test_real_figures_are_medians_and_each_rounds_own_ratios() -> None:
    figs = {f["name"]: f for f in (
        _fig("zmq-echo-real", [400e3, 100e3, 400e3], ceiling="zmq-echo-real"),
        _fig("zmq-proxy-real", [100e3, 50e3, 100e3], [3.0, 6.0, 3.0], reads=100, waits=200,
             tool="zmq-proxy-real", cpu_ref="zmq-proxy-real", ceiling="zmq-echo-real"),
        _fig("floor-zmq-zmq-real", [300e3, 100e3, 300e3], [0.5, 1.5, 1.0], ticks=(5, 15),
             tool="zmq-proxy-real", cpu_ref="zmq-proxy-real", ceiling="zmq-echo-real"),
        _fig("gw-zmq-zmq-real", [200e3, 50e3, 150e3], [1.5, 3.0, 3.0], reads=50, waits=25,
             sleeps=100, ticks=(20, 10), tool="zmq-proxy-real", cpu_ref="zmq-proxy-real",
             ceiling="zmq-echo-real", floor="floor-zmq-zmq-real"))}
    d = real.derive(figs, 64)
    gw = d["gw-zmq-zmq-real"]
    # round 2 ran slow for every route: paired, it is one of three ratios
    assert gw["rps"] == 150e3 and gw["vs_tool"] == {"median": 1.5, "rounds": [1.0, 2.0], "n": 3}
    assert gw["cpu_us_per_req"] == 3.0
    assert gw["vs_cpu_ref"] == {"median": 0.5, "rounds": [0.5, 1.0], "n": 3}
    assert gw["ceiling_rps"] == 400e3
    assert gw["vs_ceiling"] == {"median": 0.5, "rounds": [0.38, 0.5], "n": 3}
    assert gw["msgs_per_read"] == 20.0  # 2 messages x 500 requests over 50 reads
    assert gw["reads_per_req"] == 0.1 and gw["wakeups_per_req"] == 0.05
    assert gw["cpu_us_per_wakeup"] == 60.0 and gw["cpu_us_per_read"] == 30.0  # 3.0 / 0.05, 0.1
    assert gw["sleeps_per_req"] == 0.1
    assert gw["client_cores"] == 0.5
    # CPU over the floor's, round by round: 3.0, 2.0, 3.0
    assert gw["floor"] == "floor-zmq-zmq-real"
    assert gw["vs_floor"] == {"median": 3.0, "rounds": [2.0, 3.0], "n": 3}
    # user and system: the ticks' system share over the rounds (30 of 90) of the median CPU
    assert gw["sys_share"] == pytest.approx(1 / 3)
    assert d["floor-zmq-zmq-real"]["sys_share"] == 0.75 and "vs_floor" not in d[
        "floor-zmq-zmq-real"]
    proxy = d["zmq-proxy-real"]
    assert proxy["vs_tool"]["median"] == 1.0 and proxy["vs_cpu_ref"]["median"] == 1.0
    direct = d["zmq-echo-real"]
    assert direct["rps"] == 400e3 and "vs_tool" not in direct and "vs_ceiling" not in direct
    assert direct["server_cpu_us_per_req"] == 2.0  # 2 ms over 1,000 requests
    text = "\n".join(real.lines(d))
    assert text.startswith("real peers (issue 36), x64 in flight")
    for word in ("msgs/read", "CPU us/wakeup", "server ceiling", "1.50 [1.00-2.00]", "20.00",
                 "vs floor", "3.00 [2.00-3.00]", "2.0+1.0"):
        assert word in text, word
    # a round missing from the reference has no ratio (never a partial pairing)
    figs["zmq-proxy-real"]["slices"].pop()
    assert real.derive(figs, 64)["gw-zmq-zmq-real"]["vs_tool"]["n"] == 2


def test_a_route_without_counts_says_why_and_a_failed_one_its_status() -> None:
    fig = _fig("gw-sp-sp-real", [10e3], [9.0], tool="nng-device-real",
               cpu_ref="zmq-proxy-real", ceiling="nng-rep-real")
    fig["count_problem"] = "no perf on PATH (linux-perf): system calls not counted"
    failed = {"name": "nng-device-real", "middle": "nng_device", "slices": [], "counted": [],
              "status": "error", "description": "x"}
    d = real.derive({"gw-sp-sp-real": fig, "nng-device-real": failed}, 64)
    assert d["gw-sp-sp-real"]["msgs_per_read"] is None
    assert d["gw-sp-sp-real"]["vs_tool"] == {}  # (its tool measured nothing)
    text = "\n".join(real.lines(d))
    assert "system calls not counted: no perf on PATH" in text
    assert any(ln.split() == ["nng-device-real", "error"] for ln in text.splitlines())
    assert real.load_line({"start": [2.0, 1.0, 1.0], "end": [0.5, 1.0, 1.0]}) == [
        "load average (1, 5, 15 min): start [2.0, 1.0, 1.0], end [0.5, 1.0, 1.0]; above 1.5 at "
        "the start: other work shared the cores"]


def test_perf_csv_is_added_up_by_kind() -> None:
    text = ("# started on a day\n\n"
            "12,,syscalls:sys_enter_read,9399263,100.00,,\n"
            "3,,syscalls:sys_enter_recvfrom,9399263,100.00,,\n"
            "<not counted>,,syscalls:sys_enter_readv,0,100.00,,\n"
            "7,,syscalls:sys_enter_sendmsg,9399263,100.00,,\n"
            "5,,syscalls:sys_enter_epoll_wait,9399263,100.00,,\n"
            "2,,syscalls:sys_enter_poll,9399263,100.00,,\n")
    assert syscount.parse(text) == {"reads": 15, "writes": 7, "waits": 7}


@pytest.mark.timeout(60)
def test_perf_counts_the_reads_and_writes_of_another_process() -> None:
    why = syscount.problem()
    if why:
        pytest.skip(why)
    echo = "import os\nwhile (b := os.read(0, 64)):\n    os.write(1, b)\n"
    with subprocess.Popen([sys.executable, "-c", echo], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE) as p:
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(b"x\n")  # (started and reading before the count)
        p.stdin.flush()
        assert p.stdout.read(2) == b"x\n"
        with syscount.Count(p.pid) as count:
            for _ in range(20):  # one line at a time: a read and a write each
                p.stdin.write(b"y\n")
                p.stdin.flush()
                assert p.stdout.read(2) == b"y\n"
        p.stdin.close()
    # the echo sat in a read() entered before the count began (its tracepoint fired then): that
    # read returns the first line uncounted, and the read after the last line may or may not
    # have been entered when the count ends, so 19 or 20 reads (a spurious wake-up: one more)
    assert 19 <= count.counts["reads"] <= 22 and 20 <= count.counts["writes"] <= 22, count.counts


@pytest.mark.timeout(30)
def test_counting_a_process_that_is_gone_is_an_error_not_a_hang() -> None:
    if syscount.problem():
        pytest.skip(str(syscount.problem()))
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    with pytest.raises(syscount.CountError), syscount.Count(p.pid):
        pass


def test_wakeups_are_read_per_thread_and_none_for_no_process() -> None:
    n = proc_wakeups(os.getpid())
    assert n is not None and n >= 0
    assert proc_wakeups(2**22 + 12345) is None  # (above the largest pid)


@pytest.mark.timeout(120)
def test_a_tiny_real_run_reports_every_column(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_BENCH_C_CACHE", str(tmp_path / "c"))
    monkeypatch.setattr(cpeers, "_failed", {})
    try:
        for program in ("nng_shapes", "zmq_reqrep"):
            cpeers.build(program)
    except Unavailable as exc:
        pytest.skip(str(exc))
    out = tmp_path / "bench.json"
    p = bench.argparse.ArgumentParser()
    bench.configure_parser(p)
    args = p.parse_args(["--routes", "gw-sp-sp-real", "--quick", "--windows", "8",
                         "--requests", "40", "--tput-requests", "400", "--sweep", "",
                         "--json", str(out), "--quiet"])
    assert bench.run(args) == 0
    result = json.loads(out.read_text())
    assert list(result["routes"]) == ["nng-rep-real", "zmq-proxy-real", "nng-device-real",
                                      "floor-sp-sp-real", "gw-sp-sp-real"]
    assert all(f["status"] == "ok" for f in result["routes"].values()), result["routes"]
    # the floor relay carried every request of its slices (a client's error fails the route)
    floor = result["routes"]["floor-sp-sp-real"]
    assert floor["throughput"]["8"]["n"] == 400 and floor["middle"] == "C floor relay", floor
    assert len(result["meta"]["loadavg"]["start"]) == 3
    gw = result["derived"]["real"]["gw-sp-sp-real"]
    assert gw["rounds"] == 2 and gw["rps"] > 0 and gw["cpu_us_per_req"] > 0
    for label, ref in (("tool", "nng-device-real"), ("cpu_ref", "zmq-proxy-real"),
                       ("floor", "floor-sp-sp-real"), ("ceiling", "nng-rep-real")):
        assert gw[label] == ref and gw[f"vs_{label}"]["n"] == 2, (label, gw)
    if syscount.problem() is None:
        assert gw["msgs_per_read"] > 0 and gw["cpu_us_per_wakeup"] > 0, gw
        assert len(result["routes"]["gw-sp-sp-real"]["counted"]) == 2
    else:
        assert gw["count_problem"] == syscount.problem()
    assert "gw-sp-sp-real" not in result["derived"]["hops"]  # (its references are its own)
    kernel = result["kernel_hop"]  # the kernel's own cost, at the run's size
    assert [kernel[t]["size"] for t in kernel_mod.TRANSPORTS] == [100, 100], kernel
    assert all(kernel[t]["write_us"] > 0 and kernel[t]["read_us"] > 0
               for t in kernel_mod.TRANSPORTS), kernel
    table = capsys.readouterr().out
    assert "real peers (issue 36), x8 in flight" in table and "load average" in table
    assert "kernel cost of a message per write (100 B, 64 connections" in table
    assert report.table(result) in table


def test_the_kernel_cost_of_a_message_per_write(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """c/kernel_hop.c: CPU per write and per read of one message on 64 connections, over
    loopback TCP and unix sockets; the report sets the sum beside zmq.proxy's CPU per request
    (the part of a middle's CPU no middle can go below when its clients send one per write)."""
    monkeypatch.setenv("GATEWAY_BENCH_C_CACHE", str(tmp_path / "c"))
    monkeypatch.setattr(cpeers, "_failed", {})
    got = kernel_mod.measure(100, 640)
    if "status" in got:
        pytest.skip(got["status"])
    for transport in kernel_mod.TRANSPORTS:
        one = got[transport]
        assert (one["transport"], one["size"], one["connections"], one["messages"]) == (
            transport, 100, 64, 640)
        assert one["write_us"] > 0 and one["read_us"] > 0
    assert "status" in kernel_mod.measure(kernel_mod.MAX_SIZE + 1, 640)  # one segment at most
    fake = {"tcp": {"size": 100, "connections": 64, "write_us": 3.0, "read_us": 3.0},
            "unix": {"size": 100, "connections": 64, "write_us": 0.5, "read_us": 1.0}}
    text = "\n".join(kernel_mod.kernel_lines(fake, {"zmq-proxy-real": {"cpu_us_per_req": 2.0}}))
    assert "loopback TCP write 3.00 + read 3.00 = 6.00 us of CPU, 3.00x zmq.proxy's" in text
    assert "unix sockets (ipc) 0.50 + 1.00 = 1.50 us" in text
    assert "not measured (no compiler)" in "\n".join(
        kernel_mod.kernel_lines({"status": "no compiler"}, {}))
    assert kernel_mod.kernel_lines(None, {}) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", FLOORS)
def test_the_floor_relay_carries_every_request_and_reply(name: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Each route's C floor relay between its real peers: every reply back, checked by the C
    client (its body and request id), short and long ZeroMQ frames, bodies over the relay's
    first buffers (256 KiB), nothing dropped."""
    monkeypatch.setattr(cpeers, "_failed", {})
    route = next(r for r in ROUTES if r.name == name)
    procs = []
    try:
        try:
            server = cpeers.peer(f"{name}/server", route.server)
            procs.append(server)
            relay = cpeers.floor_relay(f"{name}/floor", route.front, route.back,
                                       str(server.wait_ready(30)["url"]))
            procs.append(relay)
            sockets = {"sockets": 8} if route.client in cpeers.SOCKETS_ROLES else {}
            client = cpeers.peer(f"{name}/client", route.client,
                                 url=str(relay.wait_ready(30)["url"]), **sockets)
        except Unavailable as exc:
            pytest.skip(str(exc))
        procs.append(client)
        client.wait_ready(30)
        lat = client.request(30, op="lat", n=20, size=100, timeout=10, warmup=2)
        small = client.request(30, op="tput", window=8, n=400, size=100, timeout=10)
        long = client.request(30, op="tput", window=8, n=100, size=3000, timeout=10)
        big = client.request(30, op="tput", window=8, n=16, size=300_000, timeout=10)
        drops = relay.stderr_text()
    finally:
        for p in reversed(procs):
            p.stop()
    assert len(lat["samples_ns"]) == 20, lat
    for res, n in ((small, 400), (long, 100), (big, 16)):
        assert (res["n"], res["errors"], res["timed_out"]) == (n, 0, False), res
    assert "drop" not in drops, drops


def test_a_failed_route_says_what_its_live_middle_logged_of_drops() -> None:
    """A route that lost replies names the middle's last drop line (1 MiB replies through the
    gateway's front: its high-water mark is in bytes), not only "requests lost?"."""
    from gateway.tools.bench import runner

    class Middle:
        name = "gw-zmq-sp-ideal/bridge"

        def alive(self) -> bool:
            return True

        def stderr_text(self) -> str:
            return ("[info] bridge.up\n[warning] drop bridge=bridge direction=reply reason=hwm\n"
                    "[warning] drop.summary count=2 reason=hwm\n")

    run = runner.RouteRun(next(r for r in ROUTES if r.name == "gw-zmq-sp-ideal"))
    run.middle = Middle()  # type: ignore[assignment]
    settings = runner.Settings(requests=1, tput_requests=1, windows=(8,), rounds=1, size=100,
                               warmup=0, slice_timeout=1, ready_timeout=1, max_time=1,
                               verbose=False)
    runner._fail(run, "throughput x8: 94/100 replies within 60s (requests lost?)", settings)
    assert run.status == "error"
    assert run.reason.endswith("gw-zmq-sp-ideal/bridge logged 2 drop lines, the last: "
                               "[warning] drop.summary count=2 reason=hwm"), run.reason
