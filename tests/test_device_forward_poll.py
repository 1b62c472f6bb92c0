"""gateway.device.forward_poll: the library poller's turns and shares, with real libzmq clients
(pyzmq) and a real nng server (pynng) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time

import pynng
import pytest
import zmq
import zmq.asyncio

from gateway.device import Bridge, forward_poll
from gateway.device.forward_poll import PER_CLIENT

pytestmark = pytest.mark.timeout(60)
_names = itertools.count(1)


class _SilentServer:
    """An nng rep0 server that reads every request and never answers."""

    def __init__(self) -> None:
        self.sock = pynng.Rep0(recv_timeout=100)
        self.sock.listen("tcp://127.0.0.1:0")
        self.port = socket.ntohs(self.sock.listeners[0].local_address.port)
        self.got: list[tuple[float, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                body = self.sock.recv()
            except pynng.Timeout:
                continue
            except pynng.Closed:
                return
            self.got.append((time.monotonic(), body))

    def bodies(self) -> list[bytes]:
        return [body for _, body in self.got]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def test_a_server_that_never_answers_slows_a_client_down_but_never_stops_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``hwm=2 * PER_CLIENT`` and a back-end budget of ``hwm // PER_CLIENT``: two requests
    unanswered, and as many may wait here, per client (the floor is two). a sends three: two
    go, the third waits until a slot of a's goes stale (``STALE``, made 1.5 s here so that the
    order cannot depend on the machine's load); b's request, sent meanwhile, goes at once (the
    floor is per client); a is never stopped."""
    stale = 1.5
    monkeypatch.setattr(forward_poll, "STALE", stale)
    monkeypatch.setattr(forward_poll, "BACKEND", PER_CLIENT)
    server = _SilentServer()

    async def main() -> None:
        ready, stop = asyncio.Event(), asyncio.Event()
        bridge = Bridge("zmq+tcp://127.0.0.1:0?backend=pyzmq",
                        f"sp+tcp://127.0.0.1:{server.port}?backend=pynng&hwm={2 * PER_CLIENT}",
                        name=f"poll-{next(_names)}", on_ready=lambda b: ready.set())
        task = asyncio.create_task(bridge.run(stop))
        ctx = zmq.asyncio.Context()
        a, b = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER)
        try:
            await asyncio.wait_for(ready.wait(), 10)
            front = bridge.front_url.replace("zmq+tcp://", "tcp://")
            for sock in (a, b):
                sock.linger = 0
                sock.connect(front)
            deadline = time.monotonic() + 10

            async def until(n: int) -> None:
                while len(server.got) < n and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)

            for i in range(3):
                await a.send_multipart([b"", b"a%d" % i])
            await until(2)
            await b.send_multipart([b"", b"b0"])
            await until(4)
            assert server.bodies() == [b"a0", b"a1", b"b0", b"a2"]
            t = {body: at for at, body in server.got}
            assert t[b"a2"] - t[b"a0"] >= stale * 0.9  # a's third waited for a stale slot
            # (the forwarding thread counts a request once its send returned: the server may
            # hold it a moment before)
            while bridge.ledger.forwarded("request") < 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert bridge.ledger.forwarded("request") == 4 and bridge.in_flight == 4
        finally:
            for sock in (a, b):
                sock.close(0)
            stop.set()
            await asyncio.gather(asyncio.wait_for(task, 10), return_exceptions=True)
            ctx.term()

    try:
        asyncio.run(main())
    finally:
        server.close()
