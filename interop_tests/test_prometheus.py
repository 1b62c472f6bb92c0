"""A real Prometheus scrapes running gateways while real ZeroMQ and nng peers send traffic.

One Prometheus (Debian's, from ``examples/prometheus/prometheus.yml`` with the shipped alert
rules, scraping every second) reads two gateways on 127.0.0.1:

* ``gateway run`` with two bridges to one nng REP server (pynng): ``orders`` (libzmq REQ clients,
  a libzmq DEALER whose multi-frame bodies are dropped as ``multi-frame-body``, raw TCP clients
  sending garbage) and ``secure`` (a CURVE front: an allowed libzmq CURVE client, and clients
  with an unknown key that are refused);
* ``gateway bridge --workers 2`` to another nng REP server, with libzmq REQ clients.

Checked through Prometheus's HTTP API against what the clients counted: forwarded rates while
traffic runs (within 0.5x-2x of the clients' own rate), exact forwarded and dropped counters by
reason once traffic pauses, hop-latency quantiles (``histogram_quantile``) inside what the
clients measured, readiness (back-end peers, ``up``, ``/readyz``), every query of the shipped
Grafana dashboard returning data, the shipped alerts turning pending on real situations (drop
ratio, a back end without peers, a worker that stops answering), and
the workers' summed counters never going backwards. ``promtool`` checks the configuration and
runs the rules' unit tests.

Skipped only when the prometheus binary is missing (CI installs it: .ci/system-deps.sh).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
import zmq
import zmq.auth

from gateway.metrics import BUCKETS
from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.servers import NngServer, zmq_client
from gateway.tools.harness.procs import LOCAL, free_port, lib_url
from gateway.workers import fetch
from interop_tests.prometheus_helpers import (
    EXAMPLES,
    MISSING,
    PROMETHEUS,
    Prometheus,
    dashboard_queries,
    promtool,
)

pytestmark = [pytest.mark.skipif(PROMETHEUS is None, reason=MISSING), pytest.mark.timeout(180)]

ORDERS_CLIENTS = 3
WORKER_CLIENTS = 6
GARBAGE = 12  # raw connections that send bytes no ZeroMQ peer would
STRANGERS = 2  # CURVE clients with a key the gateway does not allow
PACE = 0.01  # seconds a client waits between two requests
G, W = 'job="gateway"', 'job="gateway-workers"'


# ---------------------------------------------------------------------------------------------
# peers


class Paced(threading.Thread):
    """A libzmq client of ``kind`` in its own thread, taking one :meth:`step` every ``every``
    seconds while ``go`` is set (``pause`` waits until it is between two steps)."""

    kind = "REQ"

    def __init__(self, endpoint: str, tag: str, every: float = PACE, **options: Any) -> None:
        super().__init__(daemon=True)
        self.endpoint, self.tag, self.every, self.options = endpoint, tag, every, options
        self.sent = 0
        self.error: BaseException | None = None
        self.go, self.idle, self._halt = threading.Event(), threading.Event(), threading.Event()

    def step(self, sock: zmq.Socket) -> None:  # type: ignore[type-arg]
        raise NotImplementedError

    def run(self) -> None:
        try:
            with zmq_client(self.kind, self.endpoint, timeout_ms=10_000, **self.options) as s:
                while not self._halt.is_set():
                    if not self.go.is_set():
                        self.idle.set()
                        self.go.wait(0.1)
                        continue
                    self.idle.clear()
                    self.step(s)
                    time.sleep(self.every)
        except BaseException as exc:  # surfaced by the tests through check()
            self.error = exc
            self.idle.set()

    def pause(self) -> None:
        self.go.clear()
        assert self.idle.wait(15), f"{self.tag}: still busy 15 s after the pause"
        self.check()

    def stop(self) -> None:
        self._halt.set()
        self.go.set()
        self.join(15)

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"client {self.tag} failed: {self.error!r}")


class Requester(Paced):
    """A REQ client (CURVE with ``options``): counts what it sent and what came back, when,
    and how long each round trip took."""

    def __init__(self, endpoint: str, tag: str, **options: Any) -> None:
        super().__init__(endpoint, tag, **options)
        self.answered = 0
        self.rtts: list[float] = []
        self.stamps: list[float] = []  # monotonic time of each reply

    def step(self, sock: zmq.Socket) -> None:  # type: ignore[type-arg]
        t0 = time.monotonic()
        body = b"%s-%d" % (self.tag.encode(), self.sent)
        sock.send(body)
        self.sent += 1
        assert sock.recv() == b"re:" + body
        now = time.monotonic()
        self.rtts.append(now - t0)
        self.stamps.append(now)
        self.answered += 1


class Dropper(Paced):
    """A DEALER sending requests with a two-frame body, which no SP server can take: the
    gateway drops each one as ``multi-frame-body``."""

    kind = "DEALER"

    def step(self, sock: zmq.Socket) -> None:  # type: ignore[type-arg]
        sock.send_multipart([b"", b"part-1", b"part-2"])
        self.sent += 1


def send_garbage(endpoint: str, count: int) -> None:
    """``count`` TCP connections that each send an HTTP request line and wait to be closed."""
    host, port = lib_url(endpoint).removeprefix("tcp://").rsplit(":", 1)
    for _ in range(count):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: gateway\r\n\r\n")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    if not s.recv(4096):  # the gateway closed it
                        break
                except ConnectionResetError:
                    break
            else:
                raise AssertionError("the gateway kept a garbage connection open for 10 s")


# ---------------------------------------------------------------------------------------------
# the scene: servers, two gateways, clients, Prometheus


@dataclass
class Scene:
    prom: Prometheus
    gw: Gateway
    workers: Gateway
    server: NngServer
    orders: list[Requester]
    secure: Requester
    dropper: Dropper
    worker_clients: list[Requester]
    gw_metrics: str
    workers_metrics: str
    pids: list[int]
    strangers: int = 0  # auth failures the gateway counted for them

    @property
    def clients(self) -> list[Requester]:
        return [*self.orders, self.secure, *self.worker_clients]

    @property
    def peers(self) -> list[Paced]:
        return [*self.clients, self.dropper]

    def pause(self) -> None:
        for c in self.peers:
            c.pause()

    def resume(self) -> None:
        for c in self.peers:
            c.go.set()


def _pki(tmp: Path) -> dict[str, Any]:
    keys = {}
    for name in ("server", "client", "stranger"):
        pub, sec = zmq.auth.create_certificates(str(tmp), name)
        os.chmod(sec, 0o600)
        keys[name] = {"sec": sec, "keys": zmq.auth.load_certificate(sec)}
    allow = tmp / "allowed"
    allow.mkdir()
    (allow / "client.key").write_text((tmp / "client.key").read_text())
    return {"keys": keys, "allow": str(allow)}


def _curve(pki: dict[str, Any], who: str) -> dict[str, Any]:
    public, secret = pki["keys"][who]["keys"]
    return {"curve_publickey": public, "curve_secretkey": secret,
            "curve_serverkey": pki["keys"]["server"]["keys"][0]}


def _refuse_strangers(gw: Gateway, endpoint: str, pki: dict[str, Any]) -> int:
    """Clients with an unknown CURVE key try to connect until the gateway refused each of them
    at least once; returns the failures it counted."""
    with contextlib.ExitStack() as stack:
        for _ in range(STRANGERS):
            stack.enter_context(zmq_client("REQ", endpoint, **_curve(pki, "stranger")))
        gw.wait_metric("gateway_auth_failures_total", STRANGERS, timeout=20,
                       reason="unknown-key")
    # a retry in flight when the sockets closed may still be counted: the count is taken once
    # it holds over 0.5 s (re-read until then, 20 s at most), not after one fixed 0.5 s
    deadline = time.monotonic() + 20
    count = gw.metric("gateway_auth_failures_total", reason="unknown-key")
    while True:
        time.sleep(0.5)
        now = gw.metric("gateway_auth_failures_total", reason="unknown-key")
        if now == count or time.monotonic() > deadline:
            return int(now)
        count = now


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    tmp = tmp_path_factory.mktemp("prometheus")
    pki = _pki(tmp)
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(NngServer())
        server2 = stack.enter_context(NngServer())
        port = free_port()
        secure_front = (f"@zmq+tcp://{LOCAL}:0?curve_server=1&curve_cert="
                        f"{quote(pki['keys']['server']['sec'])}&curve_allow={quote(pki['allow'])}")
        config = tmp / "gateway.toml"
        config.write_text(
            f'[gateway]\nlog_format = "json"\nmetrics = "{LOCAL}:{port}"\n\n'
            f'[[bridge]]\nname = "orders"\nfront = "@zmq+tcp://{LOCAL}:0"\n'
            f'back = ">sp+tcp://{LOCAL}:{server.port}"\n\n'
            f'[[bridge]]\nname = "secure"\nfront = "{secure_front}"\n'
            f'back = ">sp+tcp://{LOCAL}:{server.port}"\n')
        gw = stack.enter_context(Gateway("run", str(config), bridges=2, metrics_port=port))
        fronts = {r["name"]: r["front"] for r in gw.readies}
        workers = stack.enter_context(Gateway(
            "bridge", f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{server2.port}",
            "--name", "pool", "--workers", "2", "--log-format", "json", metrics=True,
            ready_timeout=60))
        pids = workers.wait_event("workers.ready", timeout=30)["pids"]
        prom = stack.enter_context(Prometheus(
            tmp, {"gateway": [f"{LOCAL}:{port}"],
                  "gateway-workers": [f"{LOCAL}:{workers.metrics_port}"]},
            # the parent reads a stuck worker for up to 2 s before it answers without it
            timeouts={"gateway-workers": "3s"}))

        send_garbage(fronts["orders"], GARBAGE)
        strangers = _refuse_strangers(gw, lib_url(fronts["secure"]), pki)
        orders = [Requester(lib_url(fronts["orders"]), f"orders{i}")
                  for i in range(ORDERS_CLIENTS)]
        secure = Requester(lib_url(fronts["secure"]), "secure", **_curve(pki, "client"))
        dropper = Dropper(lib_url(fronts["orders"]), "dropper", every=0.05)
        pool = [Requester(lib_url(workers.front), f"pool{i}") for i in range(WORKER_CLIENTS)]
        s = Scene(prom, gw, workers, server, orders, secure, dropper, pool,
                  f"{LOCAL}:{port}", f"{LOCAL}:{workers.metrics_port}", pids, strangers)
        for c in s.peers:
            c.start()
            stack.callback(c.stop)
        s.resume()
        # traffic for a while, so that rates, quantiles and the alerts' windows have data
        prom.wait(f'count(up{{{G}}} == 1) + count(up{{{W}}} == 1)',
                  lambda r: bool(r) and float(r[0]["value"][1]) == 2, timeout=30,
                  what="both gateways scraped")
        time.sleep(8)
        yield s


# ---------------------------------------------------------------------------------------------
# the shipped files, without a running Prometheus


def test_promtool_checks_the_config_and_the_rules() -> None:
    done = promtool("check", "config", "prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 8 rules found" in done.stdout + done.stderr


def test_promtool_unit_tests_of_the_alert_rules_pass() -> None:
    done = promtool("test", "rules", "gateway-alerts.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_every_alert_has_a_unit_test() -> None:
    rules = yaml.safe_load((EXAMPLES / "gateway-alerts.yml").read_text())
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    tests = yaml.safe_load((EXAMPLES / "gateway-alerts.test.yml").read_text())
    tested = {case["alertname"] for t in tests["tests"] for case in t["alert_rule_test"]
              if case.get("exp_alerts")}
    assert names == tested, f"alerts without a firing test: {names - tested}"
    assert {"GatewayBackendWithoutPeers", "GatewayDropRatioHigh", "GatewayHandshakeFailures",
            "GatewayAuthFailures", "GatewayOpenFilesHigh", "GatewayWorkersNotAnswering"} <= names


# ---------------------------------------------------------------------------------------------
# a running Prometheus


def test_targets_are_up_and_every_rule_evaluates(scene: Scene) -> None:
    targets = scene.prom.targets()
    assert sorted(t["job"] for t in targets) == ["gateway", "gateway-workers"]
    assert all(t["health"] == "up" for t in targets), targets
    rules = scene.prom.rules()
    assert len(rules) == 8 and all(r["health"] == "ok" for r in rules), rules


def test_forwarded_rates_match_what_the_clients_count(scene: Scene) -> None:
    for clients, expr, window in (
            (scene.orders, f'sum(rate(gateway_forwarded_messages_total{{{G}, bridge="orders", '
                           f'direction="request"}}[5s]))', 5.0),
            ([scene.secure], f'sum(rate(gateway_forwarded_messages_total{{{G}, bridge="secure",'
                             f' direction="reply"}}[5s]))', 5.0),
            # scraped every 3 s: a wider window
            (scene.worker_clients, f'sum(rate(gateway_forwarded_messages_total{{{W}, '
                                   f'direction="request"}}[10s]))', 10.0)):
        seen = scene.prom.value(expr)
        now = time.monotonic()
        counted = sum(sum(1 for t in list(c.stamps) if t > now - window)
                      for c in clients) / window
        assert counted > 10, f"{expr}: the clients answered only {counted:.1f}/s"
        assert seen is not None and 0.5 * counted <= seen <= 2 * counted, (expr, seen, counted)
    for c in scene.clients:
        c.check()


def test_hop_latency_quantiles_are_inside_what_the_clients_measured(scene: Scene) -> None:
    worst = max(max(c.rtts) for c in scene.clients)
    # every hop is part of some client's round trip: no quantile can lie past the bucket
    # that holds the slowest round trip
    ceiling = (*BUCKETS, math.inf)[bisect_left(BUCKETS, worst)]
    for job, bridge in ((G, "orders"), (G, "secure"), (W, "pool")):
        quantiles = {}
        for q in (0.5, 0.99):
            for direction in ("request", "reply"):
                expr = (f"histogram_quantile({q}, sum by (le) (rate(gateway_hop_latency_seconds"
                        f'_bucket{{{job}, bridge="{bridge}", direction="{direction}"}}[10s])))')
                value = scene.prom.value(expr)
                assert value is not None and 0 < value <= ceiling, (expr, value, worst)
                quantiles[q, direction] = value
        for direction in ("request", "reply"):
            assert quantiles[0.5, direction] <= quantiles[0.99, direction]


def test_readiness_while_traffic_runs(scene: Scene) -> None:
    peers = scene.prom.values(f'gateway_peers{{{G}, side="back"}}', "bridge")
    assert peers == {"orders": 1, "secure": 1}
    fronts = scene.prom.values(f'gateway_peers{{{G}, side="front"}}', "bridge")
    assert fronts["orders"] >= ORDERS_CLIENTS + 1 and fronts["secure"] >= 1, fronts
    assert scene.prom.value(f'gateway_peers{{{W}, side="back"}}') == 2  # one per worker
    assert scene.prom.value('min(up{job=~"gateway.*"})') == 1
    for address in (scene.gw_metrics, scene.workers_metrics):
        status, body = fetch(address, "/readyz")
        assert status == 200, body
    assert not scene.prom.alerts("GatewayBackendWithoutPeers")


def test_every_dashboard_query_returns_data(scene: Scene) -> None:
    dashboard = json.loads((EXAMPLES / "gateway-dashboard.json").read_text())
    queries = dashboard_queries(dashboard, rate_interval="10s")
    assert len(queries) >= 15
    empty = []
    for where, expr in queries:
        result = scene.prom.query(expr)
        if not any(math.isfinite(float(s["value"][1])) for s in result):
            empty.append(f"{where}: {expr} -> {result}")
    assert not empty, "\n".join(empty)


def test_the_drop_ratio_alert_turns_pending_on_real_drops(scene: Scene) -> None:
    # a DEALER's multi-frame bodies are several per cent of what "orders" handles
    alerts = scene.prom.wait("ALERTS{alertname=\"GatewayDropRatioHigh\"}", bool, timeout=20)
    assert {(a["metric"]["bridge"], a["metric"]["reason"]) for a in alerts} == {
        ("orders", "multi-frame-body")}
    assert all(a["metric"]["alertstate"] == "pending" for a in alerts)  # for: 5m
    assert scene.strangers >= STRANGERS
    assert not scene.prom.alerts("GatewayOpenFilesHigh")
    assert not scene.prom.alerts("GatewayWorkersNotAnswering")


def test_counters_are_exact_once_traffic_pauses(scene: Scene) -> None:
    scene.pause()
    try:
        prom = scene.prom

        def exact(expr: str, want: float) -> None:
            prom.wait_value(expr, lambda v: v == want, timeout=15, what=f"{expr} == {want}")

        answered = sum(c.answered for c in scene.orders)
        assert answered == sum(c.sent for c in scene.orders)
        for direction in ("request", "reply"):
            exact(f'gateway_forwarded_messages_total{{{G}, bridge="orders", '
                  f'direction="{direction}"}}', answered)
            exact(f'gateway_forwarded_messages_total{{{G}, bridge="secure", '
                  f'direction="{direction}"}}', scene.secure.answered)
            exact(f'sum(gateway_forwarded_messages_total{{{W}, direction="{direction}"}})',
                  sum(c.answered for c in scene.worker_clients))
        exact(f'gateway_dropped_messages_total{{{G}, bridge="orders", '
              f'reason="multi-frame-body"}}', scene.dropper.sent)
        dropped = prom.values('gateway_dropped_messages_total{job=~"gateway.*"} > 0',
                              "reason")
        assert set(dropped) == {"multi-frame-body"}, dropped
        exact(f'sum(gateway_handshake_failures_total{{{G}, socket="orders/front", '
              f'reason="garbage"}})', GARBAGE)
        exact(f'sum(gateway_auth_failures_total{{{G}, socket="secure/front", '
              f'mechanism="CURVE", reason="unknown-key"}})', scene.strangers)
        exact(f'gateway_in_flight_requests{{{G}, bridge="orders"}}', 0)
        exact(f'sum(gateway_worker_processes{{{W}, state="answering"}})', 2)
    finally:
        scene.resume()


def test_a_stuck_worker_is_seen_and_the_sums_never_go_backwards(scene: Scene) -> None:
    scene.pause()  # a client of the stuck worker would wait for it
    prom, stuck = scene.prom, scene.pids[1]
    total = f'sum(gateway_forwarded_messages_total{{{W}, direction="request"}})'
    before = prom.wait_value(total, lambda v: v == sum(c.answered for c in scene.worker_clients))
    os.kill(stuck, signal.SIGSTOP)
    try:
        prom.wait_value(f'gateway_worker_processes{{{W}, state="answering"}}', lambda v: v == 1,
                        timeout=30)
        alert = prom.wait('ALERTS{alertname="GatewayWorkersNotAnswering"}', bool, timeout=15)
        assert alert[0]["metric"]["alertstate"] == "pending"  # for: 2m
        # the stuck worker's counts are still in the sum: no counter goes backwards
        assert prom.value(total) == before
    finally:
        os.kill(stuck, signal.SIGCONT)
    prom.wait_value(f'gateway_worker_processes{{{W}, state="answering"}}', lambda v: v == 2,
                    timeout=30)
    resets = prom.query(f'resets(gateway_forwarded_messages_total{{{W}}}[5m]) > 0')
    assert not resets, resets
    scene.resume()


def test_a_back_end_without_peers_is_seen(scene: Scene) -> None:
    """Last: it stops the nng server that "orders" and "secure" talk to."""
    scene.pause()
    scene.server.stop()
    prom = scene.prom
    prom.wait(f'gateway_peers{{{G}, side="back"}} == 0', lambda r: len(r) == 2, timeout=20)
    status, body = fetch(scene.gw_metrics, "/readyz")
    assert status == 503 and "orders waiting" in body and "secure waiting" in body, body
    alerts = prom.wait('ALERTS{alertname="GatewayBackendWithoutPeers"}',
                       lambda r: len(r) == 2, timeout=15)
    assert {a["metric"]["bridge"] for a in alerts} == {"orders", "secure"}
    assert prom.value('min(up{job=~"gateway.*"})') == 1  # the gateway itself serves on
