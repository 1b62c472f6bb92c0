"""One verification suite every transport passes (mangos habit): tcp, ipc, inproc.

Each transport is taken from the plugin registry and driven through the two-call interface of
``gateway.transport``: ``listen(address, factory) -> Listener`` and ``await dial(address,
factory)``, with a plain recording ``asyncio.Protocol`` (no wire codec).
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.plugins import registry

TRANSPORTS = ("tcp", "ipc", "inproc")
TIMEOUT = 5.0


def run(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(TIMEOUT):
            return await coro_fn()

    return asyncio.run(bounded())


class Recorder(asyncio.Protocol):
    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.transport: Any = None
        self.made = loop.create_future()
        self.lost = loop.create_future()
        self.data = bytearray()
        self.write_paused = False
        self.pauses = self.resumes = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.made.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.data += data
        for n, fut in self._waiters:
            if len(self.data) >= n and not fut.done():
                fut.set_result(None)

    def eof_received(self) -> bool | None:
        return None  # close

    def pause_writing(self) -> None:
        self.write_paused = True
        self.pauses += 1

    def resume_writing(self) -> None:
        self.write_paused = False
        self.resumes += 1

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)

    async def wait_bytes(self, n: int) -> bytes:
        if len(self.data) < n:
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append((n, fut))
            await fut
        return bytes(self.data[:n])


def address_for(scheme: str, tmp_path: Path) -> str:
    if scheme == "tcp":
        return "127.0.0.1:0"
    if scheme == "ipc":
        return str(tmp_path / f"t{uuid.uuid4().hex[:8]}.sock")
    return f"verify-{uuid.uuid4().hex}"


def nothing_there(scheme: str, tmp_path: Path) -> str:
    if scheme == "tcp":
        with socket.socket() as probe:  # a port that was free a moment ago: nobody listens
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        return f"127.0.0.1:{port}"
    if scheme == "ipc":
        return str(tmp_path / "nobody.sock")
    return f"nobody-{uuid.uuid4().hex}"


class Harness:
    def __init__(self, scheme: str) -> None:
        self.transport = registry().transport(scheme)
        self.servers: list[Recorder] = []
        self.accepted: asyncio.Queue[Recorder] = asyncio.Queue()

    def server_factory(self) -> Recorder:
        proto = Recorder()
        self.servers.append(proto)
        self.accepted.put_nowait(proto)
        return proto

    async def pair(self, address: str) -> tuple[Recorder, Recorder]:
        client = Recorder()
        await self.transport.dial(address, lambda: client)
        await client.made
        server = await self.accepted.get()
        await server.made
        return client, server


@pytest.fixture(params=TRANSPORTS)
def scheme(request: pytest.FixtureRequest) -> str:
    return request.param


def test_registered(scheme: str) -> None:
    assert registry().transport(scheme).scheme == scheme


def test_listen_returns_a_real_address(scheme: str, tmp_path: Path) -> None:
    async def main() -> None:
        h = Harness(scheme)
        asked = address_for(scheme, tmp_path)
        listener = h.transport.listen(asked, h.server_factory)
        try:
            if scheme == "tcp":
                host, port = listener.address.rsplit(":", 1)
                assert host == "127.0.0.1" and int(port) > 0
                # really listening, before any await: a plain socket connects at once
                with socket.create_connection(("127.0.0.1", int(port)), timeout=2):
                    pass
            elif scheme == "ipc":
                assert listener.address == asked
                assert Path(asked).is_socket()
            else:
                assert listener.address == asked
        finally:
            listener.close()
        if scheme == "ipc":
            assert not os.path.exists(asked)  # the socket file is removed on close

    run(main)


def test_bytes_flow_both_ways(scheme: str, tmp_path: Path) -> None:
    async def main() -> None:
        h = Harness(scheme)
        listener = h.transport.listen(address_for(scheme, tmp_path), h.server_factory)
        try:
            client, server = await h.pair(listener.address)
            client.transport.write(b"hello ")
            client.transport.write(b"server")
            assert await server.wait_bytes(12) == b"hello server"
            server.transport.write(b"hello client")
            assert await client.wait_bytes(12) == b"hello client"
            # a larger stream arrives whole and in order, however it is chunked
            blob = os.urandom(1 << 20)
            client.transport.write(blob)
            assert await server.wait_bytes(12 + len(blob)) == b"hello server" + blob
            server.transport.write(blob[::-1])
            assert (await client.wait_bytes(12 + len(blob)))[12:] == blob[::-1]
            client.transport.close()
            await asyncio.wait_for(server.lost, TIMEOUT)
            await asyncio.wait_for(client.lost, TIMEOUT)
        finally:
            listener.close()

    run(main)


def test_many_connections(scheme: str, tmp_path: Path) -> None:
    async def main() -> None:
        h = Harness(scheme)
        listener = h.transport.listen(address_for(scheme, tmp_path), h.server_factory)
        try:
            pairs = [await h.pair(listener.address) for _ in range(5)]
            for i, (client, _) in enumerate(pairs):
                client.transport.write(b"%d" % i)
            for i, (_, server) in enumerate(pairs):
                assert await server.wait_bytes(1) == b"%d" % i
            for client, server in pairs:
                server.transport.close()  # closing from the accepting side works too
                await asyncio.wait_for(client.lost, TIMEOUT)
                await asyncio.wait_for(server.lost, TIMEOUT)
        finally:
            listener.close()

    run(main)


def test_pause_and_resume_reading(scheme: str, tmp_path: Path) -> None:
    async def main() -> None:
        h = Harness(scheme)
        listener = h.transport.listen(address_for(scheme, tmp_path), h.server_factory)
        try:
            client, server = await h.pair(listener.address)
            server.transport.pause_reading()
            client.transport.write(b"held")
            await asyncio.sleep(0.05)
            assert bytes(server.data) == b""
            server.transport.resume_reading()
            assert await server.wait_bytes(4) == b"held"
            client.transport.close()
        finally:
            listener.close()

    run(main)


def test_write_flow_control(scheme: str, tmp_path: Path) -> None:
    """A reader that stops reading makes the writer's protocol pause (bounded buffers), and
    resume once the reader drains: the engine's send back-pressure rests on this."""

    async def main() -> None:
        h = Harness(scheme)
        listener = h.transport.listen(address_for(scheme, tmp_path), h.server_factory)
        try:
            client, server = await h.pair(listener.address)
            client.transport.set_write_buffer_limits(high=64 * 1024, low=16 * 1024)
            server.transport.pause_reading()
            chunk = b"w" * (256 * 1024)
            written = 0
            while not client.write_paused and written < 256 * len(chunk):  # kernel buffers first
                client.transport.write(chunk)
                written += len(chunk)
                await asyncio.sleep(0)
            assert client.write_paused and client.pauses == 1
            assert client.transport.get_write_buffer_size() > 64 * 1024
            server.transport.resume_reading()
            assert await server.wait_bytes(written) == b"w" * written
            await asyncio.sleep(0.01)
            assert not client.write_paused and client.resumes == 1
            assert client.transport.get_write_buffer_size() == 0
            client.transport.close()
        finally:
            listener.close()

    run(main)


def test_listener_close_stops_accepting(scheme: str, tmp_path: Path) -> None:
    async def main() -> None:
        h = Harness(scheme)
        listener = h.transport.listen(address_for(scheme, tmp_path), h.server_factory)
        client, _server = await h.pair(listener.address)
        listener.close()
        await asyncio.sleep(0.05)
        with pytest.raises(OSError):
            await h.transport.dial(listener.address, Recorder)
        client.transport.close()

    run(main)


def test_address_in_use(scheme: str, tmp_path: Path) -> None:
    async def main() -> None:
        h = Harness(scheme)
        first = h.transport.listen(address_for(scheme, tmp_path), h.server_factory)
        try:
            await asyncio.sleep(0)
            with pytest.raises(OSError):
                h.transport.listen(first.address, h.server_factory)
        finally:
            first.close()

    run(main)


def test_dial_to_nothing_raises_oserror(scheme: str, tmp_path: Path) -> None:
    async def main() -> None:
        transport = registry().transport(scheme)
        with pytest.raises(OSError):
            await transport.dial(nothing_there(scheme, tmp_path), Recorder)

    run(main)


def test_ipc_stale_socket_file_is_replaced(tmp_path: Path) -> None:
    path = str(tmp_path / "stale.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)  # bound, never listening, then gone: the file stays behind
    dead.close()
    assert Path(path).is_socket()

    async def main() -> None:
        h = Harness("ipc")
        listener = h.transport.listen(path, h.server_factory)
        try:
            client, server = await h.pair(path)
            client.transport.write(b"ok")
            assert await server.wait_bytes(2) == b"ok"
            client.transport.close()
        finally:
            listener.close()

    run(main)


def test_ipc_refuses_to_replace_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "not-a-socket"
    path.write_text("data")

    async def main() -> None:
        with pytest.raises(OSError):
            registry().transport("ipc").listen(str(path), Recorder)

    run(main)
    assert path.read_text() == "data"
