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

Key = tuple[bytes, ...]


class InFlight:
    __slots__ = ("max_entries", "ttl", "_entries", "_where", "_by_pipe", "_seq")

    def __init__(self, max_entries: int = 100_000, ttl: float = 60.0) -> None:
        self.max_entries = max_entries
        self.ttl = ttl
        self._entries: dict[int, tuple[Key, bytes, float]] = {}  # seq -> key, pipe, deadline
        self._where: dict[Key, deque[int]] = {}
        self._by_pipe: dict[bytes, set[int]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._entries)

    def sent(self, key: Key, pipe: bytes, now: float) -> list[Key]:
        """Record a request sent on ``pipe``; return the keys evicted to stay bounded."""
        evicted = self._evict_oldest() if len(self._entries) >= self.max_entries else []
        self._seq = seq = self._seq + 1
        self._entries[seq] = (key, pipe, now + self.ttl)
        where = self._where.get(key)
        if where is None:
            self._where[key] = deque((seq,))
        else:
            where.append(seq)
        on_pipe = self._by_pipe.get(pipe)
        if on_pipe is None:
            self._by_pipe[pipe] = {seq}
        else:
            on_pipe.add(seq)
        return evicted

    def answered(self, key: Key) -> bool:
        """A reply came back with ``key``: the oldest request with that key is done."""
        where = self._where.get(key)
        if not where:
            return False
        seq = where.popleft()
        if not where:
            del self._where[key]
        _, pipe, _ = self._entries.pop(seq)
        self._by_pipe[pipe].discard(seq)
        return True

    def lost(self, pipe: bytes) -> list[Key]:
        """``pipe`` went away: every request waiting on it, once per request."""
        return [self._remove(seq) for seq in sorted(self._by_pipe.pop(pipe, ()))]

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

    def _evict_oldest(self) -> list[Key]:
        return [self._remove(next(iter(self._entries)))]

    def _remove(self, seq: int) -> Key:
        key, pipe, _ = self._entries.pop(seq)
        where = self._where[key]
        where.remove(seq)
        if not where:
            del self._where[key]
        on_pipe = self._by_pipe.get(pipe)
        if on_pipe is not None:
            on_pipe.discard(seq)
            if not on_pipe:
                del self._by_pipe[pipe]
        return key
