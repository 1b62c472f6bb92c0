"""The bench's C load peers (gateway/tools/bench/c, built by ``bench.cpeers``): they build, each
wire's client gets every reply from its echo (one short bounded exchange, real sockets on
127.0.0.1), a client without a server says so, and a missing compiler makes their routes
unavailable with the reason. Skipped with the reason where gcc or a header is missing."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.tools.bench import cpeers, report, versus
from gateway.tools.bench.procs import Proc
from gateway.tools.bench.routes import select
from gateway.tools.harness.procs import Unavailable, free_port

#: peers -> (client role, echo role); "shapes": nng's peers as applications write them (cooked
#: req0 sockets, one request in flight each; a rep0 server with contexts)
WIRES = {"zmq": ("c-zmq", "c-zmq-echo"), "sp": ("c-sp", "c-sp-echo"),
         "nng": ("c-nng", "c-nng-echo"), "shapes": ("c-nng-req", "c-nng-rep")}


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Build into a cache of this module's own (the first build compiles, later ones reuse);
    skip when the programs cannot be built here."""
    path = tmp_path_factory.mktemp("c-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("GATEWAY_BENCH_C_CACHE", str(path))
    mp.setattr(cpeers, "_failed", {})
    try:
        for program in cpeers.PROGRAMS:
            cpeers.build(program)
    except Unavailable as exc:
        mp.undo()
        pytest.skip(str(exc))
    yield path
    mp.undo()


def test_every_program_builds_once_into_the_cache(cache: Path) -> None:
    for program in cpeers.PROGRAMS:
        path = cpeers.build(program)
        assert path.is_file() and path.parent.parent == cache
        mtime = path.stat().st_mtime_ns
        assert cpeers.build(program) == path  # cached: not built again
        assert path.stat().st_mtime_ns == mtime


@pytest.fixture(params=sorted(WIRES))
def echo(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """A C echo of one wire, running: (wire, its URL)."""
    wire = request.param
    server = cpeers.peer(f"{wire}-echo", WIRES[wire][1])
    try:
        yield wire, str(server.wait_ready(10)["url"])
    finally:
        server.stop()


@pytest.mark.timeout(60)
def test_one_shot_client_gets_every_reply(echo: tuple[str, str]) -> None:
    wire, url = echo
    argv = cpeers.argv(WIRES[wire][0], url=url, requests=500, window=16, size=64, timeout=20,
                       lifetime=40)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=40)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["n"] == 500 and res["errors"] == 0 and not res["timed_out"], res
    assert res["elapsed"] > 0 and res["cpu_s"] >= 0


@pytest.mark.timeout(60)
def test_client_speaks_the_bench_line_protocol(echo: tuple[str, str]) -> None:
    wire, url = echo
    client = cpeers.peer(f"{wire}-client", WIRES[wire][0], url=url)
    try:
        assert client.wait_ready(10)["url"] == url
        lat = client.request(30, op="lat", n=50, size=100, timeout=20, warmup=5)
        assert len(lat["samples_ns"]) == 50 and all(s > 0 for s in lat["samples_ns"]), lat
        tput = client.request(30, op="tput", window=64, n=1000, size=100, timeout=20)
        assert tput["n"] == 1000 and tput["errors"] == 0 and not tput["timed_out"], tput
        small = client.request(10, op="tput", window=8, n=10, size=4, timeout=5)
        assert "size >= 8" in small["error"]  # the tag needs 8 bytes: said, not ignored
        assert "unknown command" in client.request(10, op="nonsense")["error"]
    finally:
        client.stop()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("wire", sorted(WIRES))
def test_client_without_a_server_says_so(wire: str) -> None:
    url = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    argv = cpeers.argv(WIRES[wire][0], url=url, requests=10, window=4, size=16, timeout=1,
                       lifetime=20)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if wire == "sp":  # plain sockets: the connection is refused at once
        assert r.returncode == 2 and "cannot connect" in r.stderr, r
        return
    if wire == "shapes":  # an application's dial: blocking, refused at once
        assert r.returncode == 2 and "cannot dial" in r.stderr, r
        return
    assert r.returncode == 1, r.stderr  # libzmq and nng dial again and again: a timeout
    res = json.loads(r.stdout)
    assert res["n"] == 0 and res["timed_out"], res


@pytest.mark.timeout(60)
def test_one_shot_client_carries_a_1_mib_body(echo: tuple[str, str]) -> None:
    """``--size 1048576``: every peer takes a body of 1 MiB (nng's default limit, 1 MiB, is for
    the whole message, so a body of 1 MiB and its request id would be refused)."""
    wire, url = echo
    argv = cpeers.argv(WIRES[wire][0], url=url, requests=8, window=4, size=1 << 20, timeout=20,
                       lifetime=40)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=40)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["n"] == 8


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("client", "server"), [("c-zmq-dealers", "c-zmq-echo"),
                                                ("c-nng-req", "c-nng-rep")])
def test_a_client_of_several_sockets_takes_a_window_up_to_its_sockets(client: str,
                                                                      server: str) -> None:
    """One request in flight per socket: ``sockets=4`` carries a window of 4 (every reply
    checked, each on its own socket's connection), and says why not 5."""
    echo = cpeers.peer("echo", server)
    try:
        url = str(echo.wait_ready(10)["url"])
        peer = cpeers.peer("client", client, url=url, sockets=4)
        try:
            peer.wait_ready(10)
            ok = peer.request(30, op="tput", window=4, n=400, size=100, timeout=20)
            assert ok["n"] == 400 and ok["errors"] == 0 and not ok["timed_out"], ok
            lat = peer.request(30, op="lat", n=20, size=100, timeout=20, warmup=2)
            assert len(lat["samples_ns"]) == 20, lat
            over = peer.request(10, op="tput", window=5, n=10, size=100, timeout=5)
            assert "window 5 above the client's 4 sockets" in over["error"], over
        finally:
            peer.stop()
    finally:
        echo.stop()
    with pytest.raises(Unavailable, match="no option sockets"):  # (one socket: no such option)
        cpeers.peer("client", "c-zmq", url=url, sockets=4)


@pytest.mark.timeout(30)
def test_nng_req0_clients_stop_at_their_deadline_when_no_reply_comes() -> None:
    """A cooked rep0 that takes requests and never answers: the aio client stops its sockets at
    the deadline and says it timed out (nng would wait for ever)."""
    import pynng

    url = f"tcp://127.0.0.1:{free_port()}"
    with pynng.Rep0(listen=url):
        argv = cpeers.argv("c-nng-req", url=url, sockets=8, requests=100, window=8, size=16,
                           timeout=1, lifetime=20)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)
    assert res["n"] == 0 and res["timed_out"] and res["errors"] == 0, res


@pytest.mark.timeout(30)
def test_sp_echo_drops_a_peer_that_is_no_req0() -> None:
    server = cpeers.peer("sp-echo", "c-sp-echo")
    try:
        port = int(str(server.wait_ready(10)["url"]).rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"\x00SP\x00\x00\x31\x00\x00")  # a rep0 header: no req0
            got = b""
            while chunk := s.recv(64):  # its own header, then the end of the connection
                got += chunk
            assert got == b"\x00SP\x00\x00\x31\x00\x00"
        deadline = time.monotonic() + 5
        while "no req0" not in server.stderr_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "dropped a connection: the peer is no req0" in server.stderr_text()
    finally:
        server.stop()


@pytest.mark.timeout(30)
def test_sp_client_stops_at_a_reply_to_no_request() -> None:
    """A rep0 on a plain socket that answers with another request id: the error, not a count."""
    with socket.socket() as ls:
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        argv = cpeers.argv("c-sp", url=f"tcp://127.0.0.1:{ls.getsockname()[1]}", requests=5,
                           window=1, size=16, timeout=5, lifetime=20)
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) as p:
            conn, _ = ls.accept()
            with conn:
                conn.settimeout(10)
                conn.sendall(b"\x00SP\x00\x00\x31\x00\x00")
                head = conn.recv(8, socket.MSG_WAITALL)
                size = int.from_bytes(conn.recv(8, socket.MSG_WAITALL), "big")
                request = conn.recv(size, socket.MSG_WAITALL)
                wrong = (int.from_bytes(request[:4], "big") ^ 1).to_bytes(4, "big")
                conn.sendall(size.to_bytes(8, "big") + wrong + request[4:])
                out, err = p.communicate(timeout=15)
    assert head == b"\x00SP\x00\x00\x30\x00\x00"  # it says req0
    assert p.returncode == 1, err
    res = json.loads(out)
    assert res["errors"] == 1 and "not its request's" in res["error"], res


def test_a_missing_compiler_makes_the_peers_unavailable_with_the_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpeers, "_failed", {})
    monkeypatch.setattr(cpeers, "compiler", lambda: None)
    with pytest.raises(Unavailable, match="no C compiler"):
        cpeers.peer("client", "c-zmq", url="tcp://127.0.0.1:1")
    with pytest.raises(Unavailable, match="no C compiler"):  # remembered for the run
        cpeers.build("zmq_reqrep")


def test_a_secured_or_unknown_option_is_refused() -> None:
    with pytest.raises(Unavailable, match="plain TCP only"):
        cpeers.peer("client", "c-zmq", url="tcp://127.0.0.1:1", security="curve")


def test_python_roles_still_start_python_peers() -> None:
    p = cpeers.peer("echo", "zmq-echo")
    try:
        assert isinstance(p, Proc) and "peer.py" in " ".join(p.argv)
        assert str(p.wait_ready(30)["url"]).startswith("tcp://127.0.0.1:")
    finally:
        p.stop()


def test_cpeers_group_and_its_references() -> None:
    names = [r.name for r in select("cpeers")]
    assert names == ["zmq-echo-c", "sp-echo-c", "zmq-proxy-c", "nng-device-c",
                     "gw-zmq-zmq-c", "gw-zmq-sp-c", "gw-sp-zmq-c", "gw-sp-sp-c", "nng-echo-c"]
    # one gateway route brings its references and the C ceilings along
    assert [r.name for r in select("gw-sp-zmq-c")] == ["zmq-echo-c", "sp-echo-c", "zmq-proxy-c",
                                                       "nng-device-c", "gw-sp-zmq-c"]
    assert all(r.group != "cpeers" for r in select(None))  # asked for by name


def _fig(name: str, p50: float, rps: float, *, front: str = "zmq", back: str = "zmq",
         middle: str | None = None, cpu: float | None = None,
         cores: float | None = None) -> dict[str, Any]:
    fig: dict[str, Any] = {"name": name, "group": "cpeers", "front": front, "back": back,
                           "middle": middle, "latency": {"p50_us": p50},
                           "throughput": {"64": {"rps": rps}}}
    if cpu is not None:
        fig["middle_process"] = {"cpu_us_per_req_64": cpu}
    if cores is not None:
        fig["client_process"] = {"cores_64": cores}
    return fig


def test_cpeers_ratios_to_the_proxy_the_device_and_the_ceiling() -> None:
    figs = {f["name"]: f for f in (
        _fig("zmq-echo-c", 100, 200000),
        _fig("sp-echo-c", 140, 100000, front="sp", back="sp"),
        _fig("zmq-proxy-c", 150, 80000, middle="zmq.proxy", cpu=10.0),
        _fig("nng-device-c", 240, 20000, front="sp", back="sp", middle="nng_device", cpu=40.0),
        _fig("gw-zmq-sp-c", 170, 40000, back="sp", middle="gateway", cpu=20.0, cores=0.3))}
    d = report.derive(figs, (8, 64))
    assert "gw-zmq-sp-c" not in d["hops"]  # (compared in its own group, not with zmq-proxy)
    e = d["cpeers"]["gw-zmq-sp-c"]
    assert e["hop_us"] == 50.0  # 170 - (100 + 140) / 2
    assert e["hop_vs_reference"] == 1.0 and e["hop_vs_nng-device-c"] == 0.5
    assert e["tput_vs_reference"] == 0.5 and e["tput_vs_nng-device-c"] == 2.0
    assert e["cpu_vs_reference"] == 2.0 and e["cpu_vs_nng-device-c"] == 0.5
    assert e["tput_vs_ceiling"] == 0.2 and e["ceiling_rps"] == 200000
    assert e["client_cores"] == 0.3
    text = versus.group_lines(d)
    assert text[0].startswith("C peers") and "gw-zmq-sp-c" in text[-1]



def test_cpeers_hop_per_round_pairs_each_round_with_its_own_directs_and_proxy() -> None:
    def fig(name: str, rounds: list[float], **kw: Any) -> dict[str, Any]:
        f = _fig(name, sorted(rounds)[1], 1000, **kw)
        f["per_round"] = {"p50_us": rounds}
        return f

    # round 2 is a noisy one for every route: pooled p50s would mix it in; paired, it is one
    # of three ratios
    figs = {f["name"]: f for f in (
        fig("zmq-echo-c", [100, 400, 100]),
        fig("sp-echo-c", [50, 300, 50], front="sp", back="sp"),
        fig("zmq-proxy-c", [200, 500, 300], middle="zmq.proxy"),
        fig("nng-device-c", [150, 400, 150], front="sp", back="sp", middle="nng_device"),
        fig("gw-zmq-zmq-c", [180, 800, 250], middle="gateway"))}
    e = versus.cpeers(figs, 64)["gw-zmq-zmq-c"]
    # hops 80, 400, 150 over the proxy's 100, 100, 200: 0.8, 4.0, 0.75
    assert e["hop_vs_reference_median_of_rounds"] == 0.8
    assert e["hop_vs_reference_rounds"] == [0.75, 4.0]
    assert "rounds 0.80x [0.75-4.00]" in versus.group_lines({"cpeers": {"gw-zmq-zmq-c": e}})[1]
    # a round whose proxy hop is not positive (its direct was slower) has no ratio
    figs["zmq-echo-c"]["per_round"]["p50_us"] = [100, 600, 100]
    e = versus.cpeers(figs, 64)["gw-zmq-zmq-c"]
    assert e["hop_vs_reference_median_of_rounds"] == 0.78  # (0.8 + 0.75) / 2, to 2 places
    assert e["hop_vs_reference_rounds_used"] == [2, 3]
    assert "[0.75-0.80] in 2 of 3" in versus.group_lines({"cpeers": {"gw-zmq-zmq-c": e}})[1]
    # a route with fewer rounds than its reference has no paired figure (never a partial one)
    figs["gw-zmq-zmq-c"]["per_round"]["p50_us"] = [180, 800]
    e = versus.cpeers(figs, 64)["gw-zmq-zmq-c"]
    assert "hop_vs_reference_median_of_rounds" not in e
    assert "rounds -" in versus.group_lines({"cpeers": {"gw-zmq-zmq-c": e}})[1]

def _pattern_peer(stack: contextlib.ExitStack, role: str, wire: str, **options: Any) -> Proc:
    """The C pattern peer ``role`` on ``wire`` (zmq, sp: our C SP peer, nng: libnng's),
    stopped when ``stack`` closes (the last started first)."""
    nng = wire == "nng"
    proc = cpeers.pattern_peer(role, f"pattern-{role}", "sp" if nng else wire, nng=nng,
                               **options)
    stack.callback(proc.stop)
    return proc


def _linked(stack: contextlib.ExitStack, wire: str, first: str, second: str, hwm: int,
            **second_options: Any) -> tuple[Proc, Proc, str]:
    """``first`` started and ready, then ``second`` dialling its URL: (first, second, url)."""
    one = _pattern_peer(stack, first, wire, hwm=hwm)
    url = str(one.wait_ready(10)["url"])
    return one, _pattern_peer(stack, second, wire, url=url, hwm=hwm, **second_options), url


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wire", ["zmq", "sp", "nng"])
def test_c_publisher_reaches_c_subscribers(wire: str) -> None:
    with contextlib.ExitStack() as stack:
        pub, subs, _ = _linked(stack, wire, "pub", "subs", hwm=10000, count=3)
        assert subs.wait_ready(10) == {"count": 3}
        subs.send(op="collect", timeout=20)
        pub.send(op="go", n=300, size=50, warm=0.5)
        sent, got = pub.result(30), subs.result(30)
        assert sent["sent"] == 300 and got["complete"], (sent, got)
        assert got["per_socket"] == [300, 300, 300] and got["received"] == 900, got


@pytest.mark.timeout(60)
def test_the_sp_c_publisher_past_its_queue_drops_whole_messages_only() -> None:
    # 4 KB messages into a queue of ~29 KB per subscriber while 3 subscribers stop reading for
    # a second (80 MB a subscriber; no socket buffer holds that, so the drops are certain, not a
    # race with readers that may keep up): the socket says EAGAIN, the queue fills and moves its
    # bytes to the front, messages are dropped. Every subscriber still gets whole frames (a torn one would end its stream with
    # an error, never with "END") and not more than was sent.
    n = 20000
    with contextlib.ExitStack() as stack:
        pub, subs, _ = _linked(stack, "sp", "pub", "subs", hwm=100, count=3)
        assert subs.wait_ready(10) == {"count": 3}
        subs.send(op="collect", timeout=40, pause=1.0)
        pub.send(op="go", n=n, size=4000, warm=0.5)
        sent, got = pub.result(45), subs.result(45)
        assert sent["sent"] == n and got["complete"], (sent, got)
        assert all(0 < k <= n for k in got["per_socket"]), got
        assert got["received"] < 3 * n, got  # (it did drop: the path this test is about)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wire", ["zmq", "sp", "nng"])
def test_c_pusher_reaches_the_c_puller(wire: str) -> None:
    with contextlib.ExitStack() as stack:
        pull, push, url = _linked(stack, wire, "pull", "push", hwm=1000)
        assert push.wait_ready(10) == {"url": url}
        pull.send(op="collect", n=2000, timeout=20)
        push.send(op="go", n=2000, size=100)
        assert push.result(30) == {"sent": 2000, "elapsed": pytest.approx(1, abs=30)}
        got = pull.result(30)
        assert got["received"] == 2000 and got["elapsed"] > 0, got
