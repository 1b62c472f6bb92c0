"""A bridge's back end, watched: how many requests wait for a peer (the
``gateway_waiting_requests`` gauge) and one log line each time the back end's last peer goes
(``backend.down``) or its first comes back (``backend.up``; at the start, only a back end still without a peer after ``SETTLE`` is down), on every backend that can count
its peers (a ``-1`` back end cannot tell: nothing is logged for it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.logging import get_logger

log = get_logger("gateway.device")

#: seconds between two looks at the back end's peers (a counter read: cheap)
INTERVAL = 0.2
#: seconds after the start before a back end without a peer is said to be down (its first
#: connection is being made)
SETTLE = 1.0


def waiting(back_peers: int, held: int, in_flight: int) -> int:
    """Requests waiting for a back-end peer: those the gateway holds because the back end has
    no room, plus, while it has no connected peer, those sent and not answered (queued in a
    library, or lost with the connection)."""
    return held + (in_flight if back_peers == 0 else 0)


async def watch_back(bridge: str, peers: Callable[[], int], waiting_now: Callable[[], int],
                     url: str, interval: float = INTERVAL, settle: float = SETTLE) -> None:
    """Log the back end's peers coming and going until cancelled (the first look after
    ``settle``: a back end still connecting at the start is not down)."""
    last: int | None = None
    await asyncio.sleep(settle)
    while True:
        n = peers()
        if n >= 0:
            up = n > 0
            if last is None and not up or last is not None and up != (last > 0):
                if up:
                    log.info("backend.up", bridge=bridge, back=url, peers=n,
                             waiting=waiting_now())
                else:
                    log.warning("backend.down", bridge=bridge, back=url, waiting=waiting_now(),
                                detail="no peer: requests wait until one connects (docs: "
                                       "observability, when the back end is down)")
            last = n
        await asyncio.sleep(interval)


__all__ = ["INTERVAL", "SETTLE", "watch_back", "waiting"]
