"""``gateway`` with a probe: the CLI as it is, plus a count of the event loop's asyncio tasks
appended to a file every few seconds (the gateway has no debug endpoint for it).

    GATEWAY_SOAK_TASKS=/tmp/tasks.txt python -m gateway.tools.soak_probe run gateway.toml

Each line of the file is ``<time.monotonic()> <tasks>``. The count runs on the loop itself (a
timer callback), so it sees the loop as it is between two callbacks.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

EVERY = 2.0


def _sample(path: str) -> None:
    with open(path, "a", encoding="ascii") as f:
        f.write(f"{time.monotonic():.3f} {len(asyncio.all_tasks())}\n")
    asyncio.get_running_loop().call_later(EVERY, _sample, path)


def main(argv: list[str] | None = None) -> int:
    from gateway import cli

    path = os.environ.get("GATEWAY_SOAK_TASKS", "")
    original = cli.run_loop

    def probing(main: Coroutine[Any, Any, T]) -> T:  # as gateway.engine.loop.run
        async def probed() -> T:
            if path:
                asyncio.get_running_loop().call_soon(_sample, path)
            return await main

        return original(probed())

    cli.run_loop = probing
    return cli.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
