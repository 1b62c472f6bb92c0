"""The compiled forwarding kernel's seam (aiohttp's and msgpack's habit): which implementation
runs, chosen once, here.

``compiled`` is :mod:`gateway._kernel` when it was built and ``GATEWAY_NO_EXTENSIONS`` is not
set; else ``None`` and the pure-Python engine, the reference, runs everything. The kernel's
state is twins (:data:`TWINS`): whole classes with typed fields, each with a pure-Python
reference of the same interface; :func:`twin` gives the class of a new object, read when the
object is made. A bridge whose two sides run on the native engine, and whose objects are the
kernel's twins, forwards its usual messages through the kernel, one call per read
(:func:`for_bridge`). This is the only module that imports the compiled one.
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


#: the twins: each a class of the compiled module and its reference, the pure-Python class of
#: the same name, interface and state (``module:attribute``), which runs where the kernel does
#: not. Objects of these classes are made through :func:`twin`, which reads the choice when an
#: object is made; nothing else in the gateway looks at which one it holds (the kernel, given a
#: reference's object, leaves it to the reference). tests/test_kernel_seam.py holds each pair to
#: the same public fields and methods.
TWINS = {
    "PipeState": "gateway.engine.pipe_state:PipeState",  # a pipe's hot state (its base)
    "Batch": "gateway.engine.writes:Batch",  # a thread's write coalescing
    "ReceiveBuffer": "gateway.wire._buffer:ReceiveBuffer",  # a codec's received bytes
    "ReadBuffer": "gateway.engine.read_buffer:ReadBuffer",  # what a pipe's reads land in
    "Routing": "gateway.engine.send:Routing",  # a socket's ready pipes
    "Tally": "gateway.device.ledger:Tally",  # a bridge's hot counters
    "TokenTable": "gateway.envelope.tokens:TokenTable",  # zmtp -> sp envelopes
    "InFlight": "gateway.device.inflight:InFlight",  # requests awaiting replies
}

_references: dict[str, type] = {}


def reference(name: str) -> type:
    """The pure-Python twin ``name`` (one of :data:`TWINS`)."""
    cls = _references.get(name)
    if cls is None:
        module, _, attribute = TWINS[name].partition(":")
        cls = _references[name] = getattr(importlib.import_module(module), attribute)
    return cls


def twin(name: str) -> Any:
    """The class of a new ``name`` object (one of :data:`TWINS`): the kernel's where it runs,
    else the reference."""
    return getattr(compiled, name) if compiled is not None else reference(name)


def token_table(max_entries: int, ttl: float, start: int | None = None,
                max_bytes: int | None = None) -> Any:
    """A bridge's token table (``max_bytes``: its byte budget, the bridge's ``pending_bytes``;
    None: none but the count)."""
    from gateway.envelope.tokens import NO_BYTE_BOUND

    bound = NO_BYTE_BOUND if max_bytes is None else max_bytes
    return twin("TokenTable")(max_entries, ttl, max_bytes=bound, start=start)


#: the patterns beyond request-reply the kernel forwards (pair stays the reference's)
KERNEL_PATTERNS = frozenset({"pipeline", "pubsub"})


def for_bridge(fwd: Any, buckets: tuple[float, ...]) -> Any:
    """The compiled kernel for a bridge's forwarder (``gateway.device.forward_async``), or
    None: the reference forwards it all. The kernel forwards where it runs and the bridge is
    one it knows, between two native sides without a body codec, whose state objects are its
    twins (made while it ran): request-reply (sharing the bridge's compiled tables), pipeline
    and pub/sub."""
    if compiled is None:
        return None
    translator = fwd.translator
    front, back = fwd.front.socket, fwd.back.socket
    pattern = getattr(translator, "pattern", None)
    if (translator.body_codec is not None or type(fwd.ledger.tally) is not compiled.Tally
            or type(front.routing) is not compiled.Routing
            or type(back.routing) is not compiled.Routing):
        return None
    if pattern == "reqrep":
        table = getattr(translator, "table", None)
        if ((table is not None and type(table) is not compiled.TokenTable)
                or type(fwd.loss.inflight) is not compiled.InFlight):
            return None
        return compiled.Kernel(fwd, front, back, translator, fwd.loss, fwd.ledger.tally,
                               buckets)
    if pattern in KERNEL_PATTERNS:
        return compiled.PatternKernel(fwd, front, back, translator, fwd.ledger.tally, buckets)
    return None


__all__ = ["FREE_THREADED", "IMPLEMENTATION", "KERNEL_PATTERNS", "NO_EXTENSIONS", "TWINS",
           "compiled", "for_bridge", "reference", "token_table", "twin", "why"]
