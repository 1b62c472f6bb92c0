"""A native socket's dial of one endpoint: connect, and redial with backoff until closed
(libzmq's RECONNECT_IVL / RECONNECT_IVL_MAX, jittered), counting and logging failed dials
(``gateway_dial_failures_total{reason}``; one ``dial.failed`` line per endpoint and interval)."""

from __future__ import annotations

import asyncio
import errno
import random
from collections.abc import Callable
from functools import partial
from typing import Any

from gateway.engine.pipe import Pipe
from gateway.logging import get_logger
from gateway.metrics import METRICS
from gateway.transport import TransportSpec

log = get_logger("gateway.engine")

#: Seconds between two warnings about failed dials to one endpoint (the counter is exact).
DIAL_WARN_INTERVAL = 10.0


def dial_reason(exc: OSError) -> str:
    """``refused`` (nobody listens), ``unreachable`` (no route, host down), ``timeout``, or
    ``error``: the label of ``gateway_dial_failures_total``."""
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, TimeoutError):
        return "timeout"
    if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.ENETDOWN,
                     errno.ENOENT):  # ENOENT: an ipc path nobody bound
        return "unreachable"
    return "error"


class Dialer:
    """Dials ``address`` over ``transport`` until :meth:`close`. ``new_pipe(lost)`` makes the
    pipe of one attempt; ``lost`` resolves when its connection ends (True: it worked for a
    while, so the backoff starts over)."""

    def __init__(self, url: str, address: str, transport: TransportSpec, options: Any,
                 new_pipe: Callable[[asyncio.Future[bool]], Pipe], name: str) -> None:
        self.url = url
        self.address = address
        self.transport = transport
        self.options = options
        self.new_pipe = new_pipe
        self.name = name
        self.closed = False
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        options, transport = self.options, self.transport
        delay = options.reconnect_ivl
        loop = asyncio.get_running_loop()
        warned_at, held = -DIAL_WARN_INTERVAL, 0  # one warning per endpoint and interval
        while not self.closed:
            lost: asyncio.Future[bool] = loop.create_future()
            pause = delay * (0.5 + random.random())
            try:
                await transport.dial(self.address, partial(self.new_pipe, lost),
                                     keepalive=options.keepalive, buffers=options.buffers,
                                     tls=options.tls)
            except OSError as exc:
                lost.cancel()
                reason = dial_reason(exc)
                METRICS.inc("gateway_dial_failures_total", reason=reason)
                if loop.time() - warned_at >= DIAL_WARN_INTERVAL:
                    log.warning("dial.failed", url=self.url, reason=reason, error=str(exc),
                                retry_in=round(pause, 3), socket=self.name,
                                **({"suppressed": held} if held else {}))
                    warned_at, held = loop.time(), 0
                else:
                    held += 1
            else:
                if await lost:
                    delay = options.reconnect_ivl  # it worked for a while: start over
                    pause = delay * (0.5 + random.random())
                    warned_at, held = -DIAL_WARN_INTERVAL, 0
            if self.closed:
                break
            await asyncio.sleep(pause)
            delay = min(delay * 2, options.reconnect_ivl_max)

    def close(self) -> None:
        self.closed = True
        self.task.cancel()


__all__ = ["DIAL_WARN_INTERVAL", "Dialer", "dial_reason"]
