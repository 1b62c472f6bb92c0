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
    """How many connections the engine refused for their socket type so far (process-wide):
    the peer's type was refused (``PairingError``), or the peer refused ours first (libzmq
    closes without its READY when ours arrives together with our greeting); both count as the
    handshake failure ``pairing``."""
    return METRICS.total_where("gateway_handshake_failures_total", reason="pairing")
