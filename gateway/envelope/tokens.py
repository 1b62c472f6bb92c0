"""The token table: the envelopes of ZeroMQ clients' requests, parked under a 4-byte token
while their SP server answers. Pure: the clock is passed in (``now``, seconds of a monotonic
clock); nothing here reads one, so the table is deterministic under test."""

from __future__ import annotations

import random
from collections import OrderedDict

from gateway.envelope.errors import TableFull, UnknownToken

__all__ = ["NO_BYTE_BOUND", "TokenTable", "envelope_bytes"]

_COUNTER_MASK = 0x7FFF_FFFF
_TOKEN_BIT = 0x8000_0000
#: a table's ``max_bytes`` when none is given (a bridge gives its ``pending_bytes``)
NO_BYTE_BOUND = 1 << 62


def envelope_bytes(hops: tuple[bytes, ...]) -> int:
    """What an envelope costs a table's byte budget: its bytes, and one per frame (an empty
    frame is not free). The compiled tables count the same."""
    return len(hops) + sum(map(len, hops))


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

    Full means ``max_entries`` envelopes, or ``max_bytes`` of them (:func:`envelope_bytes`,
    ``held_bytes`` so far): a client whose requests are never answered cannot make it hold
    more than that until their TTL.
    """

    __slots__ = ("max_entries", "max_bytes", "ttl", "_entries", "_counter", "expired_total",
                 "held_bytes")

    def __init__(
        self, max_entries: int = 100_000, ttl: float = 60.0, *, max_bytes: int = NO_BYTE_BOUND,
        start: int | None = None
    ) -> None:
        if not 1 <= max_entries <= _COUNTER_MASK:
            raise ValueError(f"max_entries must be in 1..{_COUNTER_MASK}, not {max_entries}")
        if not ttl > 0:
            raise ValueError(f"ttl must be > 0, not {ttl}")
        if not 1 <= max_bytes <= NO_BYTE_BOUND:
            raise ValueError(f"max_bytes must be in 1..2**62, not {max_bytes}")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl = float(ttl)
        #: token -> (hops, deadline, what they cost the byte budget)
        self._entries: OrderedDict[bytes, tuple[tuple[bytes, ...], float, int]] = OrderedDict()
        self._counter = (random.getrandbits(31) if start is None else start) & _COUNTER_MASK
        self.expired_total = 0
        self.held_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, token: object) -> bool:
        return token in self._entries

    def mint(self, hops: tuple[bytes, ...], now: float) -> bytes:
        """Park ``hops`` until ``now + ttl``; return the new 4-byte token (top bit set)."""
        entries = self._entries
        cost = envelope_bytes(hops)
        if len(entries) >= self.max_entries or self.held_bytes + cost > self.max_bytes:
            self.expire(now)
            if len(entries) >= self.max_entries:
                raise TableFull(f"{len(entries)} pending requests")
            if self.held_bytes + cost > self.max_bytes:
                raise TableFull(f"{self.held_bytes} bytes of envelopes pending, {cost} more "
                                f"would pass pending_bytes ({self.max_bytes})")
        c = self._counter
        token = (c | _TOKEN_BIT).to_bytes(4, "big")
        while token in entries:  # terminates: fewer than 2**31 entries
            c = (c + 1) & _COUNTER_MASK
            token = (c | _TOKEN_BIT).to_bytes(4, "big")
        self._counter = (c + 1) & _COUNTER_MASK
        entries[token] = (hops, now + self.ttl, cost)
        self.held_bytes += cost
        return token

    def pop(self, token: bytes, now: float) -> tuple[bytes, ...]:
        """Remove and return the hops parked under ``token``; :class:`UnknownToken` if none."""
        try:
            hops, deadline, cost = self._entries.pop(token)
        except KeyError:
            raise UnknownToken("unknown-token", f"token {token!r}") from None
        self.held_bytes -= cost
        if deadline <= now:
            self.expired_total += 1  # removed by expiry, like the ones expire() sweeps
            raise UnknownToken("expired-token", f"token {token!r}")
        return hops

    def discard(self, token: bytes) -> None:
        """Forget ``token`` (its request was counted lost some other way)."""
        entry = self._entries.pop(token, None)
        if entry is not None:
            self.held_bytes -= entry[2]

    def expire(self, now: float) -> int:
        """Drop every entry whose deadline is ``<= now``; return how many were dropped."""
        entries = self._entries
        n = 0
        while entries:
            token = next(iter(entries))
            if entries[token][1] > now:
                break
            self.held_bytes -= entries.popitem(last=False)[1][2]
            n += 1
        self.expired_total += n
        return n

    def entries(self) -> list[tuple[bytes, tuple[bytes, ...], float]]:
        """``[(token, hops, deadline)]`` in insertion order (what tests compare)."""
        return [(token, hops, deadline) for token, (hops, deadline, _) in self._entries.items()]

    def __repr__(self) -> str:
        return f"TokenTable({len(self)}/{self.max_entries}, ttl={self.ttl})"
