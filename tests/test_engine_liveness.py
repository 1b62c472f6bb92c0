"""Liveness in the engine (gateway.engine.pipe / socket): ZMTP heartbeats (RFC 37 PING/PONG,
libzmq's HEARTBEAT_IVL/TTL/TIMEOUT), ROUTER handover, TCP keepalive on every TCP pipe.

Peers here are native sockets or raw TCP sockets that speak ZMTP by bytes, so that a peer can
complete its handshake and then fall silent on purpose; tests against libzmq itself are in
``interop_tests/test_engine_liveness.py``.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest
from _aio import bounded, closed, run, until

import gateway
from gateway import Message
from gateway.engine.hooks import SocketHooks
from gateway.errors import ConfigError
from gateway.url import parse

ZMTP_GREETING = b"\xff" + b"\x00" * 8 + b"\x7f\x03\x01" + b"NULL".ljust(20, b"\x00") + b"\x00" * 32


timed = bounded(20.0)


def ready(socket_type: bytes, identity: bytes = b"") -> bytes:
    props = b"\x0bSocket-Type" + len(socket_type).to_bytes(4, "big") + socket_type
    props += b"\x08Identity" + len(identity).to_bytes(4, "big") + identity
    body = b"\x05READY" + props
    return bytes((0x04, len(body))) + body


class RawPeer:
    """A TCP client that completes a ZMTP 3.1 NULL handshake by bytes (as a DEALER) and then
    does only what the test says: it reads what it is sent into ``got`` and answers nothing."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.got = bytearray()
        self.eof = False

    @classmethod
    async def connect(cls, url: str, identity: bytes = b"") -> RawPeer:
        reader, writer = await asyncio.open_connection("127.0.0.1", parse(url).host_port()[1])
        writer.write(ZMTP_GREETING + ready(b"DEALER", identity))
        return cls(reader, writer)

    @classmethod
    async def attach(cls, router: gateway.Socket, joined: bool = True) -> RawPeer:
        """A raw peer of ``router`` on a new ``zmq+tcp`` port; ``joined``: once the router
        counts it as a peer."""
        peer = await cls.connect(router.bind("zmq+tcp://127.0.0.1:0"))
        if joined:
            await until(lambda: router.peers == 1)
        return peer

    async def read_until(self, needle: bytes, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while needle not in self.got:
                chunk = await self.reader.read(4096)
                if not chunk:
                    self.eof = True
                    raise EOFError(bytes(self.got))
                self.got += chunk

    async def wait_closed(self, timeout: float) -> float:
        """Read (and ignore) until the other end closes; return when (monotonic)."""
        async with asyncio.timeout(timeout):
            while True:
                try:
                    chunk = await self.reader.read(4096)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    self.eof = True
                    return time.monotonic()
                self.got += chunk

    def close(self) -> None:
        self.writer.close()


# RFC 37 (ZMTP 3.1) "Connection Heartbeating": PING = %x04 PING ping-ttl ping-context, ttl in
# tenths of a second (u16), PONG = %x04 PONG ping-context.
PING_NO_TTL = b"\x04\x07\x04PING\x00\x00"


@timed
async def test_silent_peer_after_handshake_is_closed_by_heartbeat_timeout() -> None:
    async with gateway.Socket("ROUTER", heartbeat_ivl=0.1, heartbeat_timeout=0.3) as router:
        before = closed("heartbeat-timeout")
        peer = await RawPeer.attach(router)
        t0 = time.monotonic()
        await peer.read_until(PING_NO_TTL, timeout=3)  # our PING on the idle pipe
        gone = await peer.wait_closed(timeout=5)
        # PING at <= 0.1 s after the handshake, then 0.3 s: closed in [0.3, 2) s
        assert 0.25 <= gone - t0 < 2.0, gone - t0
        await until(lambda: closed("heartbeat-timeout") == before + 1)
        await until(lambda: router.peers == 0)
        peer.close()


@timed
async def test_a_peer_that_answers_pings_stays() -> None:
    async with gateway.Socket("ROUTER", heartbeat_ivl=0.05, heartbeat_timeout=0.2) as router:
        before = closed("heartbeat-timeout")
        peer = await RawPeer.attach(router)
        pings = 0
        async with asyncio.timeout(5):
            while pings < 10:  # 10 PINGs (>= 0.5 s, 2.5 timeouts), each one answered
                await peer.read_until(PING_NO_TTL)
                del peer.got[: peer.got.index(PING_NO_TTL) + len(PING_NO_TTL)]
                peer.writer.write(b"\x04\x05\x04PONG")
                pings += 1
        assert router.peers == 1 and closed("heartbeat-timeout") == before
        peer.writer.write(b"\x00\x02hi")  # and it still carries messages
        assert (await router.recv_msg()).body == (b"hi",)
        peer.close()


@timed
async def test_native_heartbeats_both_ways_keep_an_idle_pipe() -> None:
    """A native DEALER with heartbeats to a native ROUTER without: the ROUTER's codec answers
    the PINGs, so after many timeouts' worth of idleness the pipe is still up."""
    # the timeout is 5 intervals and the TTL 10: a PONG (or a PING) may be late by 0.4 s
    # (0.9 s) on a loaded machine before the pipe is rightly closed (it was 0.05 s: a loop
    # held off the CPU that long is seen here, 74 ms with 4 xdist workers and 4 CPU hogs)
    async with (gateway.Socket("ROUTER") as router,
                gateway.Socket("DEALER", heartbeat_ivl=0.1, heartbeat_timeout=0.5,
                               heartbeat_ttl=1.0) as dealer):
        before = closed("heartbeat-timeout")
        dealer.connect(router.bind("zmq+tcp://127.0.0.1:0"))
        await router.wait_peers(1)
        await dealer.wait_peers(1)
        await asyncio.sleep(1.5)  # 15 intervals, 3 timeouts, 1.5 TTLs
        assert closed("heartbeat-timeout") == before
        assert router.peers == 1 and dealer.peers == 1
        await dealer.send(b"still")
        assert (await router.recv_msg()).body == (b"still",)


@timed
async def test_busy_pipe_sends_no_ping_without_a_ttl() -> None:
    # the interval is 30 paces: traffic may be late by over half a second on a loaded
    # machine before the pipe is rightly idle (it was 0.3 s: 15 paces)
    async with gateway.Socket("ROUTER", heartbeat_ivl=0.6) as router:
        peer = await RawPeer.attach(router)
        for _ in range(45):  # traffic every 20 ms for 0.9 s, 1.5 intervals: never idle for one
            peer.writer.write(b"\x00\x01x")
            await asyncio.sleep(0.02)
        await asyncio.sleep(0)
        with pytest.raises(TimeoutError):
            await peer.read_until(b"PING", timeout=0.05)
        assert router.peers == 1
        peer.close()


@timed
async def test_no_heartbeat_timeout_while_our_back_pressure_holds_the_peer() -> None:
    """hwm 1 and nobody reads: the pipe's reading is paused (our doing, the peer's PONGs wait
    in the kernel), so no heartbeat deadline closes it; once read again, a silent peer is."""
    async with gateway.Socket("ROUTER", hwm=1, heartbeat_ivl=0.05,
                              heartbeat_timeout=0.15) as router:
        before = closed("heartbeat-timeout")
        peer = await RawPeer.attach(router, joined=False)
        peer.writer.write(b"\x00\x01a" * 5)
        await until(lambda: router.inbox_size == 1)
        (pipe,) = router.endpoints.pipes
        await until(lambda: not pipe.reading)
        await asyncio.sleep(0.6)  # four timeouts' worth
        assert router.peers == 1 and closed("heartbeat-timeout") == before
        for _ in range(5):
            assert (await asyncio.wait_for(router.recv_msg(), 5)).body == (b"a",)
        await peer.wait_closed(timeout=5)  # read again: the silent peer is closed
        assert closed("heartbeat-timeout") == before + 1
        peer.close()


@timed
async def test_our_ttl_is_in_every_ping() -> None:
    async with gateway.Socket("ROUTER", heartbeat_ivl=0.05, heartbeat_ttl=2.5) as router:
        peer = await RawPeer.attach(router, joined=False)
        await peer.read_until(b"\x04\x07\x04PING\x00\x19")  # 25 deciseconds
        peer.close()


@pytest.mark.parametrize("ours", [0.0, 0.05])
@timed
async def test_the_peers_ttl_is_honoured(ours: float) -> None:
    """The peer's PING says ttl 0.4 s; nothing follows: the pipe is closed after about 0.4 s,
    whether or not this socket sends heartbeats of its own."""
    async with gateway.Socket("ROUTER", heartbeat_ivl=ours, heartbeat_timeout=5.0) as router:
        before = closed("heartbeat-timeout")
        peer = await RawPeer.attach(router)
        t0 = time.monotonic()
        peer.writer.write(b"\x04\x07\x04PING\x00\x04")  # ttl 4 deciseconds
        await peer.read_until(b"\x04\x05\x04PONG")
        gone = await peer.wait_closed(timeout=5)
        assert 0.3 <= gone - t0 < 2.5, gone - t0
        assert closed("heartbeat-timeout") == before + 1
        peer.close()


@timed
async def test_traffic_after_the_peers_ping_keeps_the_pipe() -> None:
    async with gateway.Socket("ROUTER") as router:
        before = closed("heartbeat-timeout")
        peer = await RawPeer.attach(router)
        # a PING with ttl 0.6 s every 0.1 s: always within the TTL, with 0.5 s to spare for
        # a loaded machine (it was 0.3 s: 0.2 s to spare); 8 PINGs outlast one TTL
        for _ in range(8):
            peer.writer.write(b"\x04\x07\x04PING\x00\x06")
            await asyncio.sleep(0.1)
        assert router.peers == 1 and closed("heartbeat-timeout") == before
        peer.close()


# -- ROUTER handover ----------------------------------------------------------------------------


@pytest.mark.parametrize("handover", [True, False])
@timed
async def test_router_handover(handover: bool) -> None:
    """A half-open link (a raw socket that stays open, silent) holds the routing id "alice";
    a DEALER reconnecting as "alice" takes it over at once (handover) or is refused as
    ``duplicate-identity`` (libzmq's default)."""
    async with (gateway.Socket("ROUTER", router_handover=handover) as router,
                gateway.Socket("DEALER", identity=b"alice", reconnect_ivl=5.0) as alice):
        url = router.bind("zmq+tcp://127.0.0.1:0")
        stale = await RawPeer.connect(url, identity=b"alice")
        await until(lambda: router.peers == 1)
        refused, took = closed("duplicate-identity"), closed("handover")
        alice.connect(url)
        if handover:
            await stale.wait_closed(timeout=5)  # the old pipe is closed
            await alice.wait_peers(1)
            await alice.send(b"hi")
            msg = await router.recv_msg()
            assert msg == Message((b"alice",), (b"hi",))
            await router.send_msg(Message((b"alice",), (b"hello",)))
            assert await asyncio.wait_for(alice.recv(), 5) == b"hello"
            assert closed("handover") == took + 1 and closed("duplicate-identity") == refused
            assert router.peers == 1
        else:
            await until(lambda: closed("duplicate-identity") == refused + 1)
            assert closed("handover") == took
            await router.send_msg(Message((b"alice",), (b"to the old one",)))
            await stale.read_until(b"to the old one")
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(alice.recv(), 0.3)
        stale.close()


@timed
async def test_handover_routes_a_reply_in_flight_to_the_new_pipe() -> None:
    """As libzmq: a reply addressed to the routing id after the handover goes to the peer that
    holds it now (the old pipe was relabelled; its loss touches nothing of "alice")."""
    async with (gateway.Socket("ROUTER", router_handover=True) as router,
                gateway.Socket("DEALER", identity=b"alice") as alice):
        lost: list[bytes] = []

        class Lost(SocketHooks):
            def pipe_lost(self, routing_id: bytes) -> None:
                lost.append(routing_id)

        router.observe(Lost())
        url = router.bind("zmq+tcp://127.0.0.1:0")
        stale = await RawPeer.connect(url, identity=b"alice")
        stale.writer.write(b"\x00\x07request")
        request = await router.recv_msg()  # taken from the old pipe, not yet answered
        assert request.hops == (b"alice",)
        alice.connect(url)
        await stale.wait_closed(timeout=5)
        await alice.wait_peers(1)
        await until(lambda: len(lost) == 1)
        assert lost[0] != b"alice" and lost[0][:1] == b"\x00"  # the relabelled old pipe
        await router.send_msg(Message(request.hops, (b"reply",)))
        assert await asyncio.wait_for(alice.recv(), 5) == b"reply"
        stale.close()


@pytest.mark.parametrize("same_key", [True, False])
def test_handover_behind_curve_needs_the_same_client_key(same_key: bool) -> None:
    """Issue 20, finding 7: with CURVE, a peer presenting a connected client's routing id
    takes it over only when it proved the same client key; another client (who learnt the id)
    is refused as ``duplicate-identity`` and never sees the first one's replies."""
    from gateway.security import Security
    from gateway.wire.zmtp_curve import keypair

    s_pub, s_sec = keypair()
    a_pub, a_sec = keypair()
    m_pub, m_sec = keypair()

    def client(public: bytes, secret: bytes) -> gateway.Socket:
        return gateway.Socket("DEALER", identity=b"alice", reconnect_ivl=5.0,
                              security=Security("CURVE", False, public, secret, s_pub))

    async def main() -> None:
        async with (gateway.Socket("ROUTER", router_handover=True,
                                   security=Security("CURVE", True, s_pub, s_sec)) as router,
                    client(a_pub, a_sec) as alice,
                    client(*((a_pub, a_sec) if same_key else (m_pub, m_sec))) as second):
            url = router.bind("zmq+tcp://127.0.0.1:0")
            alice.connect(url)
            await alice.send(b"request")
            request = await asyncio.wait_for(router.recv_msg(), 5)
            refused, took = closed("duplicate-identity"), closed("handover")
            second.connect(url)
            if same_key:
                await until(lambda: closed("handover") == took + 1)
                await second.wait_peers(1)
                await router.send_msg(Message(request.hops, (b"reply",)))
                assert await asyncio.wait_for(second.recv(), 5) == b"reply"
            else:
                await until(lambda: closed("duplicate-identity") == refused + 1)
                assert closed("handover") == took
                await router.send_msg(Message(request.hops, (b"reply",)))
                assert await asyncio.wait_for(alice.recv(), 5) == b"reply"
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(second.recv(), 0.3)

    run(main())


# -- TCP keepalive ------------------------------------------------------------------------------


def _keepalive_of(pipe: Any) -> tuple[int, int, int, int]:
    sock = pipe.transport.get_extra_info("socket")
    return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT))


@pytest.mark.skipif(not hasattr(socket, "TCP_KEEPIDLE"), reason="Linux TCP keepalive options")
@pytest.mark.parametrize("wire", ["zmq", "sp"])
@timed
async def test_tcp_keepalive_on_every_pipe(wire: str) -> None:
    async with (gateway.Socket("REP", tcp_keepalive_idle=30, tcp_keepalive_intvl=5,
                               tcp_keepalive_cnt=3) as rep,
                gateway.Socket("REQ") as req,
                gateway.Socket("REQ", tcp_keepalive=False) as bare):
        url = rep.bind(f"{wire}+tcp://127.0.0.1:0")
        req.connect(url)
        bare.connect(url)
        await rep.wait_peers(2)
        await req.wait_peers(1)
        await bare.wait_peers(1)
        for pipe in rep.endpoints.pipes:  # accepted
            assert _keepalive_of(pipe) == (1, 30, 5, 3)
        (dialled,) = req.endpoints.pipes  # the default: on, 60 s, 10 s, 6
        assert _keepalive_of(dialled) == (1, 60, 10, 6)
        (plain,) = bare.endpoints.pipes
        assert _keepalive_of(plain)[0] == 0


@pytest.mark.parametrize(("name", "value"), [
    ("tcp_keepalive_idle", 32768), ("tcp_keepalive_intvl", 40000), ("tcp_keepalive_cnt", 128),
    ("tcp_keepalive_idle", 0), ("tcp_keepalive_cnt", 0)])
def test_a_keepalive_linux_would_refuse_is_a_config_error(name: str, value: int) -> None:
    """Linux takes TCP_KEEPIDLE and TCP_KEEPINTVL within 1..32767 s and TCP_KEEPCNT within
    1..127: past them each connection's setsockopt failed, and the connection ran on the
    kernel's own keepalive (2 h, 9 probes) with no word; now the mistake is the config's."""
    from gateway.settings import schema

    with pytest.raises(ConfigError, match=name):
        gateway.Socket("REQ", **{name: value})
    with pytest.raises(ConfigError, match=name):
        schema.read([(name, str(value))], "")


def test_bad_heartbeat_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        gateway.Socket("ROUTER", heartbeat_ivl=-1)
    with pytest.raises(ConfigError, match="6553.5"):
        gateway.Socket("ROUTER", heartbeat_ttl=7000)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_stalled_loop_keeps_a_peer_whose_pong_waits_in_the_kernel(loop: str) -> None:
    """The loop stalls (a long GC pause, a starved CPU) past the heartbeat timeout just after a
    PING, and the peer's PONG arrives meanwhile: the peer is alive and stays. The timeout only
    compares receive counters, so this holds because both loops read ready sockets before they
    run due timers (uvloop >= 0.19's libuv does); a loop that ran timers first would fail it."""
    import threading

    pinged = threading.Event()
    stop = threading.Event()

    def peer(port: int) -> None:  # a DEALER on a thread of its own: it answers while we stall
        with socket.create_connection(("127.0.0.1", port), timeout=0.1) as s:
            s.sendall(ZMTP_GREETING + ready(b"DEALER"))
            got = b""
            while not stop.is_set():
                try:
                    got += s.recv(4096)
                except TimeoutError:
                    continue
                while PING_NO_TTL in got:
                    got = got[got.index(PING_NO_TTL) + len(PING_NO_TTL):]
                    pinged.set()
                    time.sleep(0.03)  # the loop is stalled by now: the PONG waits unread
                    s.sendall(b"\x04\x05\x04PONG")

    async def main() -> None:
        async with gateway.Socket("ROUTER", heartbeat_ivl=0.05, heartbeat_timeout=0.2) as router:
            url = router.bind("zmq+tcp://127.0.0.1:0")
            before = closed("heartbeat-timeout")
            thread = threading.Thread(target=peer, args=(parse(url).host_port()[1],))
            thread.start()
            try:
                await until(lambda: router.peers == 1)
                for _ in range(3):
                    pinged.clear()
                    assert await asyncio.to_thread(pinged.wait, 5)
                    time.sleep(0.5)  # the stall: 2.5 timeouts, nothing runs
                    await asyncio.sleep(0.15)
                    assert closed("heartbeat-timeout") == before and router.peers == 1
            finally:
                stop.set()
                await asyncio.to_thread(thread.join, 5)

    async def bounded() -> None:
        async with asyncio.timeout(20):
            await main()

    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")  # optional (not on Windows)
        uvloop.run(bounded())
    else:
        asyncio.run(bounded())
