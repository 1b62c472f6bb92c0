"""Shared helpers of the native-engine interop suites (``test_engine_*.py``): a bounded
``asyncio.run`` and the engine's count of pipes refused at the handshake."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from gateway.metrics import METRICS

TIMEOUT = 20.0


def run(coro: Awaitable[Any], timeout: float = TIMEOUT) -> Any:
    """``asyncio.run(coro)``, failing with ``TimeoutError`` after ``timeout`` seconds."""

    async def bounded() -> Any:
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


def pairing_errors() -> int:
    """How many pipes the engine closed for a ``PairingError`` so far (process-wide)."""
    return METRICS.get("gateway_pipes_closed_total", reason="PairingError")
