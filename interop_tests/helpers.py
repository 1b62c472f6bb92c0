"""What the interop suites share beyond the harness (``gateway.tools.harness``): a bounded
``asyncio.run``, the engine's count of pipes refused at the handshake, a numbered flood for the
back-pressure tests, and the ``backends`` mark that runs a gateway test on every front/back
backend pair."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest

import gateway
from gateway.metrics import METRICS
from gateway.tools.harness.gateway import BACKEND_IDS, BACKENDS

TIMEOUT = 20.0


def run(coro: Awaitable[Any], timeout: float = TIMEOUT) -> Any:
    """``asyncio.run(coro)``, failing with ``TimeoutError`` after ``timeout`` seconds."""

    async def bounded() -> Any:
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``predicate`` (every 20 ms) until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.02)


def pairing_errors() -> int:
    """How many connections the engine refused for their socket type so far (process-wide):
    the peer's type was refused (``PairingError``), or the peer refused ours first (libzmq
    closes without its READY when ours arrives together with our greeting); both count as the
    handshake failure ``pairing``."""
    return METRICS.total_where("gateway_handshake_failures_total", reason="pairing")


class _Closable(Protocol):
    def close(self) -> Any: ...


P = TypeVar("P", bound=_Closable)


@contextlib.asynccontextmanager
async def linked_peer(kind: str, native_opts: dict[str, Any] | None, make_peer: Callable[[], P],
                      link: Callable[[gateway.Socket, P, str], object], binder: str,
                      wait: bool) -> AsyncIterator[tuple[gateway.Socket, P]]:
    """A native socket of ``kind`` and a library peer (``make_peer()``), linked by ``link``
    (``binder`` binds) and, with ``wait``, connected; both closed on the way out."""
    async with gateway.Socket(kind, **(native_opts or {})) as native:
        peer = make_peer()
        try:
            link(native, peer, binder)
            if wait:
                await native.wait_peers(1)
            yield native, peer
        finally:
            peer.close()


def pair_busy() -> int:
    """How many pipes a PAIR closed because it already had its one peer (process-wide)."""
    return METRICS.get("gateway_pipes_closed_total", reason="pair-busy")


def numbered(i: int, size: int) -> bytes:
    """A ``size``-byte message that carries ``i`` (4 bytes, big-endian, repeated)."""
    return i.to_bytes(4, "big") * (size // 4)


def number_of(data: bytes) -> int:
    """The ``i`` of a :func:`numbered` message."""
    return int.from_bytes(data[:4], "big")


class Flood:
    """Sends ``total`` :func:`numbered` messages of ``size`` bytes through ``send`` in a task,
    counting those sent, for a receiver that does not read yet."""

    def __init__(self, send: Callable[[bytes], Awaitable[Any]], total: int, size: int) -> None:
        self.sent = 0
        self.total = total
        self.task = asyncio.ensure_future(self._run(send, size))

    async def _run(self, send: Callable[[bytes], Awaitable[Any]], size: int) -> None:
        for i in range(self.total):
            await send(numbered(i, size))
            self.sent += 1

    async def assert_held(self, after: float = 1.5, still: float = 0.0) -> None:
        """After ``after`` seconds the sender waits short of ``total``; with ``still``, it
        comes to send nothing more over ``still`` seconds (waiting, not dropping). A loaded
        machine may still be filling the buffers after ``after``: the plateau is waited for
        (20 s at most), never short of ``total``, rather than assumed."""
        await asyncio.sleep(after)
        async with asyncio.timeout(20):
            while True:
                stuck = self.sent
                assert not self.task.done() and stuck < self.total
                if not still:
                    return
                await asyncio.sleep(still)
                if self.sent == stuck:
                    return


#: parametrize a test over (front backend, back backend): library adapter ("lib") or engine
backends = pytest.mark.parametrize(("front_be", "back_be"), BACKENDS, ids=BACKEND_IDS)


def auth_files(tmp_path: Path, client_pub: str, passwords: str) -> dict[str, str]:
    """The files a secured gateway reads, under ``tmp_path``: ``allow``, a directory of allowed
    CURVE public keys holding ``client_pub``; ``passwords``, the PLAIN password file; and
    ``alice_pw``, alice's password file (both secret files readable by the owner only: the
    gateway refuses others)."""
    allow = tmp_path / "allowed"
    allow.mkdir()
    (allow / "client.key").write_text(Path(client_pub).read_text())
    files = {"allow": str(allow)}
    for name, path, text in (("passwords", "passwords", passwords),
                             ("alice_pw", "alice.pw", "wonderland\n")):
        (tmp_path / path).write_text(text)
        os.chmod(tmp_path / path, 0o600)
        files[name] = str(tmp_path / path)
    return files
