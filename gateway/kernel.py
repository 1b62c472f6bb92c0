"""The compiled forwarding kernel's seam (aiohttp's and msgpack's habit): which implementation
runs, chosen once, here.

``compiled`` is :mod:`gateway._kernel` when it was built and ``GATEWAY_NO_EXTENSIONS`` is not
set; else ``None`` and the pure-Python engine, the reference, runs everything. A bridge whose
two sides run on the native engine forwards request-reply through the kernel, one call per
read (:class:`gateway._kernel.Kernel`), and keeps its tokens and requests in flight in the
kernel's compiled tables; the tables have the reference's interface, so the rest of the
gateway cannot tell which it holds.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any

#: set (to anything but "" or "0") to run the pure-Python engine even where the kernel is built;
#: setup.py reads it with the same words, and builds no kernel then
NO_EXTENSIONS = os.environ.get("GATEWAY_NO_EXTENSIONS", "") not in ("", "0")

#: a free-threaded CPython running without the GIL: the kernel does not declare itself safe
#: there (it reads the engine's objects unlocked), and importing it would turn the GIL back on
#: for the whole process, so such a build runs the pure-Python engine
FREE_THREADED = not getattr(sys, "_is_gil_enabled", lambda: True)()


def _load() -> ModuleType | None:
    if NO_EXTENSIONS or FREE_THREADED:
        return None
    try:
        return importlib.import_module("gateway._kernel")
    except ImportError:  # not built (no compiler at install): the reference runs
        return None


compiled: ModuleType | None = _load()

#: "compiled" or "pure": what ``gateway --version`` and ``gateway_build_info`` say
IMPLEMENTATION = "compiled" if compiled is not None else "pure"


def why() -> str:
    """Which path runs and why, in words (``gateway --version``)."""
    if compiled is not None:
        return "compiled kernel"
    if NO_EXTENSIONS:
        return "pure Python: GATEWAY_NO_EXTENSIONS is set"
    if FREE_THREADED:
        return "pure Python: a free-threaded build without the GIL"
    return "pure Python: the compiled kernel is not built"


def token_table(max_entries: int, ttl: float, start: int | None = None,
                max_bytes: int | None = None) -> Any:
    """A bridge's token table: the kernel's when it runs, else the reference's (``max_bytes``:
    its byte budget, the bridge's ``pending_bytes``; None: none but the count)."""
    from gateway.envelope.tokens import NO_BYTE_BOUND, TokenTable

    bound = NO_BYTE_BOUND if max_bytes is None else max_bytes
    if compiled is not None:
        return compiled.TokenTable(max_entries, ttl, max_bytes=bound, start=start)
    return TokenTable(max_entries, ttl, max_bytes=bound, start=start)


__all__ = ["FREE_THREADED", "IMPLEMENTATION", "NO_EXTENSIONS", "compiled", "token_table", "why"]
