"""Adapter checks: the contract every library-backed adapter (``gateway_register_adapters``)
must keep, run by this project's adapter tests (``tests/test_pyzmq_adapter.py``,
``tests/test_pynng_adapter.py``) and importable by a third party's plugin tests, plus the relay
loop of a device preview.

No pytest import here: a check fails with ``AssertionError``, and one that cannot run on this
machine raises ``unittest.SkipTest`` (pytest reports it as skipped).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable, Coroutine
from types import ModuleType
from typing import Any
from unittest import SkipTest

import pluggy

from gateway import hookspecs
from gateway.envelope import EnvelopeError
from gateway.errors import TransportError
from gateway.message import Message


def keepalive_timers(port: int, timeout: float = 5.0) -> list[str]:
    """The ``ss`` timers of the established TCP connections on local port ``port`` (a listener's
    accepted ones): ``"keepalive,29sec,0"`` where the kernel runs keepalive, ``""`` where not.
    Waits (bounded) until there is at least one connection."""
    import re
    import shutil
    import subprocess
    import time

    if shutil.which("ss") is None:
        raise SkipTest("ss (iproute2) is not installed")
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(["ss", "-tnoH", "state", "established", f"( sport = :{port} )"],
                             capture_output=True, text=True, timeout=5).stdout
        lines = [line for line in out.splitlines() if line.strip()]
        timers = [(m.group(1) if (m := re.search(r"timer:\(([^)]*)\)", line)) else "")
                  for line in lines]
        # "on,...": a retransmission timer while data is in flight hides the keepalive one
        settled = lines and not any(t.startswith("on,") for t in timers)
        if settled or time.monotonic() > deadline:
            return timers
        time.sleep(0.05)


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run`` bounded to 20 s."""
    return asyncio.run(asyncio.wait_for(coro, 20))


def registered_adapters(plugin: ModuleType, name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Register ``plugin`` with a fresh plugin manager under ``name``; every
    ``register(*args, **kw)`` call its ``gateway_register_adapters`` hook made."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(plugin, name=name)
    got: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    pm.hook.gateway_register_adapters(register=lambda *a, **kw: got.append((a, kw)))
    return got


def check_bind_returns_real_port(new_socket: Callable[[], Any]) -> None:
    """``bind`` on port 0 and ``*`` returns the real tcp port (two different ones), a second
    bind of a used address raises ``TransportError``, an ipc path comes back unchanged."""
    s = new_socket()
    a = s.bind("tcp://127.0.0.1:0")
    b = s.bind("tcp://127.0.0.1:*")
    for url in (a, b):
        host, port = url.rsplit(":", 1)
        assert host == "tcp://127.0.0.1" and int(port) > 0
    assert a != b
    s2 = new_socket()
    try:
        s2.bind(a)  # address in use
    except TransportError:
        pass
    else:
        raise AssertionError(f"a second bind of {a} did not raise TransportError")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.sock")
        assert s.bind(f"ipc://{path}") == f"ipc://{path}"
    s.close()
    s2.close()


async def relay(src: Any, dst: Any, convert: Callable[[Message], Message],
                drops: list[str]) -> None:
    """A device preview's one direction, forever: each message ``src`` receives, converted, is
    sent on ``dst``; a message ``convert`` refuses (``EnvelopeError``) is dropped and its
    reason appended to ``drops``."""
    while True:
        m = await src.recv_msg()
        try:
            out = convert(m)
        except EnvelopeError as e:
            drops.append(e.reason)
            continue
        await dst.send_msg(out)
