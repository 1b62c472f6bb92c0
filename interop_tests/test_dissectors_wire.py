"""The shipped Wireshark dissectors on real wire bytes: dumpcap on the loopback while libzmq
talks to libzmq (pyzmq REQ/REP) and nng to nng (pynng req0/rep0) directly, then tshark with
``zmtp.lua`` and ``sp.lua`` decoding the files: the greetings and READY socket types, every
message, the SP headers' protocols and the backtrace's request id of each request and its
reply. Capturing on ``lo`` needs root (or dumpcap's capabilities): skipped otherwise."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pynng
import pytest
import zmq

from interop_tests.helpers import wait_until

LUA = Path(__file__).resolve().parents[1] / "gateway" / "tools" / "wireshark"
DUMPCAP, TSHARK = shutil.which("dumpcap"), shutil.which("tshark")
N = 3

pytestmark = [
    pytest.mark.skipif(DUMPCAP is None or TSHARK is None,
                       reason="dumpcap/tshark not installed (.ci/system-deps.sh)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="capturing on lo needs root here"),
]


def written(path: Path, display: str) -> int:
    """How many packets matching ``display`` dumpcap has written to ``path`` so far."""
    assert TSHARK
    r = subprocess.run([TSHARK, "-r", str(path), "-Y", display, "-T", "fields", "-e",
                        "frame.number"], capture_output=True, text=True, timeout=30)
    return len(r.stdout.split())


@contextmanager
def dumpcap(port: int, out: Path) -> Iterator[str]:
    """dumpcap on lo for ``tcp port PORT`` into ``out``. Entered once a probe connection's SYN
    is in the file (the filter is live); yields a display filter leaving the probes out; left
    once the test client's FIN is in the file (libpcap hands packets over a block at a time:
    a SIGINT at once could lose the last ones)."""
    assert DUMPCAP
    proc = subprocess.Popen([DUMPCAP, "-q", "-i", "lo", "-f", f"tcp port {port}", "-w", str(out)],
                            stderr=subprocess.PIPE, text=True)
    probes: list[int] = []
    try:
        for _ in range(10):  # a probe SYN, until one is written (each probe waited for 3 s)
            assert proc.poll() is None, f"dumpcap exited: {proc.stderr.read() if proc.stderr else ''}"
            with socket.create_connection(("127.0.0.1", port), timeout=5) as probe:
                probes.append(probe.getsockname()[1])
            with contextlib.suppress(AssertionError):
                wait_until(lambda: out.exists() and written(out, "tcp.flags.syn == 1") > 0, 3,
                           "dumpcap wrote the probe's SYN")
                break
        else:
            raise AssertionError("dumpcap never captured a probe connection on lo")
        test_only = " and ".join(f"tcp.port != {p}" for p in probes)
        yield test_only
        wait_until(lambda: written(out, f"tcp.flags.fin == 1 and {test_only}") >= 1, 20,
                   "dumpcap wrote the client's FIN")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def tshark(path: Path, display: str, only: str, *fields: str) -> list[list[str]]:
    """One row per packet matching ``display`` and ``only``: the fields (several values
    comma-joined)."""
    assert TSHARK
    out = subprocess.run(
        [TSHARK, "-r", str(path), "-X", f"lua_script:{LUA / 'zmtp.lua'}",
         "-X", f"lua_script:{LUA / 'sp.lua'}", "-o", "tcp.try_heuristic_first:TRUE",
         "-Y", f"({display}) and {only}", "-T", "fields", *(a for f in fields for a in ("-e", f))],
        capture_output=True, text=True, timeout=60, check=True)
    assert "Lua Error" not in out.stdout + out.stderr, out.stdout + out.stderr
    return [line.split("\t") for line in out.stdout.splitlines()]


def exchange(send: Callable[[bytes], None], recv: Callable[[], bytes]) -> None:
    for i in range(N):
        send(b"hello-%d" % i)
        assert recv() == b"re:hello-%d" % i


def serve(recv: Callable[[], bytes], send: Callable[[bytes], None]) -> threading.Thread:
    def run() -> None:
        for _ in range(N):
            send(b"re:" + recv())

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_zmtp_lua_decodes_libzmq_req_rep(tmp_path: Path) -> None:
    pcap = tmp_path / "zmtp.pcapng"
    with zmq.Context() as ctx:
        rep = ctx.socket(zmq.REP)
        rep.rcvtimeo = rep.sndtimeo = 10_000
        port = rep.bind_to_random_port("tcp://127.0.0.1")
        with dumpcap(port, pcap) as only:
            req = ctx.socket(zmq.REQ)
            req.rcvtimeo = req.sndtimeo = 10_000
            req.connect(f"tcp://127.0.0.1:{port}")
            server = serve(rep.recv, rep.send)
            exchange(req.send, req.recv)
            server.join(10)
            req.close(0)
        rep.close(0)
    # two greetings (3.x, NULL), two READYs naming the socket types
    greetings = tshark(pcap, "zmtp.version", only, "zmtp.version", "zmtp.mechanism")
    assert sorted(g[0] for g in greetings) == ["3.1", "3.1"], greetings
    assert all(g[1] == "NULL" for g in greetings), greetings
    ready = tshark(pcap, "zmtp.command == \"READY\"", only, "tcp.dstport", "zmtp.socket_type")
    assert sorted((r[0] == str(port), r[1]) for r in ready) == [(False, "REP"), (True, "REQ")]
    # every request and reply, each [delimiter][body] (a REQ's envelope)
    msgs = tshark(pcap, "zmtp.message", only, "tcp.dstport", "zmtp.frames", "zmtp.body_text")
    requests = [m for m in msgs if m[0] == str(port)]
    replies = [m for m in msgs if m[0] != str(port)]
    assert [m[1:] for m in requests] == [["2", f"hello-{i}"] for i in range(N)], msgs
    assert [m[1:] for m in replies] == [["2", f"re:hello-{i}"] for i in range(N)], msgs
    info = tshark(pcap, f"zmtp.message and tcp.dstport == {port}", only, "_ws.col.Info")
    assert info[0][0].endswith("envelope [''] body [\"hello-0\"]"), info


def test_sp_lua_decodes_nng_req_rep(tmp_path: Path) -> None:
    pcap = tmp_path / "sp.pcapng"
    with pynng.Rep0(recv_timeout=10_000, send_timeout=10_000) as rep:
        listener = rep.listen("tcp://127.0.0.1:0")
        port = int.from_bytes(listener.local_address.port.to_bytes(2, "little"), "big")
        with dumpcap(port, pcap) as only:
            with pynng.Req0(recv_timeout=10_000, send_timeout=10_000) as req:
                req.dial(f"tcp://127.0.0.1:{port}", block=True)
                server = serve(rep.recv, rep.send)
                exchange(req.send, req.recv)
                server.join(10)
    headers = tshark(pcap, "sp.protocol", only, "tcp.dstport", "sp.protocol")
    assert sorted((h[0] == str(port), h[1]) for h in headers) == [(False, "0x0031"),
                                                                   (True, "0x0030")], headers
    msgs = tshark(pcap, "sp.message", only, "tcp.dstport", "sp.hops", "sp.request_id",
                  "sp.body_text")
    requests = [m for m in msgs if m[0] == str(port)]
    replies = [m for m in msgs if m[0] != str(port)]
    assert [(m[1], m[3]) for m in requests] == [("1", f"hello-{i}") for i in range(N)], msgs
    assert [(m[1], m[3]) for m in replies] == [("1", f"re:hello-{i}") for i in range(N)], msgs
    ids = [int(m[2], 16) for m in requests]
    assert all(i & 0x80000000 for i in ids) and len(set(ids)) == N, ids
    assert [int(m[2], 16) for m in replies] == ids  # each reply carries its request's id
