"""What the engine's tests share: an async test run in its own event loop under a deadline, a
bounded wait for a condition, and the pipe-closed counter (imported by name: pytest puts
``tests/`` on ``sys.path``)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from gateway.metrics import METRICS


def run(coro: Awaitable[Any], timeout: float = 20.0) -> Any:
    """``coro`` in a new event loop; ``TimeoutError`` after ``timeout`` seconds."""

    async def bounded() -> Any:
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


def bounded(timeout: float) -> Callable[[Callable[..., Coroutine[Any, Any, None]]],
                                        Callable[..., None]]:
    """An ``async def`` test, run by :func:`run` with ``timeout`` (pytest sees a plain test
    with the same arguments, so fixtures and parametrize work as before)."""

    def wrap(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
        @functools.wraps(test)
        def runner(*args: Any, **kwargs: Any) -> None:
            run(test(*args, **kwargs), timeout)

        return runner

    return wrap


async def until(pred: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``pred`` every 10 ms until it holds; ``TimeoutError`` after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(0.01)


def closed(reason: str) -> int:
    return METRICS.get("gateway_pipes_closed_total", reason=reason)


async def round_trip(client: Any, server: Any, request: bytes, reply: bytes) -> None:
    """``client`` sends ``request``, ``server`` gets exactly it and answers ``reply``, which
    ``client`` gets."""
    await client.send(request)
    got = await server.recv()
    assert got == request, (got, request)
    await server.send(reply)
    got = await client.recv()
    assert got == reply, (got, reply)
