"""Listener limits of the native engine (gateway.engine.socket): max_connections, allow
networks and the file-descriptor watch, with raw TCP clients on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

import gateway
from gateway.engine import socket as engine_socket
from gateway.metrics import METRICS


async def _connect_and_wait_close(port: int, timeout: float = 5.0) -> bool:
    """True when the listener closes the connection without sending a byte."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        data = await asyncio.wait_for(reader.read(64), timeout)
        return data == b""
    except ConnectionResetError:
        return True
    finally:
        writer.close()


def test_max_connections_refuses_before_any_byte_and_counts() -> None:
    async def main() -> None:
        async with gateway.Socket("REP", name="capped", max_connections=1) as rep:
            port = int(rep.bind("zmq+tcp://127.0.0.1:0").rsplit(":", 1)[1])
            first = await asyncio.open_connection("127.0.0.1", port)
            assert await asyncio.wait_for(first[0].read(11), 5)  # it is greeted
            before = METRICS.get("gateway_refused_connections_total", socket="capped",
                                 reason="max-connections")
            with capture_logs() as logs:
                assert await _connect_and_wait_close(port)
            assert METRICS.get("gateway_refused_connections_total", socket="capped",
                               reason="max-connections") == before + 1
            assert [e for e in logs if e["event"] == "connection.refused"][0]["limit"] == 1
            first[1].close()

    asyncio.run(main())


def test_allow_networks_refuse_other_addresses() -> None:
    async def main() -> None:
        async with gateway.Socket("REP", name="fenced", allow=("10.0.0.0/8",)) as rep:
            port = int(rep.bind("sp+tcp://127.0.0.1:0").rsplit(":", 1)[1])
            assert await _connect_and_wait_close(port)
        async with gateway.Socket("REP", name="open", allow=("127.0.0.0/8",)) as rep:
            port = int(rep.bind("sp+tcp://127.0.0.1:0").rsplit(":", 1)[1])
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert await asyncio.wait_for(reader.readexactly(8), 5) == b"\x00SP\x00\x00\x31\x00\x00"
            writer.close()

    asyncio.run(main())


def test_nearing_the_fd_limit_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_socket, "open_files_ratio", lambda: 0.95)

    async def main() -> None:
        async with gateway.Socket("REP", name="crowded") as rep:
            port = int(rep.bind("zmq+tcp://127.0.0.1:0").rsplit(":", 1)[1])
            with capture_logs() as logs:
                for _ in range(2):
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    await asyncio.wait_for(reader.read(11), 5)
                    writer.close()
            warnings = [e for e in logs if e["event"] == "fd.limit"]
            assert len(warnings) == 1 and warnings[0]["used"] == "95%"

    asyncio.run(main())


def test_open_files_ratio_reads_this_process() -> None:
    ratio = engine_socket.open_files_ratio()
    assert ratio is None or 0 < ratio < 1
