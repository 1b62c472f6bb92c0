"""A bridge's back end, watched: how many requests wait for a peer (the
``gateway_waiting_requests`` gauge) and one log line each time the back end's last peer goes
(``backend.down``) or its first comes back (``backend.up``; at the start, only a back end still without a peer after ``SETTLE`` is down), on every backend that can count
its peers (a ``-1`` back end cannot tell: nothing is logged for it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.logging import get_logger
from gateway.metrics import METRICS

log = get_logger("gateway.device")

#: seconds between two looks at the back end's peers (a counter read: cheap)
INTERVAL = 0.2
#: seconds between two lines of one bridge's back end (a flapping one: the counter is exact,
#: the next line says how many were held back)
WARN_INTERVAL = 10.0
#: seconds after the start before a back end without a peer is said to be down (its first
#: connection is being made)
SETTLE = 1.0


def waiting(back_peers: int, held: int, in_flight: int) -> int:
    """Requests waiting for a back-end peer: those the gateway holds because the back end has
    no room, plus, while it has no connected peer, those sent and not answered (queued in a
    library, or lost with the connection)."""
    return held + (in_flight if back_peers == 0 else 0)


async def watch_back(bridge: str, peers: Callable[[], int], waiting_now: Callable[[], int],
                     url: str, interval: float = INTERVAL, settle: float = SETTLE,
                     warn_interval: float = WARN_INTERVAL) -> None:
    """Log the back end's peers going and coming back until cancelled: every outage seen
    at a look (every ``interval``: a shorter one may be missed) is counted; a ``backend.down`` line at most every ``warn_interval`` (a back end that flaps:
    the next line says how many outages were not logged, ``suppressed``; one that is still down
    when the interval has passed gets its line then), and a ``backend.up`` after each
    ``backend.down`` logged. The first look is after ``settle``: a back end still connecting at
    the start is not down."""
    prev: int | None = None
    logged_down = False
    last_line = -warn_interval
    unlogged = 0  # outages counted since the last backend.down line
    METRICS.inc("gateway_backend_down_total", 0, bridge=bridge)  # (there from the start)
    await asyncio.sleep(settle)
    loop = asyncio.get_running_loop()
    while True:
        n = peers()
        if n >= 0:
            up = n > 0
            if not up and (prev is None or prev > 0):  # an outage begins
                METRICS.inc("gateway_backend_down_total", bridge=bridge)
                unlogged += 1
            now = loop.time()
            if not up and not logged_down and now - last_line >= warn_interval:
                more = {"suppressed": unlogged - 1} if unlogged > 1 else {}
                log.warning("backend.down", bridge=bridge, back=url, waiting=waiting_now(),
                            detail="no peer: requests wait until one connects (docs: "
                                   "observability, when the back end is down)", **more)
                logged_down, last_line, unlogged = True, now, 0
            elif up and logged_down:
                log.info("backend.up", bridge=bridge, back=url, peers=n, waiting=waiting_now())
                logged_down = False
            prev = n
        await asyncio.sleep(interval)


__all__ = ["INTERVAL", "SETTLE", "WARN_INTERVAL", "watch_back", "waiting"]
