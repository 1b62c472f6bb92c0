"""The native engine against nng (pynng 0.9) over SP/TCP on 127.0.0.1.

Cooked ``pynng.Req0``/``Rep0`` and raw ones (``opener=pynng.lib.nng_req0_open_raw`` /
``nng_rep0_open_raw``), whose message headers are read and written through ``pynng.lib``:
req/rep legal both ways and both bind directions (100 messages each), req/req and rep/rep
refused (timeout-bounded: the native side counts a PairingError, nng receives nothing), native
xrep hops equal to what nng's raw rep puts in its header, the hop limit as nng applies it, and
the nanomsg / nng command-line tools against native sockets.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from typing import Any

import pynng
import pytest
from pynng import ffi, lib

import gateway
from gateway import Message
from gateway.metrics import METRICS
from gateway.tools.harness.procs import free_port
from interop_tests.helpers import pairing_errors, run

N = 100
#: a refused protocol is closed at the SP header: within half the 10 s handshake timeout,
#: so a refusal left to that timeout still fails (1.5 s left a loaded machine little room)
REFUSE_WITHIN = 5.0
QUIET_MS = 300


def is_pipe_id(word: bytes) -> bool:
    return len(word) == 4 and not word[0] & 0x80


def is_rid(word: bytes) -> bool:
    return len(word) == 4 and bool(word[0] & 0x80)


# -- pynng helpers ----------------------------------------------------------------------------


def nng_socket(kind: str, raw: bool = False) -> pynng.Socket:
    cls = {"REQ": pynng.Req0, "REP": pynng.Rep0}[kind]
    opts: dict[str, Any] = {"recv_timeout": 5000, "send_timeout": 5000,
                            "reconnect_time_min": 50, "reconnect_time_max": 200}
    if raw:
        opts["opener"] = lib.nng_req0_open_raw if kind == "REQ" else lib.nng_rep0_open_raw
    return cls(**opts)


def nng_listen(sock: pynng.Socket) -> str:
    """Listen on an ephemeral port; the real address from the listener (pynng 0.9's
    ``local_address.port`` is byte-swapped: use its string form)."""
    listener = sock.listen("tcp://127.0.0.1:0")
    return f"tcp://{listener.local_address}"


def header_of(msg: pynng.Message) -> bytes:
    raw = msg._nng_msg
    return bytes(ffi.buffer(lib.nng_msg_header(raw), lib.nng_msg_header_len(raw)))


def with_header(header: bytes, body: bytes) -> pynng.Message:
    msg = pynng.Message(body)
    assert lib.nng_msg_header_append(msg._nng_msg, header, len(header)) == 0
    return msg


# pynng's own coroutines are not used: cancelling a pending ``arecv`` (a timeout) can hang the
# event loop (seen with pynng 0.9.0). Blocking calls in a worker thread, bounded by the socket's
# recv/send timeouts, cannot.


async def nrecv(sock: pynng.Socket) -> bytes:
    return await asyncio.to_thread(sock.recv)


async def nrecv_msg(sock: pynng.Socket) -> pynng.Message:
    return await asyncio.to_thread(sock.recv_msg)


async def nsend(sock: pynng.Socket, data: bytes) -> None:
    await asyncio.to_thread(sock.send, data)


async def nsend_msg(sock: pynng.Socket, msg: pynng.Message) -> None:
    await asyncio.to_thread(sock.send_msg, msg)


def words(data: bytes) -> tuple[bytes, ...]:
    return tuple(data[i : i + 4] for i in range(0, len(data), 4))


async def nng_recv_nothing(sock: pynng.Socket) -> None:
    """Block (in a thread) for QUIET_MS and insist nothing arrives."""
    sock.recv_timeout = QUIET_MS
    with pytest.raises(pynng.Timeout):
        await asyncio.to_thread(sock.recv)


class Link:
    """A native socket and an nng socket connected one way or the other."""

    def __init__(self, native: gateway.Socket, nng: pynng.Socket, binder: str) -> None:
        self.native, self.nng, self.binder = native, nng, binder

    async def __aenter__(self) -> Link:
        if self.binder == "native":
            url = self.native.bind("sp+tcp://127.0.0.1:0")
            self.nng.dial(gateway.url.parse(url).lib_url, block=False)
        else:
            self.native.connect("sp+" + nng_listen(self.nng))
        return self

    async def ready(self) -> Link:
        await self.native.wait_peers(1, timeout=5)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.native.close()
        self.nng.close()


BINDERS = ("native", "nng")


# -- legal pairs: cooked nng -----------------------------------------------------------------------


@pytest.mark.parametrize("binder", BINDERS)
def test_native_req_to_nng_rep(binder: str) -> None:
    async def main() -> None:
        async with Link(gateway.Socket("REQ"), nng_socket("REP"), binder) as link:
            await link.ready()
            for i in range(N):
                await link.native.send(b"q%d" % i)
                assert await nrecv(link.nng) == b"q%d" % i
                await nsend(link.nng, b"r%d" % i)
                assert await link.native.recv() == b"r%d" % i

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_nng_req_to_native_rep(binder: str) -> None:
    async def main() -> None:
        async with Link(gateway.Socket("REP"), nng_socket("REQ"), binder) as link:
            await link.ready()
            for i in range(N):
                await nsend(link.nng, b"q%d" % i)
                assert await link.native.recv() == b"q%d" % i
                bt = link.native.pattern.backtrace
                assert len(bt) == 2 and is_pipe_id(bt[0]) and is_rid(bt[1])  # (pipe, nng's rid)
                await link.native.send(b"r%d" % i)
                assert await nrecv(link.nng) == b"r%d" % i

    run(main())


# -- legal pairs: raw nng, headers compared word for word ---------------------------------------


@pytest.mark.parametrize("binder", BINDERS)
def test_native_req_to_nng_raw_rep_header(binder: str) -> None:
    async def main() -> None:
        async with Link(gateway.Socket("REQ"), nng_socket("REP", raw=True), binder) as link:
            await link.ready()
            seen_pipes = set()
            rids = []
            for i in range(N):
                await link.native.send(b"q%d" % i)
                rid = link.native.pattern.pending
                msg = await nrecv_msg(link.nng)
                pipe, got_rid = words(header_of(msg))  # nng: [pipe id][request id]
                assert is_pipe_id(pipe) and got_rid == rid and msg.bytes == b"q%d" % i
                seen_pipes.add(pipe)
                rids.append(int.from_bytes(rid, "big"))
                await nsend_msg(link.nng, with_header(pipe + got_rid, b"r%d" % i))
                assert await link.native.recv() == b"r%d" % i
            assert len(seen_pipes) == 1
            assert all(b - a == 1 for a, b in zip(rids, rids[1:], strict=False))

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_nng_raw_req_to_native_rep(binder: str) -> None:
    async def main() -> None:
        async with Link(gateway.Socket("REP"), nng_socket("REQ", raw=True), binder) as link:
            await link.ready()
            for i in range(N):
                rid = (0x80000000 | (1000 + i)).to_bytes(4, "big")
                await nsend_msg(link.nng, with_header(rid, b"q%d" % i))
                assert await link.native.recv() == b"q%d" % i
                pipe, got_rid = link.native.pattern.backtrace
                assert is_pipe_id(pipe) and got_rid == rid
                await link.native.send(b"r%d" % i)
                reply = await nrecv_msg(link.nng)
                assert header_of(reply) == rid and reply.bytes == b"r%d" % i

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_native_xrep_with_nng_req(binder: str) -> None:
    async def main() -> None:
        async with Link(gateway.Socket("REP", raw=True), nng_socket("REQ"), binder) as link:
            await link.ready()
            for i in range(N):
                await nsend(link.nng, b"q%d" % i)
                msg = await link.native.recv_msg()
                assert len(msg.hops) == 2 and is_pipe_id(msg.hops[0]) and is_rid(msg.hops[1])
                assert msg.body == (b"q%d" % i,)
                await link.native.send_msg(Message(msg.hops, (b"r%d" % i,)))
                assert await nrecv(link.nng) == b"r%d" % i

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
@pytest.mark.parametrize("hops", [0, 2], ids=["rid-only", "two-hops"])
def test_native_xreq_with_nng_rep(binder: str, hops: int) -> None:
    """nng's cooked REP stores the whole backtrace and puts it back: xreq gets its hops again."""

    async def main() -> None:
        async with Link(gateway.Socket("REQ", raw=True), nng_socket("REP"), binder) as link:
            await link.ready()
            for i in range(N):
                trail = tuple((0x100 * k + i).to_bytes(4, "big") for k in range(1, hops + 1))
                envelope = (*trail, (0x80000000 | i).to_bytes(4, "big"))
                await link.native.send_msg(Message(envelope, (b"q%d" % i,)))
                assert await nrecv(link.nng) == b"q%d" % i
                await nsend(link.nng, b"r%d" % i)
                assert await link.native.recv_msg() == Message(envelope, (b"r%d" % i,))

    run(main())


def test_native_xrep_hops_equal_nng_raw_rep_header() -> None:
    """The same request (same wire bytes, from a native xreq) into a native xrep and into nng's
    raw rep: the hops after the pipe id equal nng's header words after its pipe id."""

    async def main() -> None:
        xreq_a = gateway.Socket("REQ", raw=True)
        xreq_b = gateway.Socket("REQ", raw=True)
        async with (gateway.Socket("REP", raw=True) as xrep,
                    Link(xreq_b, nng_socket("REP", raw=True), "nng") as link):
            xreq_a.connect(xrep.bind("sp+tcp://127.0.0.1:0"))
            await xreq_a.wait_peers(1)
            await link.ready()
            for backtrace in ((b"\x80\x00\x00\x01",),
                              (b"\x00\x00\x00\x07", b"\x80\x00\x00\x02"),
                              (b"\x00\x00\x01\x00", b"\x00\x00\x00\x09", b"\x80\x12\x34\x56")):
                request = Message(backtrace, (b"same request",))
                await xreq_a.send_msg(request)
                await xreq_b.send_msg(request)
                native = await xrep.recv_msg()
                nng_msg = await nrecv_msg(link.nng)
                nng_hops = words(header_of(nng_msg))
                assert is_pipe_id(native.hops[0]) and is_pipe_id(nng_hops[0])
                assert native.hops[1:] == nng_hops[1:] == backtrace
                assert native.body == (nng_msg.bytes,)
                # and the replies, routed by each side's own pipe id, come back identical
                await xrep.send_msg(Message(native.hops, (b"reply",)))
                await nsend_msg(link.nng, with_header(b"".join(nng_hops), b"reply"))
                assert await xreq_a.recv_msg() == await xreq_b.recv_msg() == Message(
                    backtrace, (b"reply",))
            xreq_a.close()

    run(main())


def test_native_req_into_native_xrep_and_nng_raw_rep_same_shape() -> None:
    async def main() -> None:
        async with (gateway.Socket("REP", raw=True) as xrep, gateway.Socket("REQ") as req,
                    Link(gateway.Socket("REQ"), nng_socket("REP", raw=True), "nng") as link):
            req.connect(xrep.bind("sp+tcp://127.0.0.1:0"))
            await link.ready()
            await req.send(b"x")
            await link.native.send(b"x")
            native = await xrep.recv_msg()
            nng_hops = words(header_of(await nrecv_msg(link.nng)))
            assert len(native.hops) == len(nng_hops) == 2
            assert native.hops[1] == req.pattern.pending and nng_hops[1] == link.native.pattern.pending

    run(main())


# -- the hop limit, as nng applies it ---------------------------------------------------------------

HOP = b"\x00\x00\x00\x05"
RID = b"\x80\x00\x00\x06"


def test_nng_raw_rep_applies_the_same_hop_limit_as_native() -> None:
    """8 words pass, 9 are dropped, on nng's raw rep (default ttl-max 8) as on native xrep."""

    async def main() -> None:
        async with (gateway.Socket("REP", raw=True) as xrep, gateway.Socket("REQ", raw=True) as a,
                    Link(gateway.Socket("REQ", raw=True), nng_socket("REP", raw=True), "nng") as link):
            a.connect(xrep.bind("sp+tcp://127.0.0.1:0"))
            await a.wait_peers(1)
            await link.ready()
            before = METRICS.get("gateway_socket_dropped_messages_total", reason="ttl")
            for sender in (a, link.native):
                await sender.send_msg(Message((HOP,) * 8 + (RID,), (b"nine words",)))
                await sender.send_msg(Message((HOP,) * 7 + (RID,), (b"eight words",)))
            native = await xrep.recv_msg()
            nng_msg = await nrecv_msg(link.nng)
            assert native.body == (b"eight words",) and nng_msg.bytes == b"eight words"
            assert native.hops[1:] == words(header_of(nng_msg))[1:] == (HOP,) * 7 + (RID,)
            assert METRICS.get("gateway_socket_dropped_messages_total", reason="ttl") == before + 1
            await nng_recv_nothing(link.nng)
            assert xrep.peers == 1  # dropped, not disconnected

    run(main())


def test_native_xrep_drops_nng_raw_req_over_the_hop_limit() -> None:
    async def main() -> None:
        async with Link(gateway.Socket("REP", raw=True), nng_socket("REQ", raw=True), "native") as link:
            await link.ready()
            before = METRICS.get("gateway_socket_dropped_messages_total", reason="ttl")
            await nsend_msg(link.nng, with_header(HOP * 8 + RID, b"too far"))
            await nsend_msg(link.nng, with_header(HOP * 7 + RID, b"fits"))
            msg = await link.native.recv_msg()
            assert msg.body == (b"fits",) and msg.hops[1:] == (HOP,) * 7 + (RID,)
            assert METRICS.get("gateway_socket_dropped_messages_total", reason="ttl") == before + 1
            await link.native.send_msg(Message(msg.hops, (b"back",)))
            reply = await nrecv_msg(link.nng)
            assert header_of(reply) == HOP * 7 + RID and reply.bytes == b"back"

    run(main())


# -- illegal pairs: refused, nothing crosses -----------------------------------------------------


def illegal_cells() -> Iterator[Any]:
    for nng_kind, natives in (("REQ", (("REQ", False), ("REQ", True), ("DEALER", False))),
                              ("REP", (("REP", False), ("REP", True), ("ROUTER", False)))):
        for kind, raw in natives:
            for binder in BINDERS:
                name = ("x" + kind.lower()) if raw else kind
                yield pytest.param(kind, raw, nng_kind, binder,
                                   id=f"native{name}-nng{nng_kind}-{binder}Binds")


@pytest.mark.parametrize(("kind", "raw", "nng_kind", "binder"), list(illegal_cells()))
def test_illegal_pair_refused(kind: str, raw: bool, nng_kind: str, binder: str) -> None:
    async def main() -> None:
        before = pairing_errors()
        native = gateway.Socket(kind, raw=raw)
        async with Link(native, nng_socket(nng_kind), binder) as link:
            async with asyncio.timeout(REFUSE_WITHIN):
                while pairing_errors() == before:
                    await asyncio.sleep(0.01)
            assert native.peers == 0
            quiet = QUIET_MS / 1000

            async def nng_sends() -> None:
                link.nng.send_timeout = QUIET_MS
                try:
                    await asyncio.to_thread(link.nng.send, b"from nng")
                except pynng.Timeout:
                    pass  # no pipe to take it: refused either way

            async def native_sends() -> None:
                if native.pattern.routed:  # to a made-up pipe: dropped as unroutable
                    if not native.pattern.cooked:
                        await native.send_msg(Message((b"\x00\x00\x00\x01", RID), (b"x",)))
                    return
                with pytest.raises(TimeoutError):  # no pipe ever becomes ready
                    await asyncio.wait_for(
                        native.send_msg(Message((RID,) if not native.pattern.cooked else (),
                                                (b"from native",))), quiet)

            async def native_receives_nothing() -> None:
                if native.pattern.cooked and not native.pattern.routed:
                    await asyncio.sleep(quiet)  # a REQ may not recv before a request went out
                    assert not native.inbox_size
                else:
                    with pytest.raises(TimeoutError):
                        await asyncio.wait_for(native.recv_msg(), quiet)

            checks = [native_sends(), native_receives_nothing()]
            checks.append(nng_sends() if nng_kind == "REQ" else nng_recv_nothing(link.nng))
            await asyncio.gather(*checks)
            assert native.peers == 0

    run(main())


# -- the command-line tools (nanomsg 1.1.5 nanocat, nng 1.5.2 nngcat) ------------------------------


async def _tool(*argv: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def _stop(proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
    if proc.returncode is None:
        proc.kill()
    return await proc.communicate()


@pytest.mark.parametrize("tool", [
    ("nanocat", "--req", "--connect", "tcp://127.0.0.1:{port}", "--data", "hello", "--raw"),
    ("nngcat", "--req0", "--connect", "tcp://127.0.0.1:{port}", "--data", "hello", "--raw"),
], ids=["nanocat", "nngcat"])
def test_cli_req_to_native_rep(tool: tuple[str, ...]) -> None:
    if shutil.which(tool[0]) is None:
        pytest.skip(f"{tool[0]} not installed")

    async def main() -> None:
        async with gateway.Socket("REP") as rep:
            port = gateway.url.parse(rep.bind("sp+tcp://127.0.0.1:0")).host_port()[1]
            proc = await _tool(*(arg.format(port=port) for arg in tool))
            try:
                assert await rep.recv() == b"hello"
                bt = rep.pattern.backtrace
                assert len(bt) == 2 and is_pipe_id(bt[0]) and is_rid(bt[1])
                await rep.send(b"world")
                out, _ = await asyncio.wait_for(proc.communicate(), 5)
                assert out == b"world" and proc.returncode == 0
            finally:
                await _stop(proc)

    run(main())


def test_native_req_to_nanocat_rep() -> None:
    if shutil.which("nanocat") is None:
        pytest.skip("nanocat not installed")

    async def main() -> None:
        port = free_port()
        proc = await _tool("nanocat", "--rep", "--bind", f"tcp://127.0.0.1:{port}",
                           "--data", "pong", "--raw")
        try:
            async with gateway.Socket("REQ", reconnect_ivl=0.05) as req:
                req.connect(f"nanomsg+tcp://127.0.0.1:{port}")
                for i in range(5):
                    await req.send(b"ping%d" % i)
                    assert await req.recv() == b"pong"
        finally:
            out, _ = await _stop(proc)
        assert out == b"ping0ping1ping2ping3ping4"

    run(main())


def test_nanocat_req_to_native_req_is_refused() -> None:
    if shutil.which("nanocat") is None:
        pytest.skip("nanocat not installed")

    async def main() -> None:
        async with gateway.Socket("REQ") as req:
            port = gateway.url.parse(req.bind("sp+tcp://127.0.0.1:0")).host_port()[1]
            before = pairing_errors()
            proc = await _tool("nanocat", "--req", "--connect", f"tcp://127.0.0.1:{port}",
                               "--data", "hello", "--raw")
            try:
                async with asyncio.timeout(REFUSE_WITHIN):
                    while pairing_errors() == before:
                        await asyncio.sleep(0.01)
                assert req.peers == 0
            finally:
                out, _ = await _stop(proc)
            assert out == b""  # no reply ever reached it

    run(main())


# -- SP over IPC -------------------------------------------------------------------------------------


@pytest.mark.parametrize("binder", BINDERS)
def test_native_rep_with_nng_req_over_ipc(binder: str, tmp_path: Any) -> None:
    path = f"{tmp_path}/sp.sock"

    async def main() -> None:
        nng = nng_socket("REQ")
        nng.recv_timeout = nng.send_timeout = 1500
        async with gateway.Socket("REP") as rep:
            if binder == "native":
                rep.bind(f"sp+ipc://{path}")
                nng.dial(f"ipc://{path}", block=False)
            else:
                nng.listen(f"ipc://{path}")
                rep.connect(f"sp+ipc://{path}")
            try:
                await nsend(nng, b"over ipc")
                assert await asyncio.wait_for(rep.recv(), 1.5) == b"over ipc"
                await rep.send(b"back")
                assert await nrecv(nng) == b"back"
            finally:
                nng.close()

    run(main())
