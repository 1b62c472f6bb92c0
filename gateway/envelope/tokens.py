"""The token table: the envelopes of ZeroMQ clients' requests, parked under a 4-byte token
while their SP server answers. Pure: the clock is passed in (``now``, seconds of a monotonic
clock); nothing here reads one, so the table is deterministic under test."""

from __future__ import annotations

import random
from collections import OrderedDict

from gateway.envelope.errors import TableFull, UnknownToken

__all__ = ["TokenTable"]

_COUNTER_MASK = 0x7FFF_FFFF
_TOKEN_BIT = 0x8000_0000


class TokenTable:
    """Pending requests of ZeroMQ clients: token -> (ZeroMQ hops, deadline).

    Tokens are 4 bytes big-endian with the top bit set (so they are a valid SP request id);
    the low 31 bits are a counter that starts at a random value (or ``start``) and skips any
    token still in the table. ``ttl`` is constant, so insertion order is deadline order as long
    as ``now`` never goes back: :meth:`expire` pops from the front of an ``OrderedDict`` while
    the front is expired -- O(1) per removed entry and O(1) when nothing is due.

    The table never reads a clock and never expires entries behind the caller's back except in
    :meth:`mint` when it is full; every removal by expiry is counted in ``expired_total``
    (and returned by :meth:`expire`) so the device can log and count it.
    """

    __slots__ = ("max_entries", "ttl", "_entries", "_counter", "expired_total")

    def __init__(
        self, max_entries: int = 100_000, ttl: float = 60.0, *, start: int | None = None
    ) -> None:
        if not 1 <= max_entries <= _COUNTER_MASK:
            raise ValueError(f"max_entries must be in 1..{_COUNTER_MASK}, not {max_entries}")
        if not ttl > 0:
            raise ValueError(f"ttl must be > 0, not {ttl}")
        self.max_entries = max_entries
        self.ttl = float(ttl)
        self._entries: OrderedDict[bytes, tuple[tuple[bytes, ...], float]] = OrderedDict()
        self._counter = (random.getrandbits(31) if start is None else start) & _COUNTER_MASK
        self.expired_total = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, token: object) -> bool:
        return token in self._entries

    def mint(self, hops: tuple[bytes, ...], now: float) -> bytes:
        """Park ``hops`` until ``now + ttl``; return the new 4-byte token (top bit set)."""
        entries = self._entries
        if len(entries) >= self.max_entries:
            self.expire(now)
            if len(entries) >= self.max_entries:
                raise TableFull(f"{len(entries)} pending requests")
        c = self._counter
        token = (c | _TOKEN_BIT).to_bytes(4, "big")
        while token in entries:  # terminates: fewer than 2**31 entries
            c = (c + 1) & _COUNTER_MASK
            token = (c | _TOKEN_BIT).to_bytes(4, "big")
        self._counter = (c + 1) & _COUNTER_MASK
        entries[token] = (hops, now + self.ttl)
        return token

    def pop(self, token: bytes, now: float) -> tuple[bytes, ...]:
        """Remove and return the hops parked under ``token``; :class:`UnknownToken` if none."""
        try:
            hops, deadline = self._entries.pop(token)
        except KeyError:
            raise UnknownToken("unknown-token", f"token {token!r}") from None
        if deadline <= now:
            self.expired_total += 1  # removed by expiry, like the ones expire() sweeps
            raise UnknownToken("expired-token", f"token {token!r}")
        return hops

    def discard(self, token: bytes) -> None:
        """Forget ``token`` (its request was counted lost some other way)."""
        self._entries.pop(token, None)

    def expire(self, now: float) -> int:
        """Drop every entry whose deadline is ``<= now``; return how many were dropped."""
        entries = self._entries
        n = 0
        while entries:
            token = next(iter(entries))
            if entries[token][1] > now:
                break
            entries.popitem(last=False)
            n += 1
        self.expired_total += n
        return n

    def entries(self) -> list[tuple[bytes, tuple[bytes, ...], float]]:
        """``[(token, hops, deadline)]`` in insertion order (what tests compare)."""
        return [(token, hops, deadline) for token, (hops, deadline) in self._entries.items()]

    def __repr__(self) -> str:
        return f"TokenTable({len(self)}/{self.max_entries}, ttl={self.ttl})"
