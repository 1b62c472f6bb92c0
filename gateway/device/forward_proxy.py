"""Forwarding by the library itself (libzmq's ``zmq_proxy_steerable``), for a same-family
bridge whose adapter offers a proxy on both sides (:class:`gateway.adapter.LibraryProxy`).

The proxy runs in a thread without the GIL; this forwarder reads its statistics once a second
into the ledger's gauges and the ``gateway_proxy_forwarded_frames_total`` counter (libzmq counts
frames, not messages, and cannot time a hop: the proxy route is opt-in for that reason), and
stops it with TERMINATE, or by force when it is stalled on a full backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from gateway.adapter import LibraryProxy
from gateway.device.ledger import REPLY, REQUEST, Ledger
from gateway.metrics import METRICS

_clock = time.monotonic


class ProxyForwarder:
    def __init__(self, proxy: LibraryProxy, ledger: Ledger) -> None:
        self.proxy, self.ledger = proxy, ledger
        self._task: asyncio.Future[None] | None = None
        self._seen = [0, 0]
        bridge = ledger.bridge
        self._keys = [METRICS.declare("gateway_proxy_forwarded_frames_total", bridge=bridge,
                                      direction=d) for d in (REQUEST, REPLY)]
        self._forced = METRICS.declare("gateway_proxy_forced_stops_total", bridge=bridge)

    def start(self) -> None:
        self._task = asyncio.ensure_future(asyncio.to_thread(self.proxy.run))

    async def _refresh(self) -> None:
        stats = await asyncio.to_thread(self.proxy.statistics)
        if stats is None:
            return
        for i, total in enumerate(stats):
            METRICS.counters[self._keys[i]] += total - self._seen[i]
            self._seen[i] = total
        self.ledger.in_flight = max(0, stats[0] - stats[1])  # frames: exact for REQ/REP traffic

    async def failed(self) -> None:
        assert self._task is not None
        while not self._task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), 1.0)
            if not self._task.done():
                await self._refresh()
        self._task.result()

    def stop_requests(self) -> None:
        """libzmq's proxy has no one-way pause: requests keep crossing while replies drain."""

    async def drain(self, grace: float) -> None:
        deadline = _clock() + grace
        await self._refresh()
        while self.ledger.in_flight and _clock() < deadline:
            await asyncio.sleep(0.05)
            await self._refresh()

    def backlog(self) -> int:
        return 0

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            if await asyncio.to_thread(self.proxy.terminate):
                METRICS.counters[self._forced] += 1
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        self.proxy.close()
