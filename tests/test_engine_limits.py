"""Listener limits of the native engine (gateway.engine.socket): max_connections, allow
networks and the file-descriptor watch, with raw TCP clients on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

import gateway
from gateway.engine import listener as engine_listener
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
    monkeypatch.setattr(engine_listener, "open_files_ratio", lambda: 0.95)

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
    ratio = engine_listener.open_files_ratio()
    assert ratio is None or 0 < ratio < 1


# -- issue 20 and 23: what a peer can make a listener hold or compute ------------------------------
_GREETING = b"\xff" + b"\x00" * 8 + b"\x7f\x03\x01" + b"NULL".ljust(20, b"\x00") + b"\x00" * 32


def _ready(socket_type: bytes) -> bytes:
    body = b"\x05READY\x0bSocket-Type" + len(socket_type).to_bytes(4, "big") + socket_type
    return b"\x06" + len(body).to_bytes(8, "big") + body


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


async def _announce(port: int, data: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    try:
        await asyncio.wait_for(reader.read(), 5)  # until the socket closes us
    except (ConnectionResetError, TimeoutError):
        pass
    finally:
        writer.close()


def test_peers_announcing_new_types_cannot_grow_the_warning_table() -> None:
    """Finding 3: 300 connections, each announcing another 60 KB Socket-Type: the warning
    table stays bounded (49db3ab kept a key per variant: 19.7 MB for 300), few lines are
    written, none longer than a few hundred bytes, and every failure is counted."""
    async def main() -> None:
        async with gateway.Socket("ROUTER", name="typo") as router:
            port = _port(router.bind("zmq+tcp://127.0.0.1:0"))
            before = METRICS.get("gateway_handshake_failures_total", socket="typo",
                                 reason="pairing")
            with capture_logs() as logs:
                for i in range(0, 300, 50):
                    await asyncio.gather(*(
                        _announce(port, _GREETING + _ready(b"%05d" % (i + j) + b"Z" * 60000))
                        for j in range(50)))
            lines = [e for e in logs if e["event"] == "handshake.failed"]
            assert len(router.reports.throttle) <= router.reports.throttle.max_keys + 1
            assert len(lines) <= router.reports.throttle.max_keys + 1
            assert max(len(repr(e)) for e in lines) < 1500
            assert METRICS.get("gateway_handshake_failures_total", socket="typo",
                               reason="pairing") == before + 300

    asyncio.run(main())


def test_a_handshake_frame_over_64k_closes_the_connection_at_its_header() -> None:
    """Finding 9: before the handshake a connection holds at most 64 KiB (49db3ab buffered up
    to max_message_size, 1 MiB, per unauthenticated connection): a declared 1 MiB command is
    refused when its 9-byte header arrives, without waiting for it or for the timeout."""
    async def main() -> None:
        async with gateway.Socket("ROUTER", name="early", handshake_timeout=30) as router:
            port = _port(router.bind("zmq+tcp://127.0.0.1:0"))
            before = METRICS.get("gateway_handshake_failures_total", socket="early",
                                 reason="garbage")
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_GREETING + b"\x06" + (1 << 20).to_bytes(8, "big") + b"\x05READY")
            t0 = asyncio.get_running_loop().time()
            try:
                while await asyncio.wait_for(reader.read(4096), 5):
                    pass
            except ConnectionResetError:
                pass
            writer.close()
            assert asyncio.get_running_loop().time() - t0 < 2
            assert METRICS.get("gateway_handshake_failures_total", socket="early",
                               reason="garbage") == before + 1

    asyncio.run(main())


def test_a_ping_flood_from_a_peer_that_does_not_read_queues_nothing() -> None:
    """Finding 4: 100,000 PINGs from a peer that never reads: 49db3ab queued a PONG each
    (42 MB against a 1 MB mark in the review); now what the pipe holds stays at its mark."""
    import socket as pysocket

    async def main() -> None:
        async with gateway.Socket("ROUTER", name="pinged", hwm=10) as router:
            port = _port(router.bind("zmq+tcp://127.0.0.1:0"))
            raw = pysocket.socket()
            raw.setsockopt(pysocket.SOL_SOCKET, pysocket.SO_RCVBUF, 4096)
            raw.setblocking(False)
            loop = asyncio.get_running_loop()
            await loop.sock_connect(raw, ("127.0.0.1", port))
            await loop.sock_sendall(raw, _GREETING + _ready(b"DEALER"))
            await router.wait_peers(1)
            [pipe] = router.endpoints.pipes
            sock = pipe.transport.get_extra_info("socket")
            sock.setsockopt(pysocket.SOL_SOCKET, pysocket.SO_SNDBUF, 4096)
            ping = b"\x04\x07\x04PING\x00\x00"
            for _ in range(20):
                await loop.sock_sendall(raw, ping * 5000)
                await asyncio.sleep(0.01)
            await until_quiet(pipe)
            high = router.options.hwm * 1024
            assert pipe.buffered <= high + 64, pipe.buffered  # 49db3ab: ~600 KB
            assert router.peers == 1  # the pipe lives on
            raw.close()

    asyncio.run(main())


async def until_quiet(pipe: object, timeout: float = 5.0) -> None:
    """Until the pipe has read everything the peer sent (its received chunks stop growing)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last = -1
    while loop.time() < deadline:
        now = pipe.rx_chunks  # type: ignore[attr-defined]
        if now == last:
            return
        last = now
        await asyncio.sleep(0.2)


def test_accepting_costs_no_listing_of_open_descriptors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 23: 49db3ab listed /proc/self/fd on every accept (O(open descriptors) each); the
    count is now taken at most once a second."""
    import os

    calls: list[str] = []
    real = os.listdir
    monkeypatch.setattr(engine_listener.os, "listdir",
                        lambda path: calls.append(str(path)) or real(path))
    monkeypatch.setattr(engine_listener, "_fd_count", [-engine_listener.FD_RECOUNT, None])

    async def main() -> None:
        async with gateway.Socket("REP", name="storm") as rep:
            port = _port(rep.bind("sp+tcp://127.0.0.1:0"))
            conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(200)]
            for reader, _ in conns:
                await asyncio.wait_for(reader.readexactly(8), 5)
            for _, writer in conns:
                writer.close()

    asyncio.run(main())
    assert len([c for c in calls if c == "/proc/self/fd"]) <= 2


def test_a_listener_holds_at_most_ten_thousand_connections_unless_told() -> None:
    assert gateway.Socket("REP").options.max_connections == 10_000
    assert gateway.Socket("REP", max_connections=None).options.max_connections is None


def test_allow_matches_ipv4_clients_of_a_dual_stack_listener() -> None:
    """From the review: on a [::] listener IPv4 clients appear as ::ffff:a.b.c.d; allow=
    IPv4 networks must match them (49db3ab refused them all)."""
    async def main() -> None:
        async with gateway.Socket("REP", name="dual", allow=("127.0.0.0/8",)) as rep:
            try:
                port = _port(rep.bind("sp+tcp://[::]:0"))
            except Exception as exc:  # noqa: BLE001 - a machine without IPv6
                pytest.skip(f"no dual-stack listener here: {exc}")
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert await asyncio.wait_for(reader.readexactly(8), 5) == \
                b"\x00SP\x00\x00\x31\x00\x00"
            writer.close()

    asyncio.run(main())
