"""Which back-end pipe each forwarded request waits on, so that a pipe that dies counts its
requests as lost at once (``backend-lost``), instead of a TTL later or never.

Pure bookkeeping, no I/O and no clock of its own. A request is known by the hops it was sent
with on the back end, which is exactly what its reply comes back with (an SP token, or the
4-byte backtrace frames a ZeroMQ server echoes); the same key may be in flight more than once
(a same-family client that reuses an envelope), so each entry has its own sequence number.
Entries also leave at ``deadline`` (the bridge's token TTL) or when the table is full, so the
table is bounded whatever the servers do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from gateway import kernel
from gateway.device.ledger import REPLY, Ledger
from gateway.envelope import Translator
from gateway.message import Message

Key = tuple[bytes, ...]


class InFlight:
    """Requests in flight: ``seq -> (key, pipe, deadline)`` in send order (which is deadline
    order) and ``key -> seqs`` for the replies. Two dict operations per request and one per
    reply; a pipe's requests are found by a scan when it closes (rare, O(table)) rather than
    kept in a per-pipe index on every request."""

    __slots__ = ("max_entries", "ttl", "_entries", "_where", "_seq")

    def __init__(self, max_entries: int = 100_000, ttl: float = 60.0) -> None:
        self.max_entries = max_entries
        self.ttl = ttl
        self._entries: dict[int, tuple[Key, bytes, float]] = {}  # seq -> key, pipe, deadline
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
        evicted = self._evict_oldest() if len(entries) >= self.max_entries else None
        self._seq = seq = self._seq + 1
        entries[seq] = (key, pipe, now + self.ttl)
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
        del self._entries[seq]
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
        return list(self._entries.values())

    def _evict_oldest(self) -> list[Key]:
        return [self._remove(next(iter(self._entries)))]

    def _remove(self, seq: int) -> Key:
        key, _, _ = self._entries.pop(seq)
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

    def __init__(self, translator: Translator, ledger: Ledger, peers: Callable[[], int]) -> None:
        table = translator.table
        compiled = kernel.compiled
        self.inflight: InFlight = (compiled.InFlight if compiled is not None else InFlight)(
            table.max_entries, table.ttl)
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
