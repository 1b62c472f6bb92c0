"""One port, both wires in the engine (gateway.engine.pipe.SniffingPipe behind ``any+tcp://``),
by exact bytes from a raw TCP client: the listener says nothing until the peer's first byte,
then answers in that byte's wire; a silent peer is a ``handshake-timeout``, a byte of neither
wire ``garbage``. Real libzmq and nng clients are in ``interop_tests/test_gateway_oneport.py``.

Why waiting is safe: both families' clients speak first. nng ``tcptran_pipe_start`` sends its
8-byte header before reading (nanomsg sp-tcp-mapping: ``00 53 50 00`` + protocol u16 + ``00 00``);
libzmq ``zmtp_engine_t::plug_internal`` queues the 10-byte signature (RFC 23 "the greeting":
``FF`` + 8 bytes + ``7F``) before it has read anything.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from _aio import bounded, until

import gateway
from gateway.metrics import METRICS
from gateway.url import parse

SIGNATURE = b"\xff" + b"\x00" * 7 + b"\x01\x7f"  # RFC 23 section "the greeting"
SP_REQ0_HEADER = b"\x00SP\x00\x00\x30\x00\x00"  # sp-tcp-mapping, protocol 0x30 = req0


timed = bounded(20.0)


def failures(socket: Any, reason: str) -> int:
    return METRICS.get("gateway_handshake_failures_total", socket=socket.name, reason=reason)


async def read_at_least(reader: asyncio.StreamReader, n: int, timeout: float = 5.0) -> bytes:
    got = b""
    async with asyncio.timeout(timeout):
        while len(got) < n:
            chunk = await reader.read(4096)
            if not chunk:
                break
            got += chunk
    return got


async def nothing_heard(reader: asyncio.StreamReader, wait: float = 0.3) -> bool:
    try:
        async with asyncio.timeout(wait):
            await reader.read(1)
    except TimeoutError:
        return True
    return False


@contextlib.asynccontextmanager
async def _client(**options: Any) -> AsyncIterator[tuple[Any, asyncio.StreamReader,
                                                          asyncio.StreamWriter]]:
    """A ROUTER on a new ``any+tcp`` port and a raw TCP client of it (closed on the way out)."""
    async with gateway.Socket("ROUTER", **options) as router:
        url = router.bind("any+tcp://127.0.0.1:0")
        reader, writer = await asyncio.open_connection("127.0.0.1", parse(url).host_port()[1])
        try:
            yield router, reader, writer
        finally:
            writer.close()


@timed
async def test_sp_peer_first_byte_alone_then_the_header() -> None:
    async with _client() as (router, reader, writer):
        assert await nothing_heard(reader)  # the listener waits for the peer
        writer.write(SP_REQ0_HEADER[:1])  # the first byte alone decides the wire
        got = await read_at_least(reader, 8)
        # our SP header: 00 53 50 00, the rep0 protocol (0x31), 00 00
        assert got[:8] == b"\x00SP\x00\x00\x31\x00\x00", got
        writer.write(SP_REQ0_HEADER[1:])
        await until(lambda: router.peers == 1)


@timed
async def test_zmtp_peer_gets_the_zmtp_signature() -> None:
    async with _client() as (router, reader, writer):
        assert await nothing_heard(reader)
        writer.write(SIGNATURE[:1])
        got = await read_at_least(reader, 10)
        assert got[0] == 0xFF and got[9] & 0x01, got  # RFC 23 signature


@timed
async def test_silent_peer_is_a_handshake_timeout() -> None:
    async with _client(handshake_timeout=0.3) as (router, reader, writer):
        before = failures(router, "handshake-timeout")
        assert await read_at_least(reader, 1, timeout=5) == b""  # closed, nothing said
        await until(lambda: failures(router, "handshake-timeout") == before + 1)
        assert router.peers == 0


@timed
async def test_neither_wire_is_garbage() -> None:
    async with _client(handshake_timeout=5) as (router, reader, writer):
        before = failures(router, "garbage")
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await read_at_least(reader, 1 << 16, timeout=5)  # until the listener closes
        await until(lambda: failures(router, "garbage") == before + 1)
        assert router.peers == 0
