"""What the interop suites share beyond the harness (``gateway.tools.harness``): a bounded
``asyncio.run``, the engine's count of pipes refused at the handshake, and the ``backends``
mark that runs a gateway test on every front/back backend pair."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from gateway.metrics import METRICS
from gateway.tools.harness.gateway import BACKEND_IDS, BACKENDS

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


#: parametrize a test over (front backend, back backend): library adapter ("lib") or engine
backends = pytest.mark.parametrize(("front_be", "back_be"), BACKENDS, ids=BACKEND_IDS)
