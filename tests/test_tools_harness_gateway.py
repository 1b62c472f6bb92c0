"""gateway.tools.harness.gateway: the one gateway launcher, as a new interpreter and forked
from a prepared process (Zygote), each reporting READY and forwarding for real."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

CHILD = r"""
import sys, threading, time, zmq
from gateway.tools.harness.gateway import Gateway, Zygote
from gateway.tools.harness.procs import lib_url

zygote = Zygote() if sys.argv[1] == "zygote" else None   # before any thread: the fork is safe
ctx = zmq.Context()
rep = ctx.socket(zmq.REP)
port = rep.bind_to_random_port("tcp://127.0.0.1")

def serve():
    rep.send(b"re:" + rep.recv())

threading.Thread(target=serve, daemon=True).start()
t0 = time.monotonic()
with Gateway("bridge", "@zmq+tcp://127.0.0.1:0", f">zmq+tcp://127.0.0.1:{port}?backend=native",
             "--log-format", "json", zygote=zygote) as gw:
    ready_s = time.monotonic() - t0
    req = ctx.socket(zmq.REQ)
    req.rcvtimeo = 5000
    req.connect(lib_url(gw.front))
    req.send(b"hi")
    print("REPLY", req.recv().decode(), "READY_S", round(ready_s, 2), "PID", gw.pid, flush=True)
    req.close(0)
    print("EXIT", gw.stop(), flush=True)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["interpreter", "zygote"])
def test_the_launcher_starts_a_gateway_that_forwards(how: str) -> None:
    r = subprocess.run([sys.executable, "-c", CHILD, how], capture_output=True, text=True,
                       timeout=90)
    assert r.returncode == 0, r.stderr[-2000:]
    words = r.stdout.split()
    assert words[:2] == ["REPLY", "re:hi"], r.stdout + r.stderr[-2000:]
    assert "EXIT 0" in r.stdout  # SIGTERM: the bridge drains and exits 0


def test_a_zygote_that_is_never_used_exits_when_let_go() -> None:
    from gateway.tools.harness.gateway import Zygote

    z = Zygote()
    pid = z.pid
    z.close()  # closes its command pipe and reaps it
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_zygote_runs_one_gateway_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gateway.tools.harness.gateway import Zygote

    z = Zygote()
    child = z.spawn(["--version"], str(tmp_path / "err"))
    assert child.wait(30) == 0
    assert child.stdout.read().startswith("gateway ")
    with pytest.raises(RuntimeError, match="one gateway"):
        z.spawn(["--version"], str(tmp_path / "err2"))
    child.send_signal(signal.SIGTERM)  # already gone: no error
    assert child.poll() == 0
    time.sleep(0)
