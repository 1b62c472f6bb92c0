"""A blocking facade for scripts: the same Socket API without ``await``.

All sockets share one event loop running in a daemon thread::

    from gateway.blocking import Socket
    with Socket("REQ") as s:
        s.connect("sp+tcp://127.0.0.1:5555")
        s.send(b"hi")
        print(s.recv(timeout=5))
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from gateway.engine.socket import Socket as AsyncSocket
from gateway.message import Message

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="gateway-loop", daemon=True).start()
            _loop = loop
        return _loop


class Socket:
    """Blocking twin of ``gateway.Socket``; every call takes an optional ``timeout`` (seconds)."""

    def __init__(self, kind: str, raw: bool = False, **options: Any) -> None:
        self._loop = _background_loop()
        self._sock: AsyncSocket = self._call(self._make(kind, raw, options))

    @staticmethod
    async def _make(kind: str, raw: bool, options: dict[str, Any]) -> AsyncSocket:
        return AsyncSocket(kind, raw, **options)

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        async def bounded() -> T:
            async with asyncio.timeout(timeout):
                return await coro

        return asyncio.run_coroutine_threadsafe(bounded(), self._loop).result()

    def _sync(self, fn: Any, *args: Any) -> Any:
        async def run() -> Any:
            return fn(*args)

        return self._call(run())

    def bind(self, url: str) -> str:
        return str(self._sync(self._sock.bind, url))

    def connect(self, url: str) -> None:
        self._sync(self._sock.connect, url)

    def send(self, data: bytes, timeout: float | None = None) -> None:
        self._call(self._sock.send(data), timeout)

    def recv(self, timeout: float | None = None) -> bytes:
        return self._call(self._sock.recv(), timeout)

    def send_multipart(self, frames: list[bytes], timeout: float | None = None) -> None:
        self._call(self._sock.send_multipart(frames), timeout)

    def recv_multipart(self, timeout: float | None = None) -> list[bytes]:
        return self._call(self._sock.recv_multipart(), timeout)

    def send_msg(self, msg: Message, timeout: float | None = None) -> None:
        self._call(self._sock.send_msg(msg), timeout)

    def recv_msg(self, timeout: float | None = None) -> Message:
        return self._call(self._sock.recv_msg(), timeout)

    def wait_peers(self, n: int = 1, timeout: float = 10.0) -> None:
        self._call(self._sock.wait_peers(n, timeout))

    def subscribe(self, topic: bytes | str) -> None:
        """SUB/XSUB: receive messages starting with ``topic`` (counted, as pyzmq's)."""
        self._sync(self._sock.subscribe, topic)

    def unsubscribe(self, topic: bytes | str) -> None:
        self._sync(self._sock.unsubscribe, topic)

    @property
    def peers(self) -> int:
        return self._sock.peers

    def close(self, linger: float | None = None) -> None:
        self._sync(self._sock.close, linger)

    def __enter__(self) -> Socket:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
