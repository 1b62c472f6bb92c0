"""A live zmq -> nng bridge's capture endpoint: libzmq's frames to a pyzmq SUB; `gateway
capture` writing both sides as pcapng; real tshark with the shipped Lua dissectors counting
the messages of each side (equal to the forwarded counters) and showing the ZMTP envelope and
the SP backtrace of one request; `gateway replay` sending the capture's requests to nng again."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pynng
import pytest
import zmq

from gateway import kernel
from gateway.tools.harness.gateway import Gateway, bridge_args
from gateway.tools.harness.procs import lib_url, python_argv, run_cli
from interop_tests.helpers import wait_until

LUA = Path(__file__).resolve().parents[1] / "gateway" / "tools" / "wireshark"
TSHARK = shutil.which("tshark")


@pytest.fixture
def nng_echo() -> Iterator[tuple[str, list[bytes]]]:
    srv = pynng.Rep0()
    addr = str(srv.listen("tcp://127.0.0.1:0").local_address)
    seen: list[bytes] = []

    def serve() -> None:
        try:
            while True:
                req = srv.recv()
                seen.append(req)
                srv.send(b"re:" + req)
        except pynng.exceptions.Closed:
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield addr, seen
    srv.close()
    t.join(5)


def tshark(path: Path, *args: str) -> list[str]:
    assert TSHARK, "tshark is installed by .ci/system-deps.sh"
    out = subprocess.run([TSHARK, "-r", str(path), "-X", f"lua_script:{LUA / 'zmtp.lua'}",
                          "-X", f"lua_script:{LUA / 'sp.lua'}", *args],
                         capture_output=True, text=True, timeout=60, check=True)
    assert "Lua Error" not in out.stdout + out.stderr, out.stdout + out.stderr
    return out.stdout.splitlines()


def test_frames_capture_is_what_libzmq_capture_gives(nng_echo: tuple[str, list[bytes]]) -> None:
    addr, _ = nng_echo
    with Gateway(*bridge_args("@zmq+tcp://127.0.0.1:0", f">sp+tcp://{addr}",
                              "--capture", "@zmq+tcp://127.0.0.1:0"), metrics=True) as gw, \
            zmq.Context() as ctx:
        client = ctx.socket(zmq.DEALER)
        client.connect(lib_url(gw.front))
        # nobody reads yet: both copies (request and reply) are dropped and counted, the
        # forwarding goes on
        client.send_multipart([b"", b"lost"])
        assert client.poll(5000) and client.recv_multipart() == [b"", b"re:lost"]
        gw.wait_metric("gateway_capture_dropped_total", 2, timeout=5, reason="no-reader")
        assert gw.metric("gateway_capture_published_total") == 0
        sub = ctx.socket(zmq.SUB)
        sub.subscribe(b"")
        sub.connect(lib_url(gw.ready["capture"]))
        gw.wait_metric("gateway_capture_peers", 1, timeout=10)
        client.send_multipart([b"", b"ping"])
        assert client.poll(5000) and client.recv_multipart() == [b"", b"re:ping"]
        assert sub.poll(5000)
        frames = sub.recv_multipart()
        # as forwarded: a request to the SP back end is [request id][body]; a reply to the
        # ZeroMQ front is [routing id][delimiter][body], what libzmq's capture shows a ROUTER's
        assert frames[-1] in (b"ping", b"re:ping")
        if frames[-1] == b"ping":
            assert len(frames) == 2 and len(frames[0]) == 4 and frames[0][0] & 0x80
        else:
            assert len(frames) == 3 and frames[1] == b""
        assert sub.poll(5000)
        assert sub.recv_multipart()[-1] in (b"ping", b"re:ping")  # the other copy
        assert gw.metric("gateway_capture_published_total") == 2
        assert gw.metric("gateway_capture_dropped_total") == 2
        for s in (sub, client):
            s.close(0)


@pytest.mark.skipif(kernel.compiled is None, reason="the compiled kernel is not built")
def test_the_kernel_forwards_while_no_reader_can_take_a_copy(
        nng_echo: tuple[str, list[bytes]]) -> None:
    """A capture endpoint costs nothing while nobody can take a copy: the bridge runs on the
    compiled kernel (``bridge.up kernel=true``), and what the kernel forwarded is counted as
    dropped copies (``no-reader``); once a reader's subscription arrives, the next message
    goes through the Python step and its copies are published; a reader that stops reading
    hands the bridge back to the kernel (its copies ``hwm``), and forwarding never waits."""
    addr, _ = nng_echo
    with Gateway(*bridge_args("@zmq+tcp://127.0.0.1:0", f">sp+tcp://{addr}",
                              "--capture", "@zmq+tcp://127.0.0.1:0"), metrics=True) as gw, \
            zmq.Context() as ctx:
        assert gw.wait_event("bridge.up")["kernel"] is True
        client = ctx.socket(zmq.DEALER)
        client.connect(lib_url(gw.front))
        for i in range(50):  # nobody reads: the kernel's, each copy counted
            client.send_multipart([b"", b"k%d" % i])
            assert client.poll(5000) and client.recv_multipart() == [b"", b"re:k%d" % i]
        gw.wait_metric("gateway_capture_dropped_total", 100, timeout=5, reason="no-reader")
        assert gw.metric("gateway_capture_published_total") == 0
        assert gw.metric("gateway_forwarded_messages_total", direction="request") == 50
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, 10)
        sub.subscribe(b"")
        sub.connect(lib_url(gw.ready["capture"]))
        gw.wait_metric("gateway_capture_peers", 1, timeout=10)
        client.send_multipart([b"", b"seen"])
        assert client.poll(5000) and client.recv_multipart() == [b"", b"re:seen"]
        copies = []
        for _ in range(2):
            assert sub.poll(5000)
            copies.append(sub.recv_multipart()[-1])
        assert sorted(copies) == [b"re:seen", b"seen"]
        # the reader stops reading: once its queue and the socket buffers fill, its copies are
        # dropped at the mark and forwarding goes on at the kernel's pace
        body = b"x" * 4096
        for _ in range(2000):
            client.send_multipart([b"", body])
            assert client.poll(5000) and client.recv_multipart() == [b"", b"re:" + body]
        gw.wait_metric("gateway_capture_dropped_total", 1, timeout=5, reason="hwm")

        def accounted() -> float:  # every copy of the 2,051 round trips: published or dropped
            return (gw.metric("gateway_capture_published_total")
                    + gw.metric("gateway_capture_dropped_total"))

        wait_until(lambda: accounted() >= 2 * 2051, timeout=5, what="every copy counted")
        assert accounted() == 2 * 2051
        for s in (sub, client):
            s.close(0)


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed (.ci/system-deps.sh)")
def test_tshark_shows_both_sides_of_a_live_bridge(nng_echo: tuple[str, list[bytes]],
                                                   tmp_path: Path) -> None:
    addr, seen = nng_echo
    pcap = tmp_path / "bridge.pcapng"
    n = 6
    with Gateway(*bridge_args("@zmq+tcp://127.0.0.1:0", f">sp+tcp://{addr}",
                              "--capture", "@zmq+tcp://127.0.0.1:0",
                              "--capture-format", "records"), metrics=True) as gw, \
            zmq.Context() as ctx:
        cap = subprocess.Popen([*python_argv("-m", "gateway"), "capture", gw.ready["capture"],
                                str(pcap), "--count", str(2 * n), "--duration", "30"],
                               stderr=subprocess.PIPE, text=True)
        # the reader counts once its SUBSCRIBE has arrived: from then on it gets every copy
        gw.wait_metric("gateway_capture_peers", 1, timeout=10)
        client = ctx.socket(zmq.DEALER)  # a DEALER with an envelope of its own: [hop][""][body]
        client.connect(lib_url(gw.front))
        for i in range(n):
            client.send_multipart([b"app-hop", b"", b"order-%d" % i])
            assert client.poll(5000)
            assert client.recv_multipart() == [b"app-hop", b"", b"re:order-%d" % i]
        assert cap.wait(30) == 0, cap.stderr.read() if cap.stderr else ""
        forwarded = {d: int(gw.metric("gateway_forwarded_messages_total", direction=d))
                     for d in ("request", "reply")}
        client.close(0)
    assert forwarded == {"request": n, "reply": n}
    zmtp = tshark(pcap, "-Y", "zmtp.message", "-T", "fields", "-e", "tcp.dstport",
                  "-e", "_ws.col.Info")
    sp = tshark(pcap, "-Y", "sp.message", "-T", "fields", "-e", "tcp.dstport",
                "-e", "_ws.col.Info")
    # one message per line on each side; requests go to the gateway's front port (15555)
    # and to the server's (16000), replies the other way
    assert sum(line.startswith("15555\t") for line in zmtp) == forwarded["request"]
    assert sum(not line.startswith("15555\t") for line in zmtp) == forwarded["reply"]
    assert sum(line.startswith("16000\t") for line in sp) == forwarded["request"]
    assert sum(not line.startswith("16000\t") for line in sp) == forwarded["reply"]
    first_zmtp = next(line for line in zmtp if line.startswith("15555\t"))
    first_sp = next(line for line in sp if line.startswith("16000\t"))
    assert first_zmtp.endswith('envelope ["app-hop", \'\'] body ["order-0"]'), first_zmtp
    assert 'backtrace [id 0x' in first_sp and first_sp.endswith('body "order-0"'), first_sp
    print("\n" + first_zmtp + "\n" + first_sp)

    # replay: the front's requests, to the nng server again
    before = len(seen)
    r = run_cli("replay", str(pcap), f"sp+tcp://{addr}", "--rate", "1000", "--count", "4")
    assert r.returncode == 0, r.stderr
    assert "replayed 4 request(s), 4 replied" in r.stdout
    assert seen[before:] == [b"order-%d" % i for i in range(4)]

