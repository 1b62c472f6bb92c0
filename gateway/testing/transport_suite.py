"""The shared transport verification suite (mangos' ``TranVerify*``): every transport passes it.

Each check is a coroutine ``check(transport, new_address)`` that drives a transport through the
two calls of :mod:`gateway.transport` with a plain recording protocol (no wire codec) and raises
``AssertionError`` when the transport breaks the contract. ``new_address()`` returns an address
nobody uses yet, in the transport's own syntax. A plugin's own test runs them all::

    @pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
    def test_my_transport(check):
        asyncio.run(check(MyTransport(), lambda: f"t-{uuid.uuid4().hex}"))

The gateway's own ``tests/test_transports.py`` runs them over every registered transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from gateway.transport import Listener, PipeProtocol, Transport

__all__ = ["CHECKS", "Recorder", "run_all", "verify_zero_write_limits"]

TIMEOUT = 5.0
NewAddress = Callable[[], str]


class Recorder(PipeProtocol, asyncio.Protocol):
    """A protocol that records what happens to it (bytes, pauses, loss)."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.transport: Any = None
        self.made: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[Exception | None] = loop.create_future()
        self.data = bytearray()
        self.write_paused = False
        self.pauses = self.resumes = 0
        #: what the transport held when it paused and when it resumed us, last time
        self.held_at_pause = self.held_at_resume = -1
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.made.set_result(None)

    def abort(self, reason: str, detail: str = "", farewell: bytes = b"") -> None:
        self.reason = reason
        if self.transport is not None:
            self.transport.abort()

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
        self.held_at_pause = self.transport.get_write_buffer_size()

    def resume_writing(self) -> None:
        self.write_paused = False
        self.resumes += 1
        self.held_at_resume = self.transport.get_write_buffer_size()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)

    async def wait_bytes(self, n: int) -> bytes:
        if len(self.data) < n:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((n, fut))
            await asyncio.wait_for(fut, TIMEOUT)
        return bytes(self.data[:n])


class _Harness:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.accepted: asyncio.Queue[Recorder] = asyncio.Queue()

    def server_factory(self) -> Recorder:
        proto = Recorder()
        self.accepted.put_nowait(proto)
        return proto

    def listen(self, address: str) -> Listener:
        return self.transport.listen(address, self.server_factory)

    async def pair(self, address: str) -> tuple[Recorder, Recorder]:
        client = Recorder()
        await self.transport.dial(address, lambda: client)
        await asyncio.wait_for(client.made, TIMEOUT)
        server = await asyncio.wait_for(self.accepted.get(), TIMEOUT)
        await asyncio.wait_for(server.made, TIMEOUT)
        return client, server


@contextlib.asynccontextmanager
async def _listening(
    transport: Transport, new_address: NewAddress
) -> AsyncIterator[tuple[_Harness, Listener]]:
    """A harness and a listener on a new address, closed when the block ends."""
    h = _Harness(transport)
    listener = h.listen(new_address())
    try:
        yield h, listener
    finally:
        listener.close()


@contextlib.asynccontextmanager
async def _connected(
    transport: Transport, new_address: NewAddress
) -> AsyncIterator[tuple[Recorder, Recorder]]:
    """One connection (client, server) to a new listener, closed when the block ends."""
    async with _listening(transport, new_address) as (h, listener):
        yield await h.pair(listener.address)


async def _raises_oserror(call: Callable[[], Awaitable[Any]] | Callable[[], Any]) -> None:
    try:
        result = call()
        if asyncio.iscoroutine(result):
            await result
    except OSError:
        return
    raise AssertionError("expected OSError")


async def verify_listen_then_dial(transport: Transport, new_address: NewAddress) -> None:
    """``listen`` binds before it returns, with a real address a dial reaches at once."""
    async with _listening(transport, new_address) as (h, listener):
        assert isinstance(listener.address, str) and listener.address
        client, server = await h.pair(listener.address)
        client.transport.close()
        await asyncio.wait_for(server.lost, TIMEOUT)


async def verify_listen_takes_a_backlog(transport: Transport, new_address: NewAddress) -> None:
    """``listen(..., backlog=N)`` is accepted when the transport declared ``backlog`` (a
    registered one: ``registry().transport(scheme)``; a transport without a kernel queue may
    ignore it), and the queue holds connections until they are accepted; a registered
    transport that did not declare it refuses an explicit backlog before binding anything."""
    if getattr(transport, "backlog", True) is False:
        from gateway.errors import ConfigError

        try:
            transport.listen(new_address(), _Harness(transport).server_factory, backlog=1)
        except ConfigError:
            return
        raise AssertionError("a transport that did not declare backlog took one")
    h = _Harness(transport)
    listener = transport.listen(new_address(), h.server_factory, backlog=1)
    try:
        client, server = await h.pair(listener.address)
        client.transport.close()
        await asyncio.wait_for(server.lost, TIMEOUT)
    finally:
        listener.close()


async def verify_bytes_flow_both_ways(transport: Transport, new_address: NewAddress) -> None:
    async with _connected(transport, new_address) as (client, server):
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


async def verify_many_connections(transport: Transport, new_address: NewAddress) -> None:
    async with _listening(transport, new_address) as (h, listener):
        pairs = [await h.pair(listener.address) for _ in range(5)]
        for i, (client, _) in enumerate(pairs):
            client.transport.write(b"%d" % i)
        for i, (_, server) in enumerate(pairs):
            assert await server.wait_bytes(1) == b"%d" % i
        for client, server in pairs:
            server.transport.close()  # closing from the accepting side works too
            await asyncio.wait_for(client.lost, TIMEOUT)
            await asyncio.wait_for(server.lost, TIMEOUT)


async def verify_pause_and_resume_reading(transport: Transport, new_address: NewAddress) -> None:
    async with _connected(transport, new_address) as (client, server):
        server.transport.pause_reading()
        client.transport.write(b"held")
        await asyncio.sleep(0.05)
        assert bytes(server.data) == b""
        server.transport.resume_reading()
        assert await server.wait_bytes(4) == b"held"
        client.transport.close()


async def _written_until_paused(client: Recorder, server: Recorder, high: int, low: int) -> int:
    """The writer's limits ``high``/``low``, the reader stopped: 256 KiB writes until the
    writer is paused (the kernel's buffers fill first), never holding more than ``high``
    unannounced; the bytes written."""
    client.transport.set_write_buffer_limits(high=high, low=low)
    assert not client.write_paused  # it holds nothing yet
    server.transport.pause_reading()
    chunk = b"w" * (256 * 1024)
    written = 0
    while not client.write_paused and written < 256 * len(chunk):
        client.transport.write(chunk)
        written += len(chunk)
        assert client.write_paused or client.transport.get_write_buffer_size() <= high
        await asyncio.sleep(0)
    assert client.write_paused and client.pauses == 1 and client.held_at_pause > high
    return written


async def _read_until_resumed(client: Recorder, server: Recorder, written: int) -> None:
    """The reader reads again: every byte arrives, and the writer is resumed once (bounded:
    the transport's write callback) with nothing held."""
    server.transport.resume_reading()
    assert await server.wait_bytes(written) == b"w" * written
    for _ in range(int(TIMEOUT / 0.005)):
        if client.resumes:
            break
        await asyncio.sleep(0.005)
    assert not client.write_paused and client.resumes == 1
    assert client.transport.get_write_buffer_size() == 0
    client.transport.close()


async def verify_write_flow_control(transport: Transport, new_address: NewAddress) -> None:
    """A reader that stops reading makes the writer's protocol pause (bounded buffers), and
    resume once the reader drains: the engine's send back-pressure rests on this."""
    async with _connected(transport, new_address) as (client, server):
        written = await _written_until_paused(client, server, 64 * 1024, 16 * 1024)
        assert client.transport.get_write_buffer_size() > 64 * 1024
        await _read_until_resumed(client, server, written)
        assert client.held_at_resume <= 16 * 1024


async def verify_zero_write_limits(transport: Transport, new_address: NewAddress) -> None:
    """Limits 0/0, as the engine's pipes set them: the protocol is paused in the very write
    that leaves the transport holding a byte, and resumed exactly when it holds none (a pipe
    queues its messages meanwhile and writes them all on ``resume_writing``: a transport that
    does not tell makes the pipe write straight through, its losses uncounted)."""
    async with _connected(transport, new_address) as (client, server):
        written = await _written_until_paused(client, server, 0, 0)
        await _read_until_resumed(client, server, written)
        assert client.held_at_resume == 0


async def verify_listener_close_stops_accepting(transport: Transport, new_address: NewAddress) -> None:
    h = _Harness(transport)
    listener = h.listen(new_address())
    client, _server = await h.pair(listener.address)
    listener.close()
    await asyncio.sleep(0.05)
    await _raises_oserror(lambda: transport.dial(listener.address, Recorder))
    client.transport.close()


async def verify_address_in_use(transport: Transport, new_address: NewAddress) -> None:
    h = _Harness(transport)
    first = h.listen(new_address())
    try:
        await asyncio.sleep(0)
        await _raises_oserror(lambda: h.listen(first.address))
    finally:
        first.close()


async def verify_dial_to_nothing_raises_oserror(transport: Transport, new_address: NewAddress) -> None:
    """Dialling an address nobody listens on (any more) raises ``OSError``: the engine redials."""
    listener = transport.listen(new_address(), Recorder)
    address = listener.address
    listener.close()
    await asyncio.sleep(0.05)
    await _raises_oserror(lambda: transport.dial(address, Recorder))


#: Every check, in a sensible order.
CHECKS: tuple[Callable[[Transport, NewAddress], Awaitable[None]], ...] = (
    verify_listen_then_dial,
    verify_listen_takes_a_backlog,
    verify_bytes_flow_both_ways,
    verify_many_connections,
    verify_pause_and_resume_reading,
    verify_write_flow_control,
    verify_zero_write_limits,
    verify_listener_close_stops_accepting,
    verify_address_in_use,
    verify_dial_to_nothing_raises_oserror,
)


async def run_all(transport: Transport, new_address: NewAddress) -> None:
    """Run every check against ``transport`` (stops at the first failure)."""
    for check in CHECKS:
        await check(transport, new_address)
