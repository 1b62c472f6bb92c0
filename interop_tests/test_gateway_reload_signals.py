"""Reloads and signals through the real process: a reload that cannot end the
gateway, ``[gateway] unknown_peers`` applied on reload, signals while stopping."""

from __future__ import annotations

import contextlib
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.procs import LOCAL, free_port
from interop_tests.helpers import wait_until

pytestmark = pytest.mark.timeout(90)


def _readyz(gw: Gateway) -> int:
    try:
        with urllib.request.urlopen(f"http://{LOCAL}:{gw.metrics_port}/readyz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def test_a_wrong_typed_unknown_peers_on_reload_is_refused_and_a_good_one_applied(
        tmp_path: Path) -> None:
    """The review: `unknown_peers = ["ready"]` then SIGHUP raised TypeError and killed the
    gateway; now refused (logged), and a right value is applied to /readyz at once."""
    cfg = tmp_path / "g.toml"
    bridge = (f'[[bridge]]\nname = "p"\nfront = "@sp+tcp://{LOCAL}:0?pattern=pipeline"\n'
              f'back = ">zmq+tcp://{LOCAL}:{free_port()}?backend=pyzmq"\n')
    cfg.write_text('[gateway]\n' + bridge)
    with Gateway("run", str(cfg), "--log-format", "json", metrics=True) as gw:
        assert gw.proc is not None
        assert _readyz(gw) == 503  # back=-1, unknown_peers "waiting"
        cfg.write_text('[gateway]\nunknown_peers = ["ready"]\n' + bridge)
        gw.proc.send_signal(signal.SIGHUP)
        ev = gw.wait_event("config.reload_failed")
        assert "unknown_peers" in ev["error"] and str(cfg) in ev["error"]
        assert gw.alive() and _readyz(gw) == 503
        cfg.write_text('[gateway]\nunknown_peers = "ready"\n' + bridge)
        gw.proc.send_signal(signal.SIGHUP)
        ev = gw.wait_event("config.changed", gateway="unknown_peers")
        assert (ev["unknown_peers"], ev["was"]) == ("ready", "waiting")
        wait_until(lambda: _readyz(gw) == 200, what="/readyz 200 once unknown_peers is ready")
        assert "Traceback" not in gw.stderr


def test_a_second_sigterm_forces_the_workers_exit() -> None:
    """The review: with --workers, the parent's second SIGTERM sat unread while it waited
    for the workers' drain (the grace): now it is passed on and ends the drain."""
    from gateway.tools.harness.peers.servers import NngServer, zmq_client
    from gateway.tools.harness.procs import lib_url

    with NngServer(lambda body: None) as server, Gateway(  # takes requests, never answers
            "bridge", f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{server.port}",
            "--workers", "2", "--grace", "30", "--log-format", "json", ready_timeout=60) as gw, \
            contextlib.ExitStack() as clients:
        gw.wait_event("workers.ready", timeout=30)
        for i in range(6):
            client = clients.enter_context(zmq_client("DEALER", lib_url(gw.front)))
            client.send_multipart([b"", b"held %d" % i])
        wait_until(lambda: len(server.received) == 6, what="the requests at the server")
        assert gw.proc is not None
        gw.proc.send_signal(signal.SIGTERM)
        gw.wait_event("workers.stopping")
        t0 = time.monotonic()
        gw.proc.send_signal(signal.SIGTERM)
        rc = gw.proc.wait(25)
        assert time.monotonic() - t0 < 10, "not forced: the workers drained for the grace"
        assert rc == 0
        gw.wait_event("workers.forced")


def test_signals_after_the_drain_do_not_kill_the_process() -> None:
    """The review: a signal that landed after the drain, before the exit, killed the process
    by the signal (rc -2). Signals sent without a pause until it exits: exit 0 each time."""
    for _ in range(3):
        with Gateway("bridge", f"@sp+tcp://{LOCAL}:0", f">zmq+tcp://{LOCAL}:{free_port()}",
                     "--log-format", "json") as gw:
            assert gw.proc is not None
            deadline = time.monotonic() + 20
            while gw.proc.poll() is None:
                assert time.monotonic() < deadline, "no exit"
                with contextlib.suppress(ProcessLookupError):
                    gw.proc.send_signal(signal.SIGINT)
                time.sleep(0.001)
            assert gw.proc.returncode == 0, gw.stderr[-2000:]
            assert "Traceback" not in gw.stderr


# -- a reload that changes a bridge, with requests in flight ------------------------------------
RELOAD_N = 150  # requests, one every 5 ms; the reload comes after a third of them


def _reload_under_load(tmp_path: Path, grace: float, front_query: tuple[str, str] = ("", ""),
                       delay: float = 0.02) -> tuple[int, dict[str, float], list[dict[str, object]]]:
    """A libzmq DEALER sends RELOAD_N requests through a ``gateway run`` bridge to an nng
    server that answers one each ``delay`` (slower than they come: requests pile up in
    flight); after a third, the config changes the bridge's back options (and the front's
    query, ``front_query`` before and after) and SIGHUP. The replies that arrive, and the
    bridge's drops by reason, and the log lines."""
    import zmq

    from gateway.tools.harness.peers.servers import NngServer

    def answer(body: bytes) -> bytes:
        time.sleep(delay)
        return b"re:" + body

    cfg = tmp_path / "g.toml"
    port = free_port()

    def write(ivl: int, query: str) -> None:
        cfg.write_text(f'[limits]\ngrace = {grace}\n[[bridge]]\nname = "b"\n'
                       f'front = "@zmq+tcp://{LOCAL}:{port}{query}"\n'
                       f'back = ">sp+tcp://{LOCAL}:{server.port}"\n'
                       f'back_options = {{ reconnect_ivl = {ivl} }}\n')

    with NngServer(answer) as server:
        write(50, front_query[0])
        with Gateway("run", str(cfg), "--log-format", "json", metrics=True) as gw:
            ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
            client = ctx.socket(zmq.DEALER)
            client.linger = 0
            client.connect(f"tcp://{LOCAL}:{port}")
            got: set[bytes] = set()
            try:
                for i in range(RELOAD_N):
                    client.send_multipart([b"", b"%d" % i])
                    if i == RELOAD_N // 3:
                        write(60, front_query[1])
                        assert gw.proc is not None
                        gw.proc.send_signal(signal.SIGHUP)
                    time.sleep(0.005)
                    while client.poll(0):
                        got.add(client.recv_multipart()[-1])
                gw.wait_event("config.reloaded", timeout=grace + 10)

                def dropped() -> dict[str, float]:
                    return {dict(labels)["reason"]: v for (name, labels), v in gw.metrics().items()
                            if name == "gateway_dropped_messages_total" and v}

                deadline = time.monotonic() + RELOAD_N * delay + 5
                drops = dropped()
                while len(got) + sum(drops.values()) < RELOAD_N:  # each answered or counted
                    assert time.monotonic() < deadline, (len(got), drops)
                    if client.poll(100):
                        got.add(client.recv_multipart()[-1])
                    else:
                        drops = dropped()
                events = gw.events()
            finally:
                ctx.destroy(0)
            return len(got), drops, events


def test_a_reload_that_changes_a_bridge_behind_the_same_front_loses_no_request(
        tmp_path: Path) -> None:
    """The review: 152 of 300 requests arrived across a reload that changed the bridge (the
    old one read the clients' requests during its drain and dropped them). Now the new bridge
    takes over the front (its clients stay connected) while the old one drains its back end:
    every request is answered."""
    replies, drops, events = _reload_under_load(tmp_path, grace=10)
    assert replies == RELOAD_N, drops
    assert not drops
    replaced = [e for e in events if e.get("event") == "bridge.replaced"]
    assert replaced and int(replaced[0]["in_flight"]) > 0  # type: ignore[call-overload]


def test_a_reload_past_the_grace_counts_what_it_loses(tmp_path: Path) -> None:
    """Requests still in flight on the replaced bridge when its grace runs out: counted
    (``drain-timeout``), never lost silently."""
    replies, drops, _ = _reload_under_load(tmp_path, grace=0.3)
    assert drops.get("drain-timeout", 0) > 0
    assert replies + sum(drops.values()) == RELOAD_N, (replies, drops)


def test_a_reload_that_changes_the_front_counts_what_it_loses(tmp_path: Path) -> None:
    """A changed front (here its hwm) cannot be taken over: the old bridge stops, drains and
    closes its front; what its clients sent meanwhile is counted (``shutdown``), what they
    send while no front listens waits in libzmq for the new one."""
    replies, drops, _ = _reload_under_load(tmp_path, grace=10, front_query=("", "?hwm=900"))
    assert drops.get("shutdown", 0) > 0
    assert replies + sum(drops.values()) == RELOAD_N, (replies, drops)
