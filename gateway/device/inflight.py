"""Which back-end pipe each forwarded request waits on, so that a pipe that dies counts its
requests as lost at once (``backend-lost``), instead of a TTL later or never.

Pure bookkeeping, no I/O and no clock of its own. A request is known by the hops it was sent
with on the back end, which is exactly what its reply comes back with (an SP token, or the
4-byte backtrace frames a ZeroMQ server echoes); the same key may be in flight more than once
(a same-family client that reuses an envelope), so each entry has its own sequence number.
Entries also leave at ``deadline`` (the bridge's token TTL) or when the table is full (its
``max_entries`` requests, or ``max_bytes`` of their keys, counted as the token table counts its
envelopes), so the table is bounded whatever the servers do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from gateway import kernel
from gateway.device.ledger import REPLY, Ledger
from gateway.envelope import Translation
from gateway.envelope.tokens import NO_BYTE_BOUND, envelope_bytes
from gateway.message import Message

Key = tuple[bytes, ...]


class InFlight:
    """Requests in flight: ``seq -> (key, pipe, deadline)`` in send order (which is deadline
    order) and ``key -> seqs`` for the replies. Two dict operations per request and one per
    reply; a pipe's requests are found by a scan when it closes (rare, O(table)) rather than
    kept in a per-pipe index on every request."""

    __slots__ = ("max_entries", "max_bytes", "ttl", "_entries", "_where", "_seq", "held_bytes")

    def __init__(self, max_entries: int = 100_000, ttl: float = 60.0,
                 max_bytes: int = NO_BYTE_BOUND) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl = ttl
        #: seq -> key, pipe, deadline, what the key costs the byte budget
        self._entries: dict[int, tuple[Key, bytes, float, int]] = {}
        self.held_bytes = 0
        #: key -> its one seq, or a deque of them when the key is in flight more than once
        #: (no deque made for a key seen once: an SP token, a client with one request out)
        self._where: dict[Key, int | deque[int]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._entries)

    def sent(self, key: Key, pipe: bytes, now: float) -> list[Key] | None:
        """Record a request sent on ``pipe``; return the keys evicted to stay bounded (None:
        none was)."""
        entries = self._entries
        cost = envelope_bytes(key)
        evicted = (self._evict_oldest(cost) if len(entries) >= self.max_entries
                   or self.held_bytes + cost > self.max_bytes else None)
        self._seq = seq = self._seq + 1
        entries[seq] = (key, pipe, now + self.ttl, cost)
        self.held_bytes += cost
        where = self._where.get(key)
        if where is None:
            self._where[key] = seq
        elif isinstance(where, int):
            self._where[key] = deque((where, seq))
        else:
            where.append(seq)
        return evicted

    def answered(self, key: Key) -> bool:
        """A reply came back with ``key``: the oldest request with that key is done."""
        where = self._where.get(key)
        if where is None:
            return False
        if isinstance(where, int):
            seq = where
            del self._where[key]
        else:
            seq = where.popleft()
            if not where:
                del self._where[key]
        self.held_bytes -= self._entries.pop(seq)[3]
        return True

    def lost(self, pipe: bytes) -> list[Key]:
        """``pipe`` went away: every request waiting on it, once per request."""
        gone = [seq for seq, entry in self._entries.items() if entry[1] == pipe]
        return [self._remove(seq) for seq in gone]

    def expire(self, now: float) -> list[Key]:
        """The requests whose deadline passed (insertion order is deadline order)."""
        out = []
        entries = self._entries
        while entries:
            seq = next(iter(entries))
            if entries[seq][2] > now:
                break
            out.append(self._remove(seq))
        return out

    def items(self) -> list[tuple[Key, bytes, float]]:
        """``[(key, pipe, deadline)]`` in send order (what tests compare)."""
        return [entry[:3] for entry in self._entries.values()]

    def _evict_oldest(self, cost: int) -> list[Key]:
        """The oldest requests, until one costing ``cost`` more fits (or none is left)."""
        entries = self._entries
        out = []
        while entries and (len(entries) >= self.max_entries
                           or self.held_bytes + cost > self.max_bytes):
            out.append(self._remove(next(iter(entries))))
        return out

    def _remove(self, seq: int) -> Key:
        key, _, _, cost = self._entries.pop(seq)
        self.held_bytes -= cost
        where = self._where[key]
        if isinstance(where, int):
            del self._where[key]
        else:
            where.remove(seq)
            if not where:
                del self._where[key]
        return key


class LossTracker:
    """One bridge's requests in flight on the back end, counted lost the moment they are.

    With the native engine on the back end every request is filed under the pipe that took it
    and :meth:`pipe_lost` counts exactly that pipe's requests. A library back end does not say
    which peer took a request (libzmq's DEALER, nng's raw req): there everything is filed under
    one name, and :meth:`peer_left` (the adapter's ``on_peer_lost``) counts all of it when the
    last peer goes away (nobody is left who could answer); while other peers remain, the token
    TTL counts as before.
    """

    WHOLE = b""  # the one pipe name of a library back end

    def __init__(self, translator: Translation, ledger: Ledger, peers: Callable[[], int]) -> None:
        table = translator.table
        self.inflight: InFlight = kernel.twin("InFlight")(table.max_entries, table.ttl,
                                                          table.max_bytes)
        self.translator, self.ledger = translator, ledger
        self._peers = peers
        self._tokens_count = translator.mode == "zmtp->sp"  # the token table counts expiry
        #: only request-reply waits for answers; other patterns track nothing
        self.enabled = translator.pairs_replies

    def sent(self, out: Message, pipe: bytes | None, now: float) -> None:
        if not self.enabled:
            return
        evicted = self.inflight.sent(out[0], self.WHOLE if pipe is None else pipe, now)
        if evicted:
            self.evicted(evicted)

    def evicted(self, keys: list[Key]) -> None:
        """Requests pushed out of the full table (a forwarder that calls ``inflight.sent``
        itself hands its eviction here)."""
        if not self._tokens_count:
            self.ledger.expired(len(keys))

    def answered(self, hops: tuple[bytes, ...]) -> None:
        if self.enabled:
            self.inflight.answered(hops)

    def pipe_lost(self, pipe: bytes) -> None:
        lost = self.inflight.lost(pipe)
        if lost:
            self.translator.forget(lost)
            self.ledger.dropped("backend-lost", REPLY, "the back-end connection closed with "
                                "requests in flight", count=len(lost),
                                pipe=pipe.hex() or "all")

    def peer_left(self) -> None:
        """A library back end lost a peer: if none is left, what it held is lost."""
        if self._peers() == 0:
            self.pipe_lost(self.WHOLE)

    def expire(self, now: float) -> None:
        gone = self.inflight.expire(now)
        if gone and not self._tokens_count:
            self.ledger.expired(len(gone))
