"""A bridge's control endpoint driven by zmq_proxy_steerable's own client (a pyzmq REQ sending
PAUSE, RESUME, STATISTICS and TERMINATE as zmq_proxy_steerable(3) shows), against a real nng
server, with the counters it reads held to the gateway's metrics; the same client against
libzmq's own steerable proxy, to show the replies have libzmq's shape."""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pynng
import pytest
import zmq
import zmq.devices

from gateway.tools.harness.gateway import Gateway, bridge_args
from gateway.tools.harness.procs import lib_url, run_cli
from interop_tests.helpers import wait_until

STAT_NAMES = [("front", "in"), ("front", "out"), ("back", "in"), ("back", "out")]


@pytest.fixture
def nng_echo() -> Iterator[str]:
    """An nng rep0 echo server ("re:" + request); its tcp address."""
    srv = pynng.Rep0()
    addr = str(srv.listen("tcp://127.0.0.1:0").local_address)

    def serve() -> None:
        try:
            while True:
                srv.send(b"re:" + srv.recv())
        except pynng.exceptions.Closed:
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield addr
    srv.close()
    t.join(5)


def steer(ctl: zmq.Socket, command: bytes) -> list[bytes]:
    """What zmq_proxy_steerable(3)'s example does: send a command, read the whole reply."""
    ctl.send(command)
    return ctl.recv_multipart()


def statistics(ctl: zmq.Socket) -> list[int]:
    parts = steer(ctl, b"STATISTICS")
    assert len(parts) == 8 and all(len(p) == 8 for p in parts), parts
    return [struct.unpack("=Q", p)[0] for p in parts]


def metric_stats(gw: Gateway) -> list[int]:
    out = []
    for side, direction in STAT_NAMES:
        for name in ("gateway_side_parts_total", "gateway_side_bytes_total"):
            out.append(int(gw.metric(name, bridge="bridge", side=side, direction=direction)))
    return out


def test_pyzmq_steers_a_zmq_to_nng_bridge(nng_echo: str) -> None:
    with Gateway(*bridge_args("@zmq+tcp://127.0.0.1:0", f">sp+tcp://{nng_echo}",
                              "--control", "@zmq+tcp://127.0.0.1:0"), metrics=True) as gw, \
            zmq.Context() as ctx:
        ctl = ctx.socket(zmq.REQ)
        ctl.rcvtimeo = 5000
        ctl.connect(lib_url(gw.ready["control"]))
        client = ctx.socket(zmq.REQ)
        client.rcvtimeo = 5000
        client.connect(lib_url(gw.front))
        for i in range(5):
            client.send(b"hello%d" % i)
            assert client.recv() == b"re:hello%d" % i
        stats = statistics(ctl)
        # a REQ client's request is [routing id (5), delimiter, body] at the front, one SP
        # message [request id (4) + body] at the back; the replies the same, the other way
        assert stats == [15, 5 * (5 + 6), 15, 5 * (5 + 9), 5, 5 * (4 + 9), 5, 5 * (4 + 6)]
        assert metric_stats(gw) == stats
        assert gw.metric("gateway_forwarded_messages_total", direction="request") == 5

        assert steer(ctl, b"PAUSE") == [b""]
        waiting = []
        for i in range(3):  # three clients' requests arrive while paused
            c = ctx.socket(zmq.REQ)
            c.connect(lib_url(gw.front))
            c.send(b"paused%d" % i)
            waiting.append(c)
        # nothing crosses while paused: a 0.3 s window (a slow machine only makes it weaker)
        assert waiting[0].poll(300) == 0
        assert statistics(ctl)[:2] == stats[:2]  # nothing taken from the front meanwhile
        assert steer(ctl, b"RESUME") == [b""]
        for i, c in enumerate(waiting):
            assert c.poll(5000) and c.recv() == b"re:paused%d" % i
        wait_until(lambda: metric_stats(gw) == statistics(ctl), 5, "metrics match STATISTICS")
        assert metric_stats(gw)[0] == 15 + 9
        assert gw.metric("gateway_dropped_messages_total") == 0  # PAUSE lost nothing

        assert steer(ctl, b"NONSENSE") == [b""]  # libzmq's REP answers anything, empty
        for word in ("pause", "resume", "unknown"):
            assert gw.metric("gateway_control_commands_total", command=word) == 1
        assert gw.metric("gateway_control_commands_total", command="statistics") >= 3
        assert steer(ctl, b"TERMINATE") == [b""]
        assert gw.p.wait(10) == 0  # drained as on SIGTERM, exit 0
        ev = gw.wait_event("shutdown.draining")
        assert ev["signal"] == "TERMINATE"
        commands = [e["command"] for e in gw.events() if e["event"] == "control.command"]
        assert commands[-2:] == ["unknown", "TERMINATE"]
        for sock in (ctl, client, *waiting):
            sock.close(0)


def test_the_same_client_reads_libzmq_replies_of_the_same_shape() -> None:
    """The client above, against libzmq's own steerable proxy (REP control): its replies
    are what the gateway gives (one empty part; eight 8-byte parts)."""
    proxy = zmq.devices.ThreadProxySteerable(zmq.ROUTER, zmq.DEALER, zmq.PUB, zmq.REP)
    in_port = proxy.bind_in_to_random_port("tcp://127.0.0.1")
    proxy.bind_out_to_random_port("tcp://127.0.0.1")
    ctl_port = proxy.bind_ctrl_to_random_port("tcp://127.0.0.1")
    proxy.start()
    with zmq.Context() as ctx:
        ctl = ctx.socket(zmq.REQ)
        ctl.rcvtimeo = 5000
        ctl.connect(f"tcp://127.0.0.1:{ctl_port}")
        assert steer(ctl, b"PAUSE") == [b""]
        assert steer(ctl, b"RESUME") == [b""]
        assert statistics(ctl) == [0] * 8
        assert steer(ctl, b"TERMINATE") == [b""]
        ctl.close(0)
    proxy.join(5)
    assert in_port


def test_an_sp_control_endpoint_and_its_allow_list(nng_echo: str) -> None:
    """sp+: an SP rep0 (nng req0 clients); STATISTICS is one 64-byte message. allow= keeps
    others out, as on any front."""
    with Gateway(*bridge_args("@sp+tcp://127.0.0.1:0", f">sp+tcp://{nng_echo}",
                              "--control", "@sp+tcp://127.0.0.1:0",
                              "--capture", "@zmq+tcp://127.0.0.1:0?allow=10.9.9.9"),
                 metrics=True) as gw:
        with pynng.Req0(dial=lib_url(gw.ready["control"]), recv_timeout=5000) as ctl, \
                pynng.Req0(dial=lib_url(gw.front), recv_timeout=5000) as client:
            client.send(b"x")
            assert client.recv() == b"re:x"
            ctl.send(b"STATISTICS")
            stats = struct.unpack("=8Q", ctl.recv())
            # an SP client's request: [pipe id][request id] + body at the front
            assert stats == (1, 4 + 4 + 1, 1, 4 + 4 + 4, 1, 4 + 4 + 4, 1, 4 + 4 + 1)
            ctl.send(b"PAUSE")
            assert ctl.recv_msg().bytes == b""  # (pynng's recv() fails on an empty message)
        with zmq.Context() as ctx:
            sub = ctx.socket(zmq.SUB)
            sub.connect(lib_url(gw.ready["capture"]))
            gw.wait_metric("gateway_refused_connections_total", 1, reason="not-allowed",
                           socket="bridge/capture")
            sub.close(0)


def test_mistakes_in_control_and_capture_are_all_reported_at_once(tmp_path: Path) -> None:
    cfg = tmp_path / "g.toml"
    cfg.write_text('[[bridge]]\nfront = "@zmq+tcp://127.0.0.1:5555"\n'
                   'back = ">sp+tcp://127.0.0.1:6000"\ncontrol = "@zmq+tcpx://h:1"\n'
                   'capture = "@zmq+tcp://127.0.0.1:5555?backend=pyzmq"\n'
                   'capture_format = "pcap"\n')
    r = run_cli("check", str(cfg))
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert any("capture_format" in line and "frames or records" in line for line in lines), lines
    assert any("control" in line and "tcpx" in line for line in lines), lines
    assert "Traceback" not in r.stderr
    ok = tmp_path / "ok.toml"  # two endpoints on one address: found before anything binds
    ok.write_text('[[bridge]]\nfront = "@zmq+tcp://127.0.0.1:5555"\n'
                  'back = ">sp+tcp://127.0.0.1:6000"\ncontrol = "@zmq+tcp://127.0.0.1:5555"\n')
    r = run_cli("check", str(ok))
    assert r.returncode == 2 and "control" in r.stderr and "bound by" in r.stderr, r.stderr
