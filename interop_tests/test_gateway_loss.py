"""Nothing lost uncounted, nobody starved: real peers, the real CLI, both directions.

* a back end killed with requests in flight: they are counted as ``backend-lost`` at once;
* the library poller (``?backend=pyzmq`` front, ``?backend=pynng`` back) never blocks: a
  pipelined burst crosses, a client that never reads costs the others nothing, SIGTERM is prompt;
* a client flooding messages that cannot cross: exact counters, a handful of log lines, and the
  other clients' latency untouched.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time

import pynng
import pytest
import zmq

from gateway.tools.harness.gateway import Gateway, bridge_args, url
from gateway.tools.harness.peers.nng import nng_raw_recv, nng_raw_send, open_raw
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, nng_req, zmq_client
from gateway.tools.harness.procs import LOCAL, free_port, lib_url

pytestmark = pytest.mark.timeout(90)

ANY = f"{LOCAL}:0"
LOST = 50
AT_ONCE = 15.0  #: seconds: a quarter of the default token TTL (60 s)


def _silent_server(wire: str, port: int) -> subprocess.Popen[str]:
    """A server process that accepts the gateway's connection and never reads: whatever the
    gateway sends it stays in flight until the process is killed."""
    code = {
        "sp": "import pynng, sys, time\n"
              "s = pynng.Rep0(); s.listen(sys.argv[1]); print('ready', flush=True); time.sleep(120)",
        "zmq": "import zmq, sys, time\n"
               "s = zmq.Context().socket(zmq.ROUTER); s.bind(sys.argv[1]); print('ready', flush=True)\n"
               "time.sleep(120)",
    }[wire]
    proc = subprocess.Popen([sys.executable, "-c", code, f"tcp://{LOCAL}:{port}"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _p(samples: list[float], q: float) -> float:
    samples = sorted(samples)
    return samples[min(len(samples) - 1, int(len(samples) * q))]


def _p99(samples: list[float]) -> float:
    return _p(samples, 0.99)


def _round_trips(dealer: zmq.Socket, n: int) -> list[float]:
    """``n`` pings through ``dealer``, one at a time: how long each round trip took."""
    lat = []
    for _ in range(n):
        s = time.perf_counter()
        dealer.send_multipart([b"", b"ping"])
        assert dealer.recv_multipart() == [b"", b"re:ping"]
        lat.append(time.perf_counter() - s)
    return lat


@pytest.mark.parametrize(("direction", "front_be", "back_be"), [
    ("zmq->sp", "native", "native"), ("sp->zmq", "native", "native"),  # the pipe that closed
    ("zmq->sp", "native", "pynng"), ("sp->zmq", "pynng", "pyzmq"),  # the library's last peer
])
def test_backend_killed_with_requests_in_flight_counts_them_at_once(
        direction: str, front_be: str, back_be: str) -> None:
    front_wire, back_wire = direction.split("->")
    port = free_port()
    server = _silent_server(back_wire, port)
    try:
        with Gateway(*bridge_args(url(front_wire, ANY, front_be),
                                  url(back_wire, f"{LOCAL}:{port}", back_be)),
                     metrics=True) as gw:
            with contextlib.ExitStack() as clients:
                if front_wire == "zmq":
                    dealer = clients.enter_context(zmq_client("DEALER", lib_url(gw.front)))
                    for i in range(LOST):
                        dealer.send_multipart([b"", b"q%d" % i])
                else:
                    client = clients.enter_context(contextlib.closing(open_raw("REQ")))
                    client.dial(lib_url(gw.front), block=True)
                    for i in range(LOST):  # 50 requests, each its own request id
                        nng_raw_send(client, [(0x80000000 | i).to_bytes(4, "big")], b"q")
                gw.wait_metric("gateway_forwarded_messages_total", LOST, direction="request")
                server.kill()
                t0 = time.monotonic()
                # 'at once': not at the tokens' TTL (60 s, the default). A quarter of it, not
                # the 2 s it was: a loaded machine gets room, a wait for the TTL still fails
                gw.wait_metric("gateway_dropped_messages_total", LOST, timeout=AT_ONCE,
                               reason="backend-lost")
            elapsed = time.monotonic() - t0
            assert gw.metric("gateway_dropped_messages_total", reason="backend-lost") == LOST
            assert gw.metric("gateway_in_flight_requests") == 0
            assert gw.metric("gateway_pending_tokens") == 0  # no token waits for its TTL
            ev = gw.wait_event("drop", reason="backend-lost")
            assert ev["count"] == LOST and ev["direction"] == "reply"
            assert elapsed < AT_ONCE
    finally:
        server.kill()
        server.wait(5)


BURST_S = 20.0  #: the 20,000-request burst of the test below, answered within
#: no reply for this long: the rest of the burst's replies were dropped (see the test below)
QUIET_MS = 3000


def _replies_arrived_or_counted(gw: Gateway, lazy: zmq.Socket[bytes], got: int,
                                sent: int) -> None:
    """Some of the reading client's replies did not come: each was dropped and counted
    ``hwm``, as libzmq's ROUTER drops what a peer's full pipe cannot take (on a 2-core machine
    under load the clients' libzmq I/O threads can fall behind the gateway for a while: 3 runs
    in 16 here). What the lazy client was sent is read now; with the reading client's, that
    is every reply the gateway forwarded, and the rest are its ``hwm`` drops."""
    gw.wait_metric("gateway_forwarded_messages_total", sent, timeout=20, direction="request")
    lazy_got = 0
    while lazy.poll(QUIET_MS):
        lazy.recv_multipart()
        lazy_got += 1
    rep = gw.metric("gateway_forwarded_messages_total", direction="reply")
    hwm = gw.metric("gateway_dropped_messages_total", reason="hwm")
    print(f"forwarded {rep:.0f} replies (read: {got} + {lazy_got}), {hwm:.0f} counted hwm")
    assert rep + hwm == sent and got + lazy_got == rep


def test_library_poller_burst_slow_client_and_prompt_stop() -> None:
    """20k x 1 KiB pipelined through pyzmq -> pynng; meanwhile a client that never reads has
    10,000 replies coming: the reading client gets its replies within BURST_S (any it does
    not get were counted: see _replies_arrived_or_counted) and then round trips as fast as
    before the burst (the median, against a baseline measured first; under 50 ms when quiet);
    SIGTERM ends the gateway with exit 0 within grace + 2 s. (The two clients share the
    poller's back-end window, hwm // 4 requests unanswered: the burst goes at 125 per round
    trip through the Python nng server, 4.5-4.6 s here on a quiet machine; BURST_S leaves
    room for a loaded CI machine.)"""
    n = 20_000
    grace = 1.0
    with NngServer() as server, Gateway(*bridge_args(
            url("zmq", ANY, "pyzmq"), url("sp", f"{LOCAL}:{server.port}", "pynng"),
            "--grace", str(grace)), metrics=True) as gw:
        with zmq_client("DEALER", lib_url(gw.front), RCVHWM=10) as lazy, \
                zmq_client("DEALER", lib_url(gw.front), timeout_ms=int(BURST_S * 1000),
                           SNDHWM=0, RCVHWM=0) as dealer:
            before = _round_trips(dealer, 300)  # the baseline: this gateway, this machine, now
            for _ in range(10_000):  # replies it will never read: past every buffer
                lazy.send_multipart([b"", b"x" * 1024])
            t0 = time.monotonic()
            for i in range(n):
                dealer.send_multipart([b"", b"%06d" % i + b"x" * 1018])
            got = 0
            while got < n and time.monotonic() < t0 + BURST_S and dealer.poll(QUIET_MS):
                dealer.recv_multipart()
                got += 1
            burst_s = time.monotonic() - t0
            print(f"{got:,} of 20,000 pipelined requests answered in {burst_s:.1f} s")
            assert burst_s < BURST_S
            if got < n:
                _replies_arrived_or_counted(gw, lazy, got + len(before),  # with the baseline's
                                            n + 10_000 + len(before))
            lat = _round_trips(dealer, 300)
            # the poller is left serving at its own pace (not spinning on the lazy client's
            # replies, no backlog left): the median as before the burst, and no round trip
            # waits for a backlog. Against the baseline measured above, not a fixed 50 ms p99:
            # loaded (4 xdist workers, two CPU hogs on 2 cores) p99 was 104.8 ms in 1 run of 3.
            # The median of a run is 0.2-0.4 ms or 10-12 ms, either side of the burst (seen
            # loaded: 0.30/11.83, 10.13/0.35): the 25 ms term covers that step, not a slowdown
            figures = (f"round trips before/after the burst: p50 {_p(before, 0.5) * 1e3:.2f}/"
                       f"{_p(lat, 0.5) * 1e3:.2f} ms, p99 {_p99(before) * 1e3:.1f}/"
                       f"{_p99(lat) * 1e3:.1f} ms, max {max(lat) * 1e3:.1f} ms")
            print(figures)
            assert _p(lat, 0.5) <= 3 * _p(before, 0.5) + 0.025, figures
            assert max(lat) < burst_s / 4, figures
            assert gw.metric("gateway_dropped_messages_total", reason="hwm") > 0  # the lazy one's
            t1 = time.monotonic()
            assert gw.terminate(signal.SIGTERM, timeout=grace + 5) == 0
            assert time.monotonic() - t1 < grace + 2.0  # 0.6 s measured on a loaded box


def test_a_flood_of_uncrossable_messages_is_counted_quietly() -> None:
    """100k messages of several frames toward SP (which carries one): exact counters, under
    100 log lines, and another client is served all through the flood, not after it."""
    n = 100_000
    with NngServer() as server, Gateway(*bridge_args(
            url("zmq", ANY, "native"), url("sp", f"{LOCAL}:{server.port}", "native")),
            metrics=True) as gw:
        lat: list[tuple[float, float]] = []  # (when a round trip ended, how long it took)
        stop = threading.Event()

        def measure() -> None:
            with zmq_client("REQ", lib_url(gw.front)) as req:
                while not stop.is_set():
                    s = time.perf_counter()
                    req.send(b"ping")
                    assert req.recv() == b"re:ping"
                    lat.append((time.perf_counter(), time.perf_counter() - s))
                    time.sleep(0.005)

        meter = threading.Thread(target=measure)
        meter.start()
        try:
            with zmq_client("DEALER", lib_url(gw.front), SNDHWM=0) as flood:
                t0 = time.perf_counter()
                for _ in range(n):
                    flood.send_multipart([b"", b"f1", b"f2"])
                gw.wait_metric("gateway_dropped_messages_total", n, timeout=60,
                               reason="multi-frame-body")
                t1 = time.perf_counter()
        finally:
            stop.set()
            meter.join(10)
        assert gw.metric("gateway_dropped_messages_total", reason="multi-frame-body") == n
        # not a benchmark: a starved client waits for the whole flood (one round trip spans it,
        # none ends inside it). Measured against the flood in this run, not a fixed bound: on
        # a loaded 2-core machine (4 xdist workers, two CPU hogs) p99 < 250 ms failed in both
        # of two runs (408 ms, 1.8 s); a stall stretches the flood as much as the round trip.
        # Fair: dozens of round trips end inside it (35 in 1.6-2.3 s, worst 90-350 ms, loaded)
        flood_s = t1 - t0
        during = [took for end, took in lat if t0 < end <= t1]
        worst = max(took for _, took in lat)
        figures = (f"{len(during)} round trips during a {flood_s:.2f} s flood, worst "
                   f"{worst * 1e3:.1f} ms, p99 {_p99([t for _, t in lat]) * 1e3:.1f} ms")
        print(figures)
        assert len(during) >= 3 and worst < flood_s, figures
        def logged() -> tuple[int, int]:
            drops = [ev for ev in gw.events() if ev.get("event", "").startswith("drop")]
            total = sum(ev.get("count", 1) + ev.get("suppressed", 0) if ev["event"] == "drop"
                        else ev["count"] for ev in drops)
            return len(drops), total

        deadline = time.monotonic() + 5  # the last second's summary line comes a second later
        while logged()[1] < n and time.monotonic() < deadline:
            time.sleep(0.1)
        lines, total = logged()
        assert total == n and 0 < lines < 100, (lines, total)


def test_pynng_front_burst_adds_up_and_says_what_it_cannot_confirm() -> None:
    """20k requests pipelined by one raw nng client through a pynng front: every request is
    forwarded, forwarded + dropped replies add up to what the client sent, and what the client
    got (the witness) falls short of the forwarded replies by no more than those counted as
    unconfirmed (nng takes a reply, then may drop it when the client's pipe queue is full)."""
    n = 20_000
    # libzmq's REP answers through a ROUTER that drops a reply, without a word, when its pipe
    # to the gateway is at SNDHWM (a loaded machine slows the gateway's reading of replies):
    # no send limit on the server, so what the test counts is the gateway's own accounting
    with ZmqServer("REP", options={"sndhwm": 0}) as server, Gateway(*bridge_args(
            url("sp", ANY, "pynng"), url("zmq", f"{LOCAL}:{server.port}", "native")),
            metrics=True) as gw:
        client = open_raw("REQ", recv_timeout_ms=2000)
        received = 0
        try:
            client.dial(lib_url(gw.front), block=True)
            for i in range(n):
                nng_raw_send(client, [(0x80000000 | i).to_bytes(4, "big")], b"b")
            gw.wait_metric("gateway_forwarded_messages_total", n, timeout=30, direction="request")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                replies = gw.metric("gateway_forwarded_messages_total", direction="reply")
                dropped = gw.metric("gateway_dropped_messages_total")
                if replies + dropped >= n:
                    break
                time.sleep(0.1)
            while True:
                try:
                    nng_raw_recv(client)
                except pynng.Timeout:
                    break
                received += 1
        finally:
            client.close()
        replies = gw.metric("gateway_forwarded_messages_total", direction="reply")
        dropped = gw.metric("gateway_dropped_messages_total")
        unconfirmed = gw.metric("gateway_unconfirmed_replies_total")
        assert replies + dropped == n, (
            f"server got {len(server.received)}, client got {received}\n"
            f"{gw.metrics_text()}\n{gw.stderr[-4000:]}")
        assert unconfirmed == replies  # every reply through nng's raw rep is taken on trust
        assert received <= replies and replies - received <= unconfirmed


def test_pynng_front_refuses_a_reply_to_a_client_that_left() -> None:
    left = threading.Event()

    def slow(frames: list[bytes]) -> list[bytes]:
        # the reply once the gateway has seen the client go (it was a fixed 1 s: on a loaded
        # machine the gateway might not yet have seen it, and forwarded the reply)
        left.wait(30)
        return [b"re:" + frames[-1]]

    with ZmqServer("REP", slow) as server, Gateway(*bridge_args(
            url("sp", ANY, "pynng"), url("zmq", f"{LOCAL}:{server.port}", "native")),
            metrics=True) as gw:
        with nng_req(lib_url(gw.front)) as gone:
            gone.send(b"bye")
            server.wait_received(1)  # it left with its request forwarded (not just queued)
            assert gw.metric("gateway_peers", side="front", bridge="bridge") == 1
        deadline = time.monotonic() + 20
        while gw.metric("gateway_peers", side="front", bridge="bridge") != 0:
            assert time.monotonic() < deadline, gw.metrics_text()
            time.sleep(0.02)
        left.set()
        gw.wait_metric("gateway_dropped_messages_total", 1, reason="client-gone")
        assert gw.metric("gateway_forwarded_messages_total", direction="reply") == 0


def test_probe_router_messages_are_counted_not_warned() -> None:
    """libzmq DEALERs with ZMQ_PROBE_ROUTER send an empty message on connect: counted as
    ``probe``, no warning line per client, and their requests are served."""
    with NngServer() as server, Gateway(*bridge_args(
            url("zmq", ANY, "native"), url("sp", f"{LOCAL}:{server.port}", "native")),
            metrics=True) as gw:
        for i in range(3):
            with zmq_client("DEALER", lib_url(gw.front), PROBE_ROUTER=1) as dealer:
                dealer.send_multipart([b"", b"q%d" % i])
                assert dealer.recv_multipart() == [b"", b"re:q%d" % i]
        assert gw.wait_metric("gateway_dropped_messages_total", 3, reason="probe") == 3
        assert not [ev for ev in gw.events()
                    if ev.get("event") == "drop" and ev.get("level") == "warning"]
