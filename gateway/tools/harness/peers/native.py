"""The native engine (``gateway.Socket``) as a peer, on its own asyncio loop thread: every
request-reply kind on both wires, heartbeats (``heartbeat=True``) and keys or certificates
(``sec``), pub/sub, pipeline and pair."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from gateway.tools.harness import security as keys
from gateway.tools.harness.peers import (
    HEARTBEAT,
    SERVER_ID,
    Peer,
    Reply,
    Security,
    Seen,
    remaining,
    request_frames,
)
from gateway.tools.harness.procs import lib_url

#: the engine's names of the SP pair protocols (the matrix says PAIR0/PAIR1 on SP)
_KIND = {"PAIR0": "PAIR"}


class NativePeer(Peer):
    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "", *,
                 heartbeat: bool = False, sec: Security | None = None, **options: Any) -> None:
        super().__init__(impl, kind, wire, side, workdir, **options)
        settings: dict[str, Any] = {}
        if sec is not None:
            settings = keys.native_options(keys.settings(sec.zmtp, sec.sp, wire, self.role,
                                                         sec.bad and side == "client"))
        if heartbeat and wire == "zmq":
            settings.update(heartbeat_ivl=HEARTBEAT["ivl_ms"] / 1000,
                            heartbeat_timeout=HEARTBEAT["timeout_ms"] / 1000)
        if kind in ("DEALER", "ROUTER") and side == "server":
            settings["identity"] = SERVER_ID
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=f"native-{side}",
                                        daemon=True)
        self._thread.start()
        self._max_peers = 0
        self._serve_task: Any = None
        self._inbox: asyncio.Queue[bytes] | None = None
        self.sock = self._call(self._make(_KIND.get(kind, kind), settings), 10)
        for t in self.topics:
            self.subscribe(t)

    @staticmethod
    async def _make(kind: str, settings: dict[str, Any]) -> Any:
        import gateway

        return gateway.Socket(kind, **settings)

    def _call(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _on_loop(self, fn: Callable[..., Any], *args: Any, timeout: float = 10) -> Any:
        """``fn(*args)`` called on the socket's loop (awaited when it returns an awaitable)."""

        async def go() -> Any:
            value = fn(*args)
            if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
                return await value
            return value

        return self._call(go(), timeout)

    def bind(self, url: str) -> str:
        return lib_url(self._on_loop(self.sock.bind, f"{self.wire}+{url}"))

    def connect(self, url: str) -> None:
        self._on_loop(self.sock.connect, f"{self.wire}+{url}")

    def evidence(self) -> str | None:
        n = int(getattr(self.sock, "peers", 0) or 0)
        self._max_peers = max(self._max_peers, n)
        if self._max_peers:
            return "ok" if n else "lost"
        return None

    # -- request-reply ---------------------------------------------------------------------
    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        sock, kind = self.sock, self.kind

        async def go() -> Reply:
            if kind == "REQ":
                await sock.send(payload)
                return Reply(body=await sock.recv())
            if kind == "ROUTER":  # drops to an unknown peer: wait until the server is up
                await sock.wait_peers(1, timeout=max(0.01, remaining(deadline)))
            await sock.send_multipart(request_frames(kind, payload, peer_id))
            frames = await sock.recv_multipart()
            return Reply(body=frames[-1], frames=tuple(frames))

        fut = asyncio.run_coroutine_threadsafe(go(), self.loop)
        while True:
            try:
                return fut.result(timeout=0.02)
            except TimeoutError:
                pass
            except Exception as exc:  # noqa: BLE001
                if type(exc).__name__ in ("TimeoutError", "CancelledError"):
                    return None
                self.notes.append(f"{self.label}: request raised {exc!r}")
                return None
            if time.monotonic() >= deadline or abort():
                fut.cancel()
                return None

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        sock, kind = self.sock, self.kind

        async def loop() -> None:
            try:
                while True:
                    if kind == "REP":
                        body = await sock.recv()
                        self.seen.append(Seen(body=body))
                        await sock.send(reply_fn(body))
                    else:
                        frames = await sock.recv_multipart()
                        self.seen.append(Seen(body=frames[-1], frames=tuple(frames[:-1])))
                        await sock.send_multipart(list(frames[:-1]) + [reply_fn(frames[-1])])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                if not getattr(sock, "closed", False):
                    self.problems.append(f"{self.label}: responder error: {exc!r}")

        async def start() -> Any:
            return asyncio.ensure_future(loop())

        self._serve_task = self._call(start(), 5)

    # -- pub/sub, pipeline, pair -----------------------------------------------------------
    def subscribe(self, topic: bytes) -> None:
        self._on_loop(self.sock.subscribe, topic)

    def unsubscribe(self, topic: bytes) -> None:
        self._on_loop(self.sock.unsubscribe, topic)

    def send(self, msg: bytes) -> None:
        async def go() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.sock.send(msg), 1.0)

        self._call(go(), 5)

    def drain(self, quiet: float, deadline: float) -> list[bytes]:
        out: list[bytes] = []
        if self.kind in ("PUB", "PUSH"):
            return out

        async def one() -> bytes | None:
            try:
                return bytes(await asyncio.wait_for(self.sock.recv(), quiet))
            except TimeoutError:
                return None

        while time.monotonic() < deadline:
            got = self._call(one(), quiet + 5)
            if got is None:
                break
            out.append(got)
        return out

    def close(self) -> None:
        async def shut() -> None:
            if self._serve_task is not None:
                self._serve_task.cancel()
            with contextlib.suppress(Exception):
                self.sock.close(linger=0)
            await asyncio.sleep(0.01)

        with contextlib.suppress(Exception):
            self._call(shut(), 3)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(3)
        if not self._thread.is_alive():
            with contextlib.suppress(Exception):
                self.loop.close()
