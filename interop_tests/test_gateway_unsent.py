"""Messages the gateway took and then could not deliver are counted, with real peers
(docs/observability.md: nothing is lost without a reason and a counter).

* pub/sub: an nng pub0 publisher -> gateway -> subscribers that stop reading (a libzmq SUB
  that does not call recv, an nng sub0 whose process is stopped). The gateway reads every
  message (it never back-pressures a publisher) and drops at each subscriber's mark, counted
  as ``hwm`` on the bridge: for every subscriber, delivered + dropped == published.
* a receiver that closes while messages wait for it in the gateway's queue toward it.

The publisher is given a send queue (``send_buffer_size``) large enough for the whole burst:
nng's pub0 drops on its own when the application publishes faster than it writes (its default
queue is 16 messages; measured without any gateway, pub0 -> sub0 directly: 68 to 126 of 400
arrive), and those drops are the publisher's, not the gateway's (``gateway_forwarded`` says
the gateway got every message).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pynng
import pytest
import zmq

from gateway.tools.harness.gateway import Gateway, bridge_args
from gateway.tools.harness.procs import LOCAL, free_port, lib_url
from interop_tests.helpers import wait_until

pytestmark = pytest.mark.timeout(60)

DROPPED = "gateway_dropped_messages_total"
FORWARDED = "gateway_forwarded_messages_total"
N = 1500  # published in one burst: 6 MB, past the mark (100 messages) and the sockets' buffers
BODY = b"x" * 4000

#: an nng sub0 in its own process (stopped with SIGSTOP: a subscriber that reads nothing):
#: prints "up" once a probe crossed, "fenced" once the fence did, then, once the burst came and
#: went quiet, the count of burst messages it got
NNG_SUBSCRIBER = """
import sys, pynng
s = pynng.Sub0(topics=b"", recv_buffer_size=8192, recv_timeout=1500)
s.dial(sys.argv[1], block=False)
while True:
    try:
        if s.recv().startswith(b"probe"):
            break
    except pynng.Timeout:
        pass
print("up", flush=True)
s.recv_timeout = 20000
while not s.recv().startswith(b"fence"):  # the probes published before it
    pass
print("fenced", flush=True)
got = 0
while True:
    try:
        m = s.recv()
    except pynng.Timeout:
        break
    if m.startswith(b"m"):
        got += 1
        s.recv_timeout = 1500
print(got, flush=True)
"""


def _zmq_subscribers(ctx: zmq.Context[zmq.Socket[bytes]], url: str, n: int
                     ) -> list[zmq.Socket[bytes]]:
    """``n`` libzmq subscribers to everything that read their connection only while the
    application reads (``rcvhwm`` 10, a 4 KiB receive buffer)."""
    subs = []
    for _ in range(n):
        s = ctx.socket(zmq.SUB)
        s.rcvhwm = 10
        s.setsockopt(zmq.RCVBUF, 4096)
        s.linger = 0
        s.connect(url)
        s.subscribe(b"")
        subs.append(s)
    return subs


def _count(sub: zmq.Socket[bytes], prefix: bytes, quiet_ms: int = 1500) -> int:
    """The messages starting with ``prefix`` that ``sub`` gets until it is quiet."""
    got = 0
    while sub.poll(quiet_ms):
        got += sub.recv().startswith(prefix)
    return got


@pytest.fixture
def publisher() -> Iterator[tuple[pynng.Pub0, int]]:
    port = free_port()
    pub = pynng.Pub0(send_buffer_size=8192)  # the burst fits: pub0 itself drops nothing
    pub.listen(f"tcp://{LOCAL}:{port}")
    yield pub, port
    pub.close()


def _probe_until(pub: pynng.Pub0, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 15
    while not done():
        assert time.monotonic() < deadline, "no probe crossed"
        pub.send(b"probe")
        time.sleep(0.05)


#: published once the probes crossed: the publisher's messages reach the gateway through one
#: pipe, in order, and the gateway counts each as it forwards it, so once a subscriber has the
#: fence every probe is in the forwarded count, and the burst's baseline can be read (a probe
#: published in the probing's last 50 ms may still be on its way when the probing ends)
FENCE = b"fence"


def _until_fence(sub: zmq.Socket[bytes]) -> None:
    """Reads ``sub`` (the probes still queued) until the fence, 15 s at most."""
    deadline = time.monotonic() + 15
    while not (sub.poll(100) and sub.recv() == FENCE):
        assert time.monotonic() < deadline, "the fence never crossed"


def test_slow_zmq_subscribers_of_an_nng_publisher_lose_only_counted_messages(
        publisher: tuple[pynng.Pub0, int]) -> None:
    pub, port = publisher
    with Gateway(*bridge_args(f"@zmq+tcp://{LOCAL}:0?pattern=pubsub&hwm=100",
                              f"sp+tcp://{LOCAL}:{port}"), metrics=True) as gw:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        try:
            subs = _zmq_subscribers(ctx, lib_url(gw.front), 2)
            crossed = [0] * len(subs)

            def probed() -> bool:
                for i, s in enumerate(subs):
                    while s.poll(0):
                        crossed[i] += s.recv().startswith(b"probe")
                return all(crossed)

            _probe_until(pub, probed)
            pub.send(FENCE)
            for s in subs:
                _until_fence(s)
            before = gw.metric(FORWARDED, direction="reply")
            for n in range(N):
                pub.send(b"m%05d" % n + BODY)
            # the gateway reads every message: none is left to nng's pub0 to drop
            wait_until(lambda: gw.metric(FORWARDED, direction="reply") - before >= N,
                       what="the whole burst read by the gateway")
            delivered = [_count(s, b"m") for s in subs]
            dropped = gw.metric(DROPPED, reason="hwm", bridge="bridge")
            forwarded = gw.metric(FORWARDED, direction="reply") - before
            events = gw.events()
        finally:
            ctx.destroy(0)
    assert dropped > 0, "the subscribers kept up: nothing tested"
    assert all(d < N for d in delivered)
    assert sum(delivered) + dropped == 2 * N, (delivered, dropped)
    assert forwarded == N
    assert any(ev.get("reason") == "hwm" and ev.get("bridge") == "bridge"
               for ev in events if ev.get("event") in ("drop", "drop.summary"))


def test_a_stopped_nng_subscriber_of_an_nng_publisher_loses_only_counted_messages(
        publisher: tuple[pynng.Pub0, int]) -> None:
    pub, port = publisher
    with Gateway(*bridge_args(f"@sp+tcp://{LOCAL}:0?pattern=pubsub&hwm=100",
                              f"sp+tcp://{LOCAL}:{port}"), metrics=True) as gw:
        child = subprocess.Popen([sys.executable, "-c", NNG_SUBSCRIBER, lib_url(gw.front)],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            os.set_blocking(child.stdout.fileno(), False)
            lines: list[str] = []

            def up() -> bool:
                lines.extend(child.stdout.readlines())  # type: ignore[union-attr]
                return any(line.strip() == "up" for line in lines)

            _probe_until(pub, up)
            pub.send(FENCE)
            wait_until(lambda: up() and any(line.strip() == "fenced" for line in lines),
                       timeout=20, what="the fence at the subscriber")
            child.send_signal(signal.SIGSTOP)  # reads nothing from now on
            before = gw.metric(FORWARDED, direction="reply")
            for n in range(N):
                pub.send(b"m%05d" % n + BODY)
            wait_until(lambda: gw.metric(FORWARDED, direction="reply") - before >= N,
                       what="the whole burst read by the gateway")
            wait_until(lambda: gw.metric(DROPPED, reason="hwm", bridge="bridge") > 0,
                       what="drops at the stopped subscriber's mark")
            child.send_signal(signal.SIGCONT)
            os.set_blocking(child.stdout.fileno(), True)
            out, _ = child.communicate(timeout=30)
            delivered = int((lines + out.splitlines())[-1])
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGCONT)
                child.kill()
                child.wait(5)
        dropped = gw.metric(DROPPED, reason="hwm", bridge="bridge")
        forwarded = gw.metric(FORWARDED, direction="reply") - before
    assert 0 < delivered < N
    assert delivered + dropped == N, (delivered, dropped)
    assert forwarded == N


def test_replies_queued_for_a_client_that_leaves_are_counted() -> None:
    """A libzmq DEALER sends a burst of requests and reads almost none of the replies, then
    closes: the replies waiting in the gateway's queue toward it are counted (``peer-gone``);
    those its own socket and the OS had taken are not the gateway's to count."""
    from gateway.tools.harness.peers.servers import NngServer

    n = 2000
    with NngServer(lambda body: b"r" * 4000) as server, Gateway(*bridge_args(
            f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{server.port}"), metrics=True) as gw:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        try:
            client = ctx.socket(zmq.DEALER)
            client.rcvhwm = 10
            client.setsockopt(zmq.RCVBUF, 4096)
            client.linger = 0
            client.connect(lib_url(gw.front))
            for i in range(n):
                client.send_multipart([b"", b"%d" % i])

            def crossed() -> float:  # every reply forwarded, or dropped at the client's mark
                return (gw.metric(FORWARDED, direction="reply")
                        + gw.metric(DROPPED, reason="hwm", bridge="bridge"))

            wait_until(lambda: crossed() >= n, what="every reply through the step")
            client.close(0)
            wait_until(lambda: gw.metric(DROPPED, reason="peer-gone", bridge="bridge") > 0,
                       what="the queued replies counted")
            lost = gw.metric(DROPPED, reason="peer-gone", bridge="bridge")
            forwarded = gw.metric(FORWARDED, direction="reply")
            events = gw.events()
        finally:
            ctx.destroy(0)
    assert lost <= forwarded
    assert any(ev.get("event") == "drop" and ev.get("reason") == "peer-gone"
               and ev.get("direction") == "reply" for ev in events)
