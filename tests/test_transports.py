"""One verification suite every transport passes (mangos habit): every transport in the plugin
registry (tcp, ipc, inproc, and any plugin's, such as the skeleton's ``abstract``).

The checks live in ``gateway.testing.transport_suite`` (importable by third-party plugins); each
drives a transport through the two calls of ``gateway.transport``: ``listen(address, factory)
-> Listener`` and ``await dial(address, factory)``, with a plain recording ``asyncio.Protocol``.
Scheme-specific promises (tcp's real port, ipc's socket file) are checked below the suite.
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
from gateway.testing.transport_suite import CHECKS, Recorder, verify_zero_write_limits
from gateway.tls import TlsSettings
from gateway.tools.harness.certs import make_certs

TIMEOUT = 10.0
TRANSPORTS = tuple(sorted(registry().transports))
#: the byte-stream suite's subjects: the transports that declared a byte stream (SP's
#: WebSocket declares its own framing, and its codec is checked in tests/test_ws.py)
STREAMS = tuple(s for s in TRANSPORTS if registry().transport(s).framing == "stream")


def run(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(TIMEOUT):
            return await coro_fn()

    return asyncio.run(bounded())


def address_for(scheme: str, tmp_path: Path) -> str:
    """A fresh address: tcp and ipc by their syntax; any other transport gets a unique name."""
    if scheme in ("tcp", "tls+tcp"):
        return "127.0.0.1:0"
    if scheme == "ipc":
        return str(tmp_path / f"t{uuid.uuid4().hex[:8]}.sock")
    return f"verify-{uuid.uuid4().hex}"


def test_builtins_and_plugins_are_verified() -> None:
    assert {"tcp", "ipc", "inproc"} <= set(TRANSPORTS)


@pytest.mark.parametrize("scheme", TRANSPORTS)
def test_registered(scheme: str) -> None:
    assert registry().transport(scheme).scheme == scheme


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("verify_"))
@pytest.mark.parametrize("scheme", STREAMS)
def test_suite(scheme: str, check: Callable[..., Awaitable[None]], tmp_path: Path,
               request: pytest.FixtureRequest) -> None:
    transport: Any = registry().transport(scheme)
    if transport.tls:  # the engine hands it TLS settings; so does the suite
        transport = _WithTls(transport, request.getfixturevalue("certs"))
    run(lambda: check(transport, lambda: address_for(scheme, tmp_path)))


@pytest.mark.parametrize("scheme", STREAMS)
def test_zero_write_limits_on_uvloop(scheme: str, tmp_path: Path,
                                     request: pytest.FixtureRequest) -> None:
    """The flow control the engine's pipes rest on (limits 0/0: paused while the transport
    holds a byte, resumed when it holds none), on the loop the CLI runs: uvloop's transports
    (the suite above runs on asyncio's)."""
    uvloop = pytest.importorskip("uvloop")
    transport: Any = registry().transport(scheme)
    if transport.tls:
        transport = _WithTls(transport, request.getfixturevalue("certs"))

    async def bounded() -> None:
        async with asyncio.timeout(TIMEOUT):
            await verify_zero_write_limits(transport, lambda: address_for(scheme, tmp_path))

    uvloop.run(bounded())


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("certs"))


class _WithTls:
    """A TLS transport as the suite calls transports: the engine's ``tls=`` settings filled in
    (a server certificate for localhost, a client trusting its CA and expecting localhost)."""

    def __init__(self, transport: Any, certs: Path) -> None:
        self.transport = transport
        self.scheme = transport.scheme
        self.server = TlsSettings(str(certs / "server.pem"), str(certs / "server.key"))
        self.client = TlsSettings(ca=str(certs / "ca.pem"), server_name="localhost")

    def listen(self, address: str, factory: Any, *, backlog: int | None = None) -> Any:
        return self.transport.listen(address, factory, backlog=backlog, tls=self.server)

    async def dial(self, address: str, factory: Any) -> None:
        await self.transport.dial(address, factory, tls=self.client)


# -- what a scheme promises beyond the suite --------------------------------------------------


def test_tcp_listen_returns_the_real_port() -> None:
    async def main() -> None:
        listener = registry().transport("tcp").listen("127.0.0.1:0", Recorder)
        try:
            host, port = listener.address.rsplit(":", 1)
            assert host == "127.0.0.1" and int(port) > 0
            # really listening, before any await: a plain socket connects at once
            with socket.create_connection(("127.0.0.1", int(port)), timeout=2):
                pass
        finally:
            listener.close()

    run(main)


def test_ipc_socket_file_lives_with_the_listener(tmp_path: Path) -> None:
    async def main() -> None:
        asked = address_for("ipc", tmp_path)
        listener = registry().transport("ipc").listen(asked, Recorder)
        try:
            assert listener.address == asked
            assert Path(asked).is_socket()
        finally:
            listener.close()
        assert not os.path.exists(asked)  # the socket file is removed on close

    run(main)


def test_ipc_stale_socket_file_is_replaced(tmp_path: Path) -> None:
    path = str(tmp_path / "stale.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)  # bound, never listening, then gone: the file stays behind
    dead.close()
    assert Path(path).is_socket()

    async def main() -> None:
        transport = registry().transport("ipc")
        accepted: asyncio.Queue[Recorder] = asyncio.Queue()

        def factory() -> Recorder:
            proto = Recorder()
            accepted.put_nowait(proto)
            return proto

        listener = transport.listen(path, factory)
        try:
            client = Recorder()
            await transport.dial(path, lambda: client)
            await client.made
            server = await accepted.get()
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


def test_sp_message_prefix_is_declared_by_the_transport() -> None:
    """nng frames SP on ipc (and abstract) with a type byte; the transport says so, as data."""
    reg = registry()
    assert reg.transport("ipc").sp_message_prefix == b"\x01"
    assert reg.transport("tcp").sp_message_prefix == b""
    if "abstract" in reg.transports:
        assert reg.transport("abstract").sp_message_prefix == b"\x01"


def test_suite_imports_no_pytest() -> None:
    """Third parties import the suite from product code: it must not need pytest."""
    import subprocess
    import sys

    code = ("import sys, gateway.testing.transport_suite; "
            "sys.exit('pytest' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 0


# -- the listen backlog: the system maximum unless set ------------------------------------------


def _somaxconn() -> int:
    try:
        with open("/proc/sys/net/core/somaxconn", encoding="ascii") as f:
            return int(f.read())
    except OSError:
        return socket.SOMAXCONN


def listen_queue(args: list[str]) -> int:
    """The accept queue length of one listening socket, as ``ss`` shows it (Send-Q)."""
    import shutil
    import subprocess

    if shutil.which("ss") is None:
        pytest.skip("no ss (iproute2)")
    out = subprocess.run(["ss", "-lnH", *args], capture_output=True, text=True, timeout=10,
                         check=True).stdout.split("\n")
    rows = [line.split() for line in out if line.strip()]
    assert len(rows) == 1, out
    row = rows[0]
    return int(row[3] if row[0] in ("tcp", "u_str") else row[2])  # Netid column or not


def tcp_queue(port: int) -> int:
    return listen_queue(["-t", f"sport = :{port}"])


def test_default_backlog_is_the_system_maximum() -> None:
    from gateway.transport import default_backlog

    assert default_backlog() == _somaxconn()


async def _serving(listener: Any) -> None:
    """Until the loop serves the listening socket (``create_server`` ran: it calls ``listen``
    again, by default with a backlog of 100)."""
    for _ in range(200):
        if listener._server is not None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the listener never started serving")


@pytest.mark.parametrize("backlog", [None, 7])
def test_tcp_listen_backlog(backlog: int | None) -> None:
    async def main() -> None:
        transport = registry().transport("tcp")
        if backlog is None:
            listener = transport.listen("127.0.0.1:0", Recorder)
        else:
            listener = transport.listen("127.0.0.1:0", Recorder, backlog=backlog)
        try:
            port = int(listener.address.rsplit(":", 1)[1])
            assert tcp_queue(port) == (backlog or _somaxconn())
            await _serving(listener)  # create_server listens again: with the same backlog
            assert tcp_queue(port) == (backlog or _somaxconn())
        finally:
            listener.close()

    run(main)


@pytest.mark.parametrize("backlog", [None, 9])
def test_ipc_listen_backlog(backlog: int | None, tmp_path: Path) -> None:
    async def main() -> None:
        path = address_for("ipc", tmp_path)
        listener = registry().transport("ipc").listen(path, Recorder, **(
            {} if backlog is None else {"backlog": backlog}))
        try:
            assert listen_queue(["-x", "src", path]) == (backlog or _somaxconn())
            await _serving(listener)
            assert listen_queue(["-x", "src", path]) == (backlog or _somaxconn())
        finally:
            listener.close()

    run(main)


class _OldTransport:
    """A transport written before ``backlog``: its ``listen`` takes two arguments."""

    scheme = "old"

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def listen(self, address: str, protocol_factory: Any) -> Any:
        self.calls.append((address,))
        return registry().transport("tcp").listen(address, protocol_factory)

    async def dial(self, address: str, protocol_factory: Any) -> None:
        await registry().transport("tcp").dial(address, protocol_factory)


def test_engine_listen_passes_backlog_only_when_declared() -> None:
    """What a transport takes beyond address and factory it declares when it registers
    (``backlog=True``); the engine never inspects signatures."""
    from gateway.errors import ConfigError
    from gateway.transport import TransportSpec

    async def main() -> None:
        old = TransportSpec("old", _OldTransport())  # registered without backlog=True
        assert not old.backlog and registry().transport("tcp").backlog
        listener = old.listen("127.0.0.1:0", Recorder)  # the default: works as before
        listener.close()
        assert old.transport.calls == [("127.0.0.1:0",)]
        with pytest.raises(ConfigError, match="takes no listen backlog"):
            old.listen("127.0.0.1:0", Recorder, backlog=5)
        assert len(old.transport.calls) == 1  # refused before binding anything
        listener = registry().transport("tcp").listen("127.0.0.1:0", Recorder, backlog=5)
        try:
            assert tcp_queue(int(listener.address.rsplit(":", 1)[1])) == 5
        finally:
            listener.close()

    run(main)


@pytest.mark.skipif(not hasattr(socket, "TCP_KEEPIDLE"), reason="Linux TCP keepalive options")
@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_keepalive_is_set_through_a_uvloop_transports_socket_on_both_families(
        host: str) -> None:
    """``set_keepalive`` wraps the descriptor once, as AF_INET whatever its family, and leaves it
    open: on uvloop's stand-in socket (``get_extra_info("socket")``), IPv4 and IPv6."""
    uvloop = pytest.importorskip("uvloop")
    from gateway.transport import KeepAlive, set_keepalive

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        srv = socket.socket(family, socket.SOCK_STREAM)
        srv.bind((host, 0))
    except OSError:
        pytest.skip(f"no {host} here")
    srv.listen()
    port = srv.getsockname()[1]

    async def main() -> tuple[int, ...]:
        transport, _ = await asyncio.get_running_loop().create_connection(
            asyncio.Protocol, host, port)
        sock = transport.get_extra_info("socket")
        set_keepalive(sock, KeepAlive(idle=30, interval=5, count=3))
        got = (sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
               sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
               sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
               sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT))
        transport.write(b"still open")
        transport.close()
        return got

    with srv:
        got = uvloop.run(asyncio.wait_for(main(), TIMEOUT))
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(TIMEOUT)
            assert conn.recv(64) == b"still open"
    assert got == (1, 30, 5, 3)


def test_keepalive_on_a_closed_socket_is_an_oserror() -> None:
    """asyncio's stand-in of a closed socket says fileno -1: an ``OSError``, which the tcp
    transport's wrapper expects, not the ``ValueError`` a wrapper of -1 raises (review)."""
    from gateway.transport import KeepAlive, set_keepalive

    sock = socket.socket()
    stand_in = asyncio.trsock.TransportSocket(sock)
    sock.close()
    with pytest.raises(OSError):
        set_keepalive(stand_in, KeepAlive())
