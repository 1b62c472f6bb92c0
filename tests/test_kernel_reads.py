"""Reads into a pipe's own buffer (issue 36: ``asyncio.BufferedProtocol``), against the reference.

A loop's transport (plain TCP and IPC) gives a pipe its bytes through ``get_buffer`` and
``buffer_updated``; the compiled kernel then takes the whole messages where they landed, and
a large message split across reads waits there while its rest lands behind it. The same byte
streams as ``tests/test_kernel.py``'s, split at random or at every offset around a large
body, go through a bridge whose pipes read that way, on the compiled twin with the kernel and
on the pure-Python twin (the reference, as with ``GATEWAY_NO_EXTENSIONS=1``, in this process);
every byte each pipe writes, the tables and the ledger must be what the reference's
``data_received`` path gives.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway import kernel
from gateway.engine import core
from gateway.engine.read_buffer import AHEAD, CHUNK, MIN_SIZE, ReadBuffer, thread_scratch
from gateway.testing.bridge_peers import deliver
from tests.test_kernel import (
    CUTS,
    LARGE,
    ROUTES,
    Rig,
    _hello,
    _large_run,
    _plain_peers_again,  # noqa: F401 (autouse: a CURVE test's sealer ends with it)
    _run,
    _server_replies,
    _zmtp_frames,
    needs_kernel,
)


@pytest.fixture
def pure() -> Iterator[None]:
    """The pure-Python twins for everything made meanwhile (pipes, buffers, tables)."""
    saved = kernel.compiled
    kernel.compiled = None
    try:
        yield
    finally:
        kernel.compiled = saved


def _pure_run(*args: Any, **kwargs: Any) -> Any:
    saved = kernel.compiled
    kernel.compiled = None
    try:
        return asyncio.run(_run(*args, **kwargs))
    finally:
        kernel.compiled = saved


@needs_kernel
@pytest.mark.parametrize(("front", "back"), ROUTES, ids=[f"{f}-{b}" for f, b in ROUTES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_buffered_reads_write_and_record_what_data_received_does(front: str, back: str,
                                                                 seed: int) -> None:
    """Random splits, every rare case of test_kernel's streams: the compiled twin with the
    kernel and the pure twin, both reading into their own buffers, as the reference."""
    reference = asyncio.run(_run(front, back, False, seed, 40))
    assert asyncio.run(_run(front, back, True, seed, 40, buffered=True)) == reference
    assert _pure_run(front, back, False, seed, 40, buffered=True) == reference


@needs_kernel
@pytest.mark.parametrize("pattern", ["pipeline", "pubsub"])
@pytest.mark.parametrize("curve", [False, True], ids=["plain", "curve"])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_buffered_reads_of_other_patterns_and_curve(pattern: str, curve: bool,
                                                    seed: int) -> None:
    reference = asyncio.run(_run("zmtp", "zmtp", False, seed, 30, pattern, curve))
    assert asyncio.run(_run("zmtp", "zmtp", True, seed, 30, pattern, curve,
                            buffered=True)) == reference


@needs_kernel
@pytest.mark.parametrize(("front", "back"), ROUTES, ids=[f"{f}-{b}" for f, b in ROUTES])
def test_a_large_message_split_at_every_offset_lands_in_place(front: str, back: str) -> None:
    """test_kernel's cuts around a large body (a view of the read buffer once whole): the
    kernel forwards all six messages from the pipes' own buffers and writes what the
    reference does."""
    for cut in CUTS:
        compiled, by_kernel = asyncio.run(_large_run(front, back, True, cut, 64, True))
        reference, _ = asyncio.run(_large_run(front, back, False, cut, 64))
        assert compiled == reference, cut
        assert by_kernel == 6, cut
        assert bytes([66]) * LARGE in compiled["clients"][0], cut


async def _reads_of_one_large(front: str, compiled: bool, body: int,
                              reads: int) -> tuple[list[int], Any, dict[str, Any]]:
    """One request of ``body`` bytes read in ``reads`` equal pieces: the read buffer's
    ``data`` after each read (its id), the client's read buffer, the rig's state."""
    core._RUNNING_PIPE_IDS[0] = 100
    rig = Rig(front, "zmtp", compiled, max_size=4 * body, hwm=64)
    await rig.open(clients=1, servers=1)
    try:
        c = rig.clients[0]
        if front == "zmtp":
            data = _zmtp_frames([b"", bytes(body)])
        else:
            data = (body + 4).to_bytes(8, "big") + b"\x80\x00\x00\x01" + bytes(body)
        step = -(-len(data) // reads)
        seen = []
        for i in range(0, len(data), step):
            deliver(c.pipe, data[i:i + step], True)
            seen.append(id(c.pipe.rbuf.data))
        await asyncio.sleep(0)
        return seen, c.pipe.rbuf, rig.state()
    finally:
        await rig.close()


@needs_kernel
@pytest.mark.parametrize("front", ["zmtp", "sp"])
def test_a_large_message_moves_at_most_once(front: str) -> None:
    """A 600 KiB body in six reads: its first read tells its length, the buffer is made for
    it then (one copy of that first read, out of the scratch), and the other five land behind
    it in place; taken whole, with no view of it lent, the pipe keeps no buffer."""
    seen, rbuf, state = asyncio.run(_reads_of_one_large(front, True, 600 * 1024, 6))
    assert len(set(seen[:-1])) == 1, seen
    assert state["forwarded"] == (1, 0) and len(rbuf) == 0
    assert len(rbuf.data) == 0 and not rbuf.lent


@needs_kernel
def test_a_declared_huge_frame_holds_no_more_than_ahead() -> None:
    """A peer's header that says 2**40 bytes (within the size limit) and a few of them: the
    buffer holds what came and at most AHEAD more, not the declared size."""

    async def go() -> int:
        rig = Rig("zmtp", "zmtp", True, max_size=1 << 50, hwm=64)
        await rig.open(clients=1, servers=1)
        try:
            c = rig.clients[0]
            deliver(c.pipe, _hello("zmtp", 0), True)
            await asyncio.sleep(0)
            deliver(c.pipe, b"\x01\x00\x02" + (1 << 40).to_bytes(8, "big") + bytes(100), True)
            room = c.pipe.get_buffer(-1)
            size = len(c.pipe.rbuf.data)
            assert 0 < len(room) <= AHEAD and not c.pipe.close_reason
            del room
            return size
        finally:
            await rig.close()

    assert asyncio.run(go()) <= 111 + AHEAD + MIN_SIZE


def test_the_pure_twin_reads_into_its_own_buffer(pure: None) -> None:
    """Without the kernel the buffered read is one ``bytes`` to ``data_received``: the same
    messages, each read in the thread's scratch from its start."""

    async def go() -> tuple[dict[str, Any], Any]:
        rig = Rig("zmtp", "sp", False, hwm=64)
        await rig.open(clients=1, servers=1)
        try:
            c = rig.clients[0]
            first = c.pipe.get_buffer(-1)
            assert type(first) is bytearray and len(first) == CHUNK  # the thread's scratch
            assert first is c.pipe.rbuf.shared[0] is thread_scratch()[0]
            for i in range(3):
                deliver(c.pipe, _hello("zmtp", i), True)
                assert len(c.pipe.rbuf.data) == 0  # nothing kept between reads
                assert c.pipe.get_buffer(-1) is first  # the same scratch again
            del first
            await asyncio.sleep(0)
            return rig.state(), c.pipe
        finally:
            await rig.close()

    state, pipe = asyncio.run(go())
    assert type(pipe).__module__ == "gateway.engine.pipe" and state["forwarded"] == (3, 0)


def test_random_reads_keep_the_bound() -> None:
    """Whatever the reads and the declared lengths, a buffer is made no larger than CHUNK, or
    what is held plus the larger of AHEAD and what is held, plus a MIN_SIZE read."""
    r = random.Random(5)
    rb = ReadBuffer()
    grown = 0
    for _ in range(300):
        before, held = rb.data, bytes(rb.data[rb.start:rb.end])
        room = rb.room()
        if rb.data is not before:
            grown += 1
            assert len(rb.data) <= max(CHUNK, len(held) + max(AHEAD, len(held)) + MIN_SIZE)
        assert bytes(rb.data[rb.start:rb.end]) == held  # (moved, or where it was)
        n = r.randint(1, min(len(room), 70_000))  # (a socket's read)
        room[:n] = r.randbytes(n)
        rb.filled(n)
        del room
        if r.random() < 0.3:
            rb.take()
        else:  # (the last: a rest just past the buffer's end)
            rb.wanted = len(rb) + r.choice((1, 10, 1 << 20, 1 << 40, len(rb.data) - rb.end + 1))
    assert grown > 10


def _large_request(front: str, i: int, body: bytes) -> bytes:
    """A request with ``body`` (the kernel writes it as a view of the read)."""
    if front == "zmtp":
        return _zmtp_frames([b"", body])
    rid = (0x80000000 | i).to_bytes(4, "big")
    return len(rid + body).to_bytes(8, "big") + rid + body


async def _interleave(r: random.Random, peers: list[Any], streams: list[bytes],
                      buffered: bool, seen: dict[str, int]) -> None:
    """Each of ``peers`` sends its stream in reads of random sizes, interleaved; nobody
    drains, so every view written stays held. ``seen`` counts the reads made while views of
    earlier reads were held (``pending``)."""
    rest = [(p, s, 0) for p, s in zip(peers, streams, strict=True)]
    for _ in range(sum(len(s) for s in streams)):  # (bounded: each read takes a byte at least)
        if not rest:
            break
        k = r.randrange(len(rest))
        p, s, pos = rest[k]
        n = r.choice((7, 500, 5000, 30_000, 70_000))
        if any(q.wire.held for q in peers) or seen["held_elsewhere"]:
            seen["pending"] += 1
        if not p.pipe.close_reason:
            deliver(p.pipe, s[pos:pos + n], buffered)
        rest[k] = (p, s, pos + n)
        rest = [x for x in rest if x[2] < len(x[1])]
        await asyncio.sleep(0)


async def _shared_scratch_run(front: str, back: str, compiled: bool, seed: int,
                              buffered: bool) -> tuple[dict[str, Any], dict[str, int]]:
    """Three clients send requests with bodies of 9 to 40 KiB, each its own letter, in reads
    interleaved at random (the pipes of the one thread share its scratch); then the two
    servers echo them the same way. Nobody drains: every view the kernel wrote stays held,
    and ``overwritten`` in the state counts those a later read changed."""
    core._RUNNING_PIPE_IDS[0] = 100
    rig = Rig(front, back, compiled, max_size=1 << 20, hwm=4096)
    await rig.open(clients=3, servers=2)
    r = random.Random(seed)
    seen = {"pending": 0, "held_elsewhere": 0}
    try:
        pipes = [p.pipe for p in rig.clients + rig.servers]
        seen["one_slot"] = int(all(p.rbuf.shared is pipes[0].rbuf.shared for p in pipes))
        streams = [b"".join(_large_request(front, 10 * c + i,
                                           bytes([65 + (7 * c + i) % 26]) * r.randint(9000, 40_000))
                            for i in range(8))
                   for c in range(len(rig.clients))]
        await _interleave(r, rig.clients, streams, buffered, seen)
        seen["held_elsewhere"] = sum(len(s.wire.held) for s in rig.servers)
        replies = [_server_replies(r, s, back, mangle=False) for s in rig.servers]
        await _interleave(r, rig.servers, replies, buffered, seen)
        for _ in range(3):
            await asyncio.sleep(0)
        seen["views"] = sum(len(p.wire.held) for p in rig.clients + rig.servers)
        return rig.state(), seen
    finally:
        await rig.close()


@needs_kernel
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("front", "back"), ROUTES, ids=[f"{f}-{b}" for f, b in ROUTES])
def test_pipes_sharing_a_scratch_never_overwrite_a_view_written(front: str, back: str,
                                                                seed: int) -> None:
    """The thread's pipes read into one scratch while they hold nothing; a read whose body the
    kernel wrote as a view becomes its pipe's buffer, so the other pipes' reads, interleaved,
    land elsewhere: no view held by a write is overwritten (``overwritten``, in the state),
    and both twins write and record what the reference does."""
    reference, _ = asyncio.run(_shared_scratch_run(front, back, False, seed, False))
    compiled, seen = asyncio.run(_shared_scratch_run(front, back, True, seed, True))
    assert seen["one_slot"] and seen["views"] >= 24 and seen["pending"] > 10, seen
    assert not any(compiled["overwritten"]) and compiled == reference
    assert compiled["forwarded"] == (24, 24) and not any(compiled["closed"])
    saved = kernel.compiled
    kernel.compiled = None
    try:
        pure, _ = asyncio.run(_shared_scratch_run(front, back, False, seed, True))
    finally:
        kernel.compiled = saved
    assert pure == reference


@needs_kernel
@pytest.mark.parametrize(("front", "back"), ROUTES, ids=[f"{f}-{b}" for f, b in ROUTES])
def test_pipes_idle_after_large_bodies_keep_no_buffer(front: str, back: str) -> None:
    """Every pipe's last read lent views of its body (20 KiB requests and echoes): the views
    keep their scratch while the writes hold them, but no pipe does, then or after the peers
    read everything and another pipe reads: an idle pipe keeps no buffer."""

    async def go() -> tuple[list[int], list[int], int]:
        core._RUNNING_PIPE_IDS[0] = 100
        rig = Rig(front, back, True, max_size=1 << 20, hwm=64)
        await rig.open(clients=4, servers=2)
        try:
            for i, c in enumerate(rig.clients[:3]):
                deliver(c.pipe, _large_request(front, i, bytes([65 + i]) * 20_000), True)
                await asyncio.sleep(0)
            for s in rig.servers:
                deliver(s.pipe, _server_replies(random.Random(0), s, back, mangle=False), True)
                await asyncio.sleep(0)
            for _ in range(3):
                await asyncio.sleep(0)
            peers = rig.clients + rig.servers
            held = [len(p.pipe.rbuf.data) for p in peers]
            views = sum(len(p.wire.held) for p in peers)  # (the writes' views, alive)
            for p in peers:
                p.wire.drain()  # (every view written was sent: none is left)
            deliver(rig.clients[3].pipe, _hello(front, 9), True)  # a pipe that lent nothing
            await asyncio.sleep(0)
            assert rig.state()["forwarded"] == (4, 3)
            return held, [len(p.pipe.rbuf.data) for p in peers], views
        finally:
            await rig.close()

    out: list[Any] = []  # (a thread of its own: its own scratch slot, whatever ran before)
    t = threading.Thread(target=lambda: out.append(asyncio.run(go())))
    t.start()
    t.join(60)
    assert out, "the run raised (its traceback above) or did not end"
    held, after, views = out[0]
    assert views >= 6 and held == [0] * 6 and after == [0] * 6, (views, held, after)
