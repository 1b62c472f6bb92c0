"""Kernel buffers (``sndbuf``, ``rcvbuf``: libzmq's SNDBUF and RCVBUF): what each connection's
socket is given, read back with ``getsockopt`` from real sockets on 127.0.0.1; the default for a
peer on this host; who refuses a size (inproc, a library backend without the option)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zmq
from _aio import bounded, round_trip, until
from structlog.testing import capture_logs

import gateway
from gateway.engine.options import SocketOptions
from gateway.errors import ConfigError
from gateway.metrics import METRICS
from gateway.settings import convert
from gateway.settings.schema import LOCAL_SNDBUF, SideOptions
from gateway.transport import KeepAlive, SocketBuffers, on_this_host, set_buffers, tuned
from plugins import pyzmq_adapter

SO = socket.SOL_SOCKET


def _kernel_value(option: int, size: int) -> int:
    """What this kernel reports after ``setsockopt(option, size)`` (Linux: twice it)."""
    with socket.socket() as s:
        s.setsockopt(SO, option, size)
        return s.getsockopt(SO, option)


@contextmanager
def _tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            yield client, accepted


def _untouched_sndbuf() -> int:
    with _tcp_pair() as (fresh, _):
        return fresh.getsockopt(SO, socket.SO_SNDBUF)


@pytest.mark.parametrize(("text", "size"), [
    ("0", 0), ("-1", 0), (0, 0), ("65536", 65536), ("256k", 256 * 1024), ("4MiB", 4 << 20),
    ("1024m", 1 << 30),
])
def test_a_buffer_size_reads_as_bytes(text: object, size: int) -> None:
    assert convert.buffer_size(text) == size


@pytest.mark.parametrize("text", ["-2", "x", "1.5k", "1025m", True, 2.0])
def test_a_bad_buffer_size_is_refused_with_the_forms_it_takes(text: object) -> None:
    with pytest.raises(ValueError, match="bytes"):
        convert.buffer_size(text)


def test_a_peer_on_this_host_gets_the_local_send_buffer_and_others_keep_the_os_own() -> None:
    local = _kernel_value(socket.SO_SNDBUF, LOCAL_SNDBUF)
    untouched = _untouched_sndbuf()
    assert local != untouched  # (else this test could not tell them apart)
    with _tcp_pair() as (client, accepted):
        assert on_this_host(client) and on_this_host(accepted)
        set_buffers(client, SocketBuffers(None, 0, LOCAL_SNDBUF))
        assert client.getsockopt(SO, socket.SO_SNDBUF) == local
        set_buffers(accepted, SocketBuffers(0, 0, LOCAL_SNDBUF))  # 0: the OS's own, untouched
        assert accepted.getsockopt(SO, socket.SO_SNDBUF) == untouched


def test_explicit_sizes_are_set_on_any_peer() -> None:
    with _tcp_pair() as (client, _):
        set_buffers(client, SocketBuffers(65536, 131072, LOCAL_SNDBUF))
        assert client.getsockopt(SO, socket.SO_SNDBUF) == _kernel_value(socket.SO_SNDBUF, 65536)
        assert client.getsockopt(SO, socket.SO_RCVBUF) == _kernel_value(socket.SO_RCVBUF, 131072)


def test_a_unix_socket_is_no_tcp_peer_on_this_host_but_takes_explicit_sizes() -> None:
    a, b = socket.socketpair()
    with a, b:
        before = a.getsockopt(SO, socket.SO_SNDBUF)
        assert not on_this_host(a)
        set_buffers(a, SocketBuffers(None, 0, LOCAL_SNDBUF))
        assert a.getsockopt(SO, socket.SO_SNDBUF) == before
        set_buffers(a, SocketBuffers(65536, 0, LOCAL_SNDBUF))
        assert a.getsockopt(SO, socket.SO_SNDBUF) == _kernel_value(socket.SO_SNDBUF, 65536)


def test_a_closed_connection_is_an_oserror() -> None:
    s = socket.socket()
    s.close()
    with pytest.raises(OSError):
        set_buffers(s, SocketBuffers(65536))


def _sndbufs(sock: gateway.Socket) -> list[int]:
    out = []
    for pipe in sock.endpoints.pipes:  # type: ignore[attr-defined]
        assert pipe.transport is not None
        raw = pipe.transport.get_extra_info("socket")
        out.append(raw.getsockopt(SO, socket.SO_SNDBUF))
    return out


@bounded(20.0)
async def test_the_engine_sizes_every_connection_dialled_or_accepted(tmp_path: Path) -> None:
    local = _kernel_value(socket.SO_SNDBUF, LOCAL_SNDBUF)
    small = _kernel_value(socket.SO_SNDBUF, 65536)
    async with gateway.Socket("REP") as rep, gateway.Socket("REQ") as req, \
            gateway.Socket("REP", sndbuf=65536) as rep2, gateway.Socket("REQ", sndbuf=0) as req0:
        req.connect(rep.bind("zmq+tcp://127.0.0.1:0"))
        await round_trip(req, rep, b"a", b"b")
        assert _sndbufs(req) == [local] and _sndbufs(rep) == [local]
        req0.connect(rep2.bind("sp+tcp://127.0.0.1:0"))
        await round_trip(req0, rep2, b"c", b"d")
        assert _sndbufs(rep2) == [small]
        assert _sndbufs(req0) != [local]  # 0: the OS's own (autotuned), not the local default
    path = tmp_path / "b.ipc"
    async with gateway.Socket("REP", sndbuf=65536) as rep, gateway.Socket("REQ") as req:
        req.connect(rep.bind(f"sp+ipc://{path}"))
        await round_trip(req, rep, b"e", b"f")
        await until(lambda: bool(rep.endpoints.pipes))  # type: ignore[attr-defined]
        assert _sndbufs(rep) == [small]


@bounded(10.0)
async def test_sizes_on_inproc_are_refused_naming_the_settings() -> None:
    async with gateway.Socket("REQ", rcvbuf=65536) as req:
        with pytest.raises(ConfigError, match="sndbuf, rcvbuf: inproc"):
            req.connect("zmq+inproc://buffers")
    async with gateway.Socket("REQ", sndbuf=0) as req:  # the OS's own: nothing to refuse
        req.connect("zmq+inproc://buffers")
        await asyncio.sleep(0)


def test_a_native_socket_takes_libzmqs_minus_one_as_the_os_own() -> None:
    assert SocketOptions(sndbuf=-1, rcvbuf=-1).buffers == SocketBuffers(0, 0, LOCAL_SNDBUF)


@pytest.mark.parametrize("value", [-2, "64k", 1.5, True, (1 << 30) + 1])
def test_a_native_socket_refuses_a_size_that_is_not_whole_bytes(value: object) -> None:
    with pytest.raises(ConfigError, match="sndbuf must be a whole number of bytes"):
        gateway.Socket("REQ", sndbuf=value)


def test_the_pyzmq_backend_passes_sizes_as_libzmq_options() -> None:
    given = pyzmq_adapter.libzmq_options("REP", SideOptions(sndbuf=65536, rcvbuf=131072))
    assert given[zmq.SNDBUF] == 65536 and given[zmq.RCVBUF] == 131072
    default = pyzmq_adapter.libzmq_options("REP", SideOptions())
    assert zmq.SNDBUF not in default and zmq.RCVBUF not in default  # libzmq's own



async def _tuned_connection(keepalive: KeepAlive | None,
                            buffers: SocketBuffers) -> tuple[int, list[str], dict[str, int]]:
    """A real connection to 127.0.0.1 dialled through :func:`tuned`, once its protocol was
    told of it: its SO_SNDBUF, the options ``socket.option_failed`` named meanwhile, and what
    ``gateway_socket_option_failures_total`` counted of each option."""
    made: list[asyncio.BaseTransport] = []
    options = ("keepalive", "buffers")
    before = {o: METRICS.get("gateway_socket_option_failures_total", option=o) for o in options}

    class Recorder(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            made.append(transport)

    loop = asyncio.get_running_loop()
    with socket.create_server(("127.0.0.1", 0)) as server, capture_logs() as logs:
        factory = tuned(Recorder, keepalive, buffers)
        transport, _ = await loop.create_connection(factory, *server.getsockname()[:2])
        accepted, _ = server.accept()
        with accepted:
            await until(lambda: bool(made))  # (never, with the connection half-made)
            sndbuf = transport.get_extra_info("socket").getsockopt(SO, socket.SO_SNDBUF)
            transport.close()
    counted = {o: METRICS.get("gateway_socket_option_failures_total", option=o) - before[o]
               for o in options}
    return sndbuf, [e["option"] for e in logs if e["event"] == "socket.option_failed"], counted


@bounded(10.0)
async def test_a_keepalive_the_kernel_refuses_leaves_the_buffers_set_and_is_logged() -> None:
    """Linux takes TCP_KEEPIDLE up to 32767 s: one refused option must neither keep the buffers
    off (they were set in the same try, after it) nor pass silently."""
    sndbuf, failed, counted = await _tuned_connection(KeepAlive(idle=40000),
                                                      SocketBuffers(65536))
    assert sndbuf == _kernel_value(socket.SO_SNDBUF, 65536)
    assert failed == ["keepalive"]
    assert counted == {"keepalive": 1, "buffers": 0}


@bounded(10.0)
async def test_any_failure_of_an_option_still_makes_the_connection() -> None:
    """Not only OSError: a size ``setsockopt`` cannot take (past a C int: a TypeError) must
    not leave the connection half-made (the protocol never told, asyncio's "Exception in
    callback" the only trace)."""
    _, failed, counted = await _tuned_connection(None, SocketBuffers(1 << 40))
    assert failed == ["buffers"]
    assert counted == {"keepalive": 0, "buffers": 1}
