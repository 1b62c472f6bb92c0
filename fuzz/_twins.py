"""What the three kernel harnesses (``kernel_zmtp``, ``kernel_sp``, ``kernel_curve``) share: the
input's layout, the peers' steps it describes, and the differential oracle.

Input: ``setup flags size hwm`` then steps, each ``op who`` and its fields, until the input ends
(at most :data:`MAX_STEPS`). ``setup`` picks the pattern (request-reply, pipeline, pub/sub) and
the route among the harness's (see each harness); ``flags``: SP over IPC (bit 0), a second
client (bit 1), a second server (bit 2), reads into the pipes' read buffers (bit 3:
``get_buffer``/``buffer_updated``; the bridge's pipes share their thread's scratch, and
views held by writes must stay as written); ``size`` the size limit, ``hwm`` the mark. ``who``
picks a peer (the clients, then the servers). The ops:

===========  ======================================================================================
``RAW``      ``short``: these bytes, one read (under CURVE: bytes outside any box)
``MSG``      ``n`` then ``n`` frames (each ``short rep short``: the first bytes ``rep + 1``
             times, then the others): one message, encoded by the peer's codec (SP: the frames
             joined into one payload; CURVE: sealed in the peer's boxes)
``MANY``     ``count`` then a ``MSG``: the message ``2 * count + 1`` times in one read (past
             the fair share of 256 a read, past the mark)
``SPLIT``    a ``MSG``, then ``ncuts`` and 2-byte cuts: the message in several reads
``ECHO``     ``mode``: a server answers each request it was sent, its envelope echoed (``mode``
             0: honestly; else now and then mangled: another body, two body frames, a token
             nobody minted, a PING first, no envelope)
``DRAIN``    the peer reads what it was sent (its pipe may write again)
``TICK``     ``n``: the loop runs ``n % 4 + 1`` turns
``LEAVE``    the peer's connection is lost
``PING``     ``ttl``, ``short`` context: a ZMTP PING (SP: nothing)
``FLIP``     ``at`` (2 bytes), ``xor`` then a ``MSG``: the message with one byte changed
``SUB``      ``short``: a ZMTP subscriber's SUBSCRIBE command (others: nothing)
===========  ======================================================================================

The oracle: the same steps go to a bridge on the compiled kernel and to one on the reference
(:mod:`fuzz._bridge`); everything each bridge sent and recorded must be the same
(:func:`differences`), the compiled one must have forwarded with the kernel, and no exception
may leave the engine in either. Under ``python -m fuzz run`` the compiled kernel is the
sanitizer build (``fuzz/_asan.py``): an out-of-bounds access or undefined behaviour in it aborts
the run with the sanitizer's report, whatever the oracle says.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from gateway import kernel
from gateway.errors import GatewayError
from gateway.testing.bridge_peers import server_answer
from gateway.testing.codec_checks import chunked

from . import _bridge
from ._bridge import Bridge, Peer, Setup
from ._data import Data, Writer, check

PATTERNS = ("reqrep", "pipeline", "pubsub")
SIZES = (700, 64, 255, 65536)
#: under CURVE: the handshake's commands must fit (an INITIATE is past 255 bytes)
CURVE_SIZES = (700, 300, 1000, 65536)
HWMS = (1000, 2, 1, 16)
MAX_STEPS = 48
RAW, MSG, MANY, SPLIT, ECHO, DRAIN, TICK, LEAVE, PING, FLIP, SUB = range(11)
OPS = 11

Step = tuple[Any, ...]


def setup_of(data: Data, routes: Sequence[tuple[str, str]], curve: bool) -> Setup:
    pick = data.byte()
    flags = data.byte()
    front, back = routes[(pick // 3) % len(routes)]
    return Setup(PATTERNS[pick % 3], front, back, curve=curve, ipc=bool(flags & 1),
                 clients=1 + (flags >> 1 & 1), servers=1 + (flags >> 2 & 1),
                 max_size=data.choice(CURVE_SIZES if curve else SIZES), hwm=data.choice(HWMS),
                 buffered=bool(flags & 8))


def _frames(data: Data) -> tuple[bytes, ...]:
    """``n`` (1 to 4) then each frame: ``short`` bytes, ``rep`` (they repeat ``rep + 1``
    times), ``short`` bytes after them (frames past 255 bytes, up to 64 KiB)."""
    return tuple(data.short() * (data.byte() + 1) + data.short()
                 for _ in range(1 + data.byte() % 4))


def steps_of(data: Data) -> list[Step]:
    """The steps of the rest of the input (see the module's doc)."""
    steps: list[Step] = []
    while len(data) and len(steps) < MAX_STEPS:
        op, who = data.byte() % OPS, data.byte()
        if op == RAW:
            steps.append((op, who, data.short()))
        elif op == MSG:
            steps.append((op, who, _frames(data)))
        elif op == MANY:
            count = 2 * data.byte() + 1
            steps.append((op, who, _frames(data), count))
        elif op == SPLIT:
            frames = _frames(data)
            steps.append((op, who, frames, [data.uint(2) for _ in range(data.byte() % 4)]))
        elif op in (ECHO, TICK):
            steps.append((op, who, data.byte()))
        elif op == PING:
            steps.append((op, who, data.uint(2), data.short()[:16]))
        elif op == FLIP:
            at, xor = data.uint(2), data.byte() or 1
            steps.append((op, who, _frames(data), at, xor))
        elif op == SUB:
            steps.append((op, who, data.short()))
        else:
            steps.append((op, who))
    return steps


def encode(peer: Peer, frames: tuple[bytes, ...]) -> bytes:
    """One message as ``peer`` sends it (SP: one payload)."""
    if peer.family == "sp":
        return peer.codec.send_message((b"".join(frames),))  # type: ignore[no-any-return]
    return peer.codec.send_message(frames)  # type: ignore[no-any-return]


def _echo(peer: Peer, mode: int) -> bytes:
    """The answers of a request-reply server to what it was sent since the last read (``mode``
    0: honest; else a roll from it for each: now and then a mangled answer)."""
    roll = random.Random(mode)
    out = bytearray()
    for event in _bridge.read_events(peer):
        if type(event) is tuple:
            ping, reply = server_answer(peer.family, event, roll.random() if mode else 0.0)
            if ping:
                out += peer.codec.ping(0, b"ctx")
            out += peer.codec.send_message(reply)
    return bytes(out)


def _bytes_of(bridge: Bridge, peer: Peer, step: Step) -> list[bytes]:
    """The reads one step gives ``peer``'s pipe (none: the step is not for this peer)."""
    op = step[0]
    if op == RAW:
        return [step[2]]
    if op in (MSG, MANY, SPLIT, FLIP):
        one = encode(peer, step[2])
        if op == MSG:
            return [one]
        if op == MANY:
            return [one * step[3] if peer.family == "sp" or not peer.codec.sealed
                    else b"".join(encode(peer, step[2]) for _ in range(step[3]))]
        if op == SPLIT:
            return chunked(one, step[3])
        changed = bytearray(one)
        if changed:
            changed[step[3] % len(changed)] ^= step[4]
        return [bytes(changed)]
    if op == PING and peer.family == "zmtp":
        return [peer.codec.ping(step[2], step[3])]
    if op == SUB and peer.family == "zmtp" and peer.codec.role.socket_type == "SUB":
        return [peer.codec.subscription_frame(True, step[2])]
    if op == ECHO and bridge.setup.pattern == "reqrep" and peer in bridge.servers:
        return [_echo(peer, step[2])]
    return []


def play(steps: list[Step]) -> Callable[[Bridge], Any]:
    """The coroutine function that gives ``steps`` to a bridge's peers."""
    async def go(bridge: Bridge) -> None:
        peers = bridge.peers
        for step in steps:
            op, peer = step[0], peers[step[1] % len(peers)]
            if peer.gone:
                continue
            if op == DRAIN:
                peer.wire.drain()
            elif op == TICK:
                await _bridge.settle(step[2] % 4 + 1)
            elif op == LEAVE:
                peer.gone = peer.wire.closed = True
                peer.pipe.connection_lost(None)
            else:
                try:
                    reads = _bytes_of(bridge, peer, step)
                except GatewayError:  # the peer's codec cannot send that (a role, its state)
                    continue
                for data in reads:
                    bridge.feed(peer, data)
            await _bridge.settle(1)
    return go


def differences(compiled: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """What differs between the two runs' states, by key: (compiled's, reference's)."""
    return {k: (compiled.get(k), reference.get(k))
            for k in sorted(set(compiled) | set(reference))
            if compiled.get(k) != reference.get(k)}


def shown(compiled: Any, reference: Any) -> str:
    """Where two values first differ (bytes: the offset and what follows in each; lists: the
    index and the items), else both, shortened."""
    if isinstance(compiled, list | tuple) and isinstance(reference, list | tuple):
        for i, (c, r) in enumerate(zip(compiled, reference, strict=False)):
            if c != r:
                return f"[{i}] {shown(c, r)}"
        return f"{len(compiled)} items / {len(reference)} items"
    if isinstance(compiled, bytes) and isinstance(reference, bytes):
        pairs = zip(compiled, reference, strict=False)
        i = next((i for i, (a, b) in enumerate(pairs) if a != b),
                 min(len(compiled), len(reference)))
        return (f"{len(compiled)} / {len(reference)} bytes, first difference at {i}: compiled "
                f"{compiled[max(i - 16, 0):i + 48]!r} / reference "
                f"{reference[max(i - 16, 0):i + 48]!r}")
    return f"compiled {compiled!r:.300} / reference {reference!r:.300}"


def one_input(buf: bytes, routes: Sequence[tuple[str, str]], curve: bool = False,
              strict: bool = False) -> None:
    """The differential oracle for one input (see the module's doc). Findings (ids for
    ``fuzz._data.KNOWN``): ``engine-raised``, ``kernel-not-used``, ``differs-<what>``."""
    data = Data(buf)
    setup = setup_of(data, routes, curve)
    steps = steps_of(data)
    reference, _ = _bridge.run(setup, False, play(steps))
    check(not reference["errors"], "engine-raised",
          f"the reference engine raised ({setup}): {reference['errors'][:3]}", strict)
    if kernel.compiled is None:  # a pure build (GATEWAY_NO_EXTENSIONS): nothing to compare
        return
    compiled, engaged = _bridge.run(setup, True, play(steps))
    check(engaged, "kernel-not-used", f"the compiled run did not forward with the kernel "
          f"({setup})", strict)
    diff = differences(compiled, reference)
    if diff:
        first = next(iter(diff))
        check(False, f"differs-{first}",
              f"the compiled kernel and the reference differ ({setup}; {len(steps)} steps): "
              + "; ".join(f"{k}: {shown(c, r)}" for k, (c, r) in diff.items()), strict)


def encode_input(*, pattern: int = 0, route: int = 0, ipc: bool = False, clients: int = 1,
                 servers: int = 1, size: int = 0, hwm: int = 0, steps: bytes = b"") -> bytes:
    """An input in this layout (the seeds are written with it)."""
    flags = int(ipc) | (clients - 1) << 1 | (servers - 1) << 2
    return (Writer().byte(route * 3 + pattern).byte(flags).byte(size).byte(hwm).raw(steps)
            .bytes())


class StepWriter(Writer):
    """Steps in this layout, for the seeds (fields as :func:`steps_of` reads them)."""

    def frames(self, *frames: bytes) -> StepWriter:
        self.byte(len(frames) - 1)
        for f in frames:
            head = f[:255]
            rep = min(len(f) // max(len(head), 1), 256)
            tail = f[len(head) * rep:]
            assert len(tail) <= 255, "a frame past 64 KiB"
            self.short(head).byte(rep - 1 if head else 0).short(tail if head else b"")
        return self

    def msg(self, who: int, *frames: bytes) -> StepWriter:
        self.byte(MSG).byte(who)
        return self.frames(*frames)

    def many(self, who: int, count: int, *frames: bytes) -> StepWriter:
        """The message ``2 * count + 1`` times in one read."""
        self.byte(MANY).byte(who).byte(count)
        return self.frames(*frames)

    def split(self, who: int, cuts: Sequence[int], *frames: bytes) -> StepWriter:
        self.byte(SPLIT).byte(who)
        self.frames(*frames).byte(len(cuts))
        for cut in cuts:
            self.uint(cut, 2)
        return self

    def flip(self, who: int, at: int, xor: int, *frames: bytes) -> StepWriter:
        self.byte(FLIP).byte(who).uint(at, 2).byte(xor)
        return self.frames(*frames)

    def raw_read(self, who: int, data: bytes) -> StepWriter:
        """``data`` in reads of up to 255 bytes."""
        for at in range(0, max(len(data), 1), 255):
            self.byte(RAW).byte(who).short(data[at:at + 255])
        return self

    def echo(self, who: int, mode: int = 0) -> StepWriter:
        self.byte(ECHO).byte(who).byte(mode)
        return self

    def ping(self, who: int, ttl: int = 0, context: bytes = b"") -> StepWriter:
        self.byte(PING).byte(who).uint(ttl, 2).short(context)
        return self

    def sub(self, who: int, topic: bytes) -> StepWriter:
        self.byte(SUB).byte(who).short(topic)
        return self

    def op(self, op: int, who: int = 0, *fields: int) -> StepWriter:
        """ECHO (mode), DRAIN, TICK (turns), LEAVE."""
        self.byte(op).byte(who)
        for f in fields:
            self.byte(f)
        return self
