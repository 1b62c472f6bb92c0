"""The native engine's pub0/sub0, push0/pull0, pair0 and pair1 against nng (pynng) and the
nanomsg / nng 1.5 command-line tools (``nanocat``, ``nngcat``), both bind directions, on
127.0.0.1. SP pub/sub has no subscription traffic: sub0 filters locally."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pynng
import pytest
from pynng import _nng

import gateway
from gateway import Message
from gateway.tools.harness.peers.cli import parse_hex_line
from gateway.tools.harness.procs import free_port
from interop_tests.helpers import Flood, linked_peer, number_of, pair_busy, pairing_errors, run

ffi, lib = _nng.ffi, _nng.lib
BINDERS = ("native", "nng")
QUIET_MS = 300


def nng(cls: type[pynng.Socket], raw: bool = False, **kw: Any) -> pynng.Socket:
    opts: dict[str, Any] = {"recv_timeout": 5000, "send_timeout": 5000,
                            "reconnect_time_min": 50, "reconnect_time_max": 200, **kw}
    if raw:  # only pair1 is needed raw here
        return pynng.Socket(opener=lib.nng_pair1_open_raw, **opts)
    return cls(**opts)


def link(native: gateway.Socket, sock: pynng.Socket, binder: str) -> str:
    if binder == "native":
        url = gateway.url.parse(native.bind("sp+tcp://127.0.0.1:0")).lib_url
        sock.dial(url, block=False)
        return url
    url = f"tcp://{sock.listen('tcp://127.0.0.1:0').local_address}"
    native.connect("sp+" + url)
    return url


def linked(kind: str, cls: type[pynng.Socket], binder: str, wait: bool = True,
           native_opts: dict[str, Any] | None = None,
           **nng_opts: Any) -> AbstractAsyncContextManager[tuple[gateway.Socket, pynng.Socket]]:
    """A native socket of ``kind`` and an nng one of ``cls`` (:func:`nng`, :func:`linked_peer`)."""
    return linked_peer(kind, native_opts, lambda: nng(cls, **nng_opts), link, binder, wait)


# pynng's coroutines are not used (cancelling a pending arecv can hang the loop): blocking calls
# in a thread, bounded by the socket's timeouts.
async def nrecv(sock: pynng.Socket) -> bytes:
    return await asyncio.to_thread(sock.recv)


async def nsend(sock: pynng.Socket, data: bytes) -> None:
    await asyncio.to_thread(sock.send, data)


async def nothing_at(sock: pynng.Socket) -> None:
    sock.recv_timeout = QUIET_MS
    with pytest.raises(pynng.Timeout):
        await asyncio.to_thread(sock.recv)


async def until(pred: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(0.01)


def header_of(msg: pynng.Message) -> bytes:
    raw = msg._nng_msg
    return bytes(ffi.buffer(lib.nng_msg_header(raw), lib.nng_msg_header_len(raw)))


# -- pub/sub ------------------------------------------------------------------------------------


@pytest.mark.parametrize("binder", BINDERS)
def test_native_pub_to_nng_sub(binder: str) -> None:
    async def main() -> None:
        async with linked("PUB", pynng.Sub0, binder, topics=[b"a.", b"b"]) as (pub, sub):
            await until(lambda: len(sub.pipes) == 1)  # nng's side of the pipe
            for m in (b"a.1", b"c.1", b"bz", b"a", b"a.2"):
                await pub.send(m)
            assert [await nrecv(sub) for _ in range(3)] == [b"a.1", b"bz", b"a.2"]
            await nothing_at(sub)
            sub.unsubscribe(b"b")
            sub.subscribe(b"")
            await pub.send_multipart([b"t", b"opic"])  # SP carries one frame: concatenated
            sub.recv_timeout = 5000
            assert await nrecv(sub) == b"topic"

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_nng_pub_to_native_sub_filters_locally(binder: str) -> None:
    async def main() -> None:
        pub = nng(pynng.Pub0)
        async with gateway.Socket("SUB", subscribe=[b"a.", b"a"]) as sub, \
                gateway.Socket("SUB", subscribe=b"") as every:
            url = link(sub, pub, binder)
            if binder == "native":
                pub.dial(gateway.url.parse(every.bind("sp+tcp://127.0.0.1:0")).lib_url, block=False)
            else:
                every.connect("sp+" + url)
            await sub.wait_peers(1)
            await every.wait_peers(1)
            await until(lambda: len(pub.pipes) == 2)  # nng's pub0 sends only on pipes it has
            for m in (b"a.1", b"b.1", b"ab", b""):
                await nsend(pub, m)
            async with asyncio.timeout(5):
                assert [await sub.recv() for _ in range(2)] == [b"a.1", b"ab"]
                assert [await every.recv() for _ in range(4)] == [b"a.1", b"b.1", b"ab", b""]
            await until(lambda: sub.pattern.filtered == 2)  # type: ignore[attr-defined]
            sub.unsubscribe(b"a")
            await nsend(pub, b"ab")
            await nsend(pub, b"a.2")
            async with asyncio.timeout(5):
                assert await sub.recv() == b"a.2"
            pub.close()

    run(main())


def test_native_xsub_as_raw_sub0_receives_everything() -> None:
    async def main() -> None:
        async with linked("XSUB", pynng.Pub0, "nng") as (xsub, pub):
            await until(lambda: len(pub.pipes) == 1)  # nng's pub0 sends only on pipes it has
            await nsend(pub, b"whatever")
            async with asyncio.timeout(5):
                assert await xsub.recv_msg() == Message((), (b"whatever",))

    run(main())


# -- pipeline -----------------------------------------------------------------------------------

N = 1000


@pytest.mark.parametrize("binder", BINDERS)
def test_native_push_to_nng_pull(binder: str) -> None:
    async def main() -> None:
        async with linked("PUSH", pynng.Pull0, binder) as (push, pull):
            for i in range(N):
                await push.send(b"%d" % i)
            assert [await nrecv(pull) for _ in range(N)] == [b"%d" % i for i in range(N)]

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_nng_push_to_native_pull(binder: str) -> None:
    async def main() -> None:
        async with linked("PULL", pynng.Push0, binder) as (pull, push):
            sender = asyncio.ensure_future(asyncio.to_thread(
                lambda: [push.send(b"%d" % i) for i in range(N)]))
            async with asyncio.timeout(15):
                got = [await pull.recv() for _ in range(N)]
            await sender
            assert got == [b"%d" % i for i in range(N)]

    run(main())


def test_native_push_back_pressure_from_a_slow_nng_pull() -> None:
    total, size = 300, 64 * 1024

    async def main() -> None:
        async with linked("PUSH", pynng.Pull0, "native", native_opts={"hwm": 4},
                          recv_buffer_size=1) as (push, pull):
            flood = Flood(push.send, total, size)
            await flood.assert_held(still=0.5)  # waiting, not dropping
            pull.recv_timeout = 10000
            got = [number_of(await nrecv(pull)) for _ in range(total)]
            await flood.task
            assert got == list(range(total))

    run(main(), timeout=60)


# -- pair0, pair1 -------------------------------------------------------------------------------


@pytest.mark.parametrize("binder", BINDERS)
def test_native_pair0_and_nng_pair0(binder: str) -> None:
    async def main() -> None:
        async with gateway.Socket("pair0", reconnect_ivl=0.05) as pair:
            peer = nng(pynng.Pair0)
            url = link(pair, peer, binder)
            await pair.wait_peers(1)
            await nsend(peer, b"hi")
            async with asyncio.timeout(5):
                assert await pair.recv() == b"hi"
            await pair.send(b"back")
            assert await nrecv(peer) == b"back"
            peer.close()  # reconnect of the other side
            await until(lambda: pair.peers == 0)
            peer = nng(pynng.Pair0)
            if binder == "native":
                peer.dial(url, block=False)
            else:
                peer.listen(url)
            await pair.wait_peers(1)
            await pair.send(b"again")
            assert await nrecv(peer) == b"again"
            peer.close()

    run(main())


def test_native_pair0_refuses_a_second_nng_pair0() -> None:
    async def main() -> None:
        async with gateway.Socket("PAIR") as pair:
            first, second = nng(pynng.Pair0), nng(pynng.Pair0)
            url = link(pair, first, "native")
            await pair.wait_peers(1)
            before = pair_busy()
            second.dial(url, block=False)
            await until(lambda: pair_busy() > before)
            await pair.send(b"first")
            assert await nrecv(first) == b"first"
            await nothing_at(second)
            first.close()
            second.close()

    run(main())


@pytest.mark.parametrize("binder", BINDERS)
def test_native_pair1_and_nng_pair1_hop_count(binder: str) -> None:
    """A cooked pair1 sends hop count 1 (nng increments as it sends): the native raw pair1
    sees ``00 00 00 01``, and nng's raw pair1 sees the same from a native cooked one."""

    async def main() -> None:
        async with linked("PAIR1", pynng.Pair1, binder, native_opts={"raw": True}) as (raw, cooked):
            await nsend(cooked, b"hi")
            async with asyncio.timeout(5):
                assert await raw.recv_msg() == Message((b"\x00\x00\x00\x01",), (b"hi",))
            await raw.send_msg(Message((b"\x00\x00\x00\x02",), (b"x",)))
            assert await nrecv(cooked) == b"x"  # arrived with 3, under nng's max ttl 8
        async with linked("pair1", pynng.Pair1, binder, raw=True) as (native, nraw):
            await native.send(b"yo")
            msg = await asyncio.to_thread(nraw.recv_msg)
            assert (header_of(msg), msg.bytes) == (b"\x00\x00\x00\x01", b"yo")

    run(main())


@pytest.mark.parametrize(("native", "cls"), [("PAIR", pynng.Pair1), ("PAIR1", pynng.Pair0),
                                             ("PUB", pynng.Pull0), ("SUB", pynng.Sub0),
                                             ("PUSH", pynng.Push0), ("PULL", pynng.Sub0)])
def test_illegal_sp_pairings_refused(native: str, cls: type[pynng.Socket]) -> None:
    async def main() -> None:
        before = pairing_errors()
        async with linked(native, cls, "native", wait=False) as (sock, _):
            await until(lambda: pairing_errors() > before)
            assert sock.peers == 0

    run(main())


# -- the command-line tools ------------------------------------------------------------------

CLIS = [c for c in ("nanocat", "nngcat") if shutil.which(c)]
NAMES = {"nanocat": {"PUB": "--pub", "SUB": "--sub", "PUSH": "--push", "PULL": "--pull",
                     "PAIR": "--pair"},
         "nngcat": {"PUB": "--pub0", "SUB": "--sub0", "PUSH": "--push0", "PULL": "--pull0",
                    "PAIR": "--pair0", "PAIR1": "--pair1"}}
PEER = {"PUB": "SUB", "SUB": "PUB", "PUSH": "PULL", "PULL": "PUSH", "PAIR": "PAIR",
        "PAIR1": "PAIR1"}
CLI_CELLS = [(cli, kind, binder) for cli in CLIS for kind in NAMES[cli]
             for binder in ("native", "cli")]


async def cli_proc(cli: str, kind: str, where: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        cli, NAMES[cli][kind], *where.split(" ", 1), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)


@pytest.mark.skipif(not CLIS, reason="neither nanocat nor nngcat is installed")
@pytest.mark.parametrize(("cli", "cli_kind", "binder"), CLI_CELLS)
def test_cli_peers(cli: str, cli_kind: str, binder: str) -> None:
    """Every socket type each tool speaks, the tool binding or connecting: the message crosses
    (subscriptions: the tool's sub gets only its topic; the native SUB only its own)."""
    native_kind = PEER[cli_kind]

    async def main() -> None:
        async with gateway.Socket(native_kind, subscribe=b"t." if native_kind == "SUB" else ()) as s:
            if binder == "native":
                url = gateway.url.parse(s.bind("sp+tcp://127.0.0.1:0")).lib_url
                where = f"--connect {url}"
            else:
                url = f"tcp://127.0.0.1:{free_port()}"
                where = f"--bind {url}"
                s.connect("sp+" + url)
            sends = cli_kind in ("PUB", "PUSH", "PAIR", "PAIR1")
            # nngcat takes whole seconds
            interval = "1" if cli == "nngcat" else "0.1"
            args = ["--data", "t.hello", "--interval", interval] if sends else []
            if cli_kind == "SUB":
                args += ["--subscribe", "t."]
            if cli_kind in ("SUB", "PULL", "PAIR", "PAIR1"):
                args += ["--hex"]  # one line per message, flushed by both tools
            proc = await cli_proc(cli, cli_kind, where, *args)
            try:
                await s.wait_peers(1, timeout=10)
                if sends:
                    async with asyncio.timeout(10):
                        assert await s.recv() == b"t.hello"
                if cli_kind in ("SUB", "PULL", "PAIR", "PAIR1"):
                    assert proc.stdout is not None

                    async def publish() -> None:
                        for _ in range(100):
                            if native_kind in ("PUB",):
                                await s.send(b"u.nope")
                            await s.send(b"t.out")
                            await asyncio.sleep(0.1)

                    task = asyncio.ensure_future(publish())
                    async with asyncio.timeout(10):
                        line = await proc.stdout.readline()
                    task.cancel()
                    assert parse_hex_line(line.decode()) == b"t.out"
            finally:
                if proc.returncode is None:
                    proc.kill()
                await proc.wait()

    run(main(), timeout=30)
