"""gateway.device.watch: requests waiting for a back-end peer, and the back end's outages
(one line each, at most one every WARN_INTERVAL per bridge; the counter is exact)."""

from __future__ import annotations

import asyncio

from gateway.device.watch import waiting, watch_back
from gateway.metrics import METRICS


def test_waiting_counts_held_requests_and_those_in_flight_without_a_peer() -> None:
    assert waiting(back_peers=0, held=2, in_flight=3) == 5
    assert waiting(back_peers=1, held=2, in_flight=3) == 2  # in flight to a live peer: not waiting
    assert waiting(back_peers=-1, held=0, in_flight=3) == 0  # cannot tell: nothing claimed


class _Lines:
    """The watcher's log lines, at every level (the tests' structlog logs warnings only)."""

    def __init__(self) -> None:
        self.lines: list[dict[str, object]] = []

    def info(self, event: str, **fields: object) -> None:
        self.lines.append({"event": event, "level": "info", **fields})

    def warning(self, event: str, **fields: object) -> None:
        self.lines.append({"event": event, "level": "warning", **fields})


def _watch(states: list[int], warn_interval: float) -> list[dict[str, object]]:
    """Run the watcher over ``states`` (one per look); its backend.* lines."""
    import gateway.device.watch as watch

    lines = _Lines()
    saved, watch.log = watch.log, lines
    seen: list[int] = []
    values = iter(states)

    def peers() -> int:
        value = next(values, states[-1])
        seen.append(value)
        return value

    async def main() -> None:
        task = asyncio.ensure_future(watch_back("w", peers, lambda: 4, "sp+tcp://x:1",
                                                interval=0.001, settle=0,
                                                warn_interval=warn_interval))
        while len(seen) < len(states) + 3:
            await asyncio.sleep(0.001)
        task.cancel()

    try:
        asyncio.run(main())
    finally:
        watch.log = saved
    return lines.lines


def test_each_outage_is_logged_with_its_end() -> None:
    events = _watch([1, 0, 0, 2, 2, 0, 1], warn_interval=0)
    assert [(e["event"], e.get("peers")) for e in events] == [
        ("backend.down", None), ("backend.up", 2), ("backend.down", None), ("backend.up", 1)]
    assert events[0]["waiting"] == 4


def test_a_flapping_back_end_is_rate_limited_and_counted() -> None:
    before = METRICS.get("gateway_backend_down_total", bridge="w")
    events = _watch([0, 1, 0, 1, 0, 1, 0, 1], warn_interval=60)
    assert [e["event"] for e in events] == ["backend.down", "backend.up"]
    assert METRICS.get("gateway_backend_down_total", bridge="w") - before == 4
