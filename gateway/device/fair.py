"""Fair turns for the library poller (:mod:`gateway.device.forward_poll`): what keeps one client
that floods requests (and never reads its replies) from starving the others.

libzmq's ROUTER fair-queues its pipes on receive and the native engine gives each pipe a
``FAIR_SHARE`` per turn; what the poller took used to wait in one first-come queue, and then in
the back end's own buffers (nng's send buffer, both TCP buffers, the server's queue), where the
flooder's thousands of requests stood ahead of everyone else's. Two pieces, pure bookkeeping:

* :class:`Window`: what the back end holds unanswered, per client: the clients active share a
  budget (at least a floor each), so that a flood waits here, in its own queue, and not in the
  back end's first-come buffers ahead of everyone else's requests, while a client alone has
  the whole budget. A reply frees a slot; so does time (``stale``), so a server that never
  answers (or a library that dropped a reply) slows a client down but never stops it. The
  clients together are not limited beyond their floors: many clients keep the back end as
  busy as before;
* :class:`FairQueue`: requests wait per client (routing id) and go to the back end in turn, one
  message per client per turn, as libzmq's ``fq_t`` takes them; bounded in all and per client.
  A client whose window is full sits its turns out (it is parked, at no cost to the others)
  until a reply or time frees a slot.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Window:
    """What the back end holds unanswered, per client: a client's share of ``budget`` requests.

    Work-conserving: the ``budget`` is split among the clients that are active (each with a
    slot taken since the last :meth:`sweep`), at least ``floor`` each; a client alone has all
    of it (a pipelined burst runs at the back end's speed), a flooder among 20 clients that
    wait for their replies has ``budget // 21`` (so that at most that many of its requests
    stand ahead of theirs in the back end's first-come buffers).

    :meth:`sent` takes a slot of the client's, :meth:`answered` frees its oldest (its reply
    came; a library back end does not say which request a reply answers, and the window needs
    only the count). A slot also frees itself ``stale`` seconds after it was taken. Not the
    accounting (the ledger's in-flight count is exact): only who may hand the back end another
    request now."""

    __slots__ = ("_taken", "budget", "floor", "stale")

    def __init__(self, budget: int, stale: float, floor: int = 1) -> None:
        self.budget = max(1, budget)
        self.floor = max(1, min(floor, self.budget))
        self.stale = stale
        #: client -> when its slots were taken; a client whose slots are all free stays (an
        #: empty deque: still active) until the next sweep
        self._taken: dict[bytes, deque[float]] = {}

    def __len__(self) -> int:
        """Slots taken, all clients."""
        return sum(len(q) for q in self._taken.values())

    @property
    def active(self) -> int:
        """Clients sharing the budget: a slot taken since the last sweep."""
        return len(self._taken)

    @property
    def size(self) -> int:
        """A client's share now."""
        share = self.budget // (self.active or 1)
        return share if share > self.floor else self.floor

    def open(self, client: bytes) -> bool:
        """May ``client`` send another request now?"""
        q = self._taken.get(client)
        return q is None or len(q) < self.size

    def sent(self, client: bytes, now: float) -> None:
        q = self._taken.get(client)
        if q is None:
            q = self._taken[client] = deque()
        q.append(now)

    def answered(self, client: bytes) -> None:
        q = self._taken.get(client)
        if q:
            q.popleft()

    def expire(self, client: bytes, now: float) -> None:
        """Free ``client``'s slots taken more than ``stale`` seconds before ``now``."""
        q = self._taken.get(client)
        horizon = now - self.stale
        while q and q[0] <= horizon:
            q.popleft()

    def sweep(self, now: float) -> None:
        """Forget the clients with no slot taken, or whose every slot is stale (a client that
        left with requests unanswered is not kept): they no longer share the budget."""
        horizon = now - self.stale
        for client in [c for c, q in self._taken.items() if not q or q[-1] <= horizon]:
            del self._taken[client]

    def clear(self) -> None:
        """The back end lost every peer: nothing it held will be answered."""
        self._taken.clear()


class FairQueue(Generic[T]):
    """Items waiting per client, served round robin: ``turn``/``head``/``pop`` give the oldest
    item of the client whose turn it is; a client with more waiting goes to the back of the
    line. With a :class:`Window`, a client whose window is full is parked until
    :meth:`answered` or :meth:`tick` frees a slot of its (``ready`` is False when every client
    waiting is parked).

    ``total`` bounds all the items, ``per_client`` each client's. :meth:`put` never refuses
    (the caller holds an item already): ``full`` says when to stop taking more, which is when
    the total is reached or some client is at its bound (the poller then leaves the rest in
    the libraries' own per-peer queues, where TCP pushes back on that peer)."""

    __slots__ = ("_at_bound", "_parked", "_queues", "_size", "_turns", "per_client", "total",
                 "window")

    def __init__(self, total: int, per_client: int, window: Window | None = None) -> None:
        self.total = max(1, total)
        self.per_client = max(1, min(per_client, self.total))
        self.window = window
        self._queues: dict[bytes, deque[T]] = {}
        self._turns: deque[bytes] = deque()  # clients with items and a free slot, in turn
        self._parked: set[bytes] = set()  # clients with items and no free slot
        self._size = 0
        self._at_bound = 0  # clients with per_client items waiting

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    @property
    def clients(self) -> int:
        """Clients with something waiting (parked or not)."""
        return len(self._queues)

    @property
    def ready(self) -> bool:
        """Some client waiting may send now."""
        return bool(self._turns)

    @property
    def full(self) -> bool:
        return self._size >= self.total or self._at_bound > 0

    @property
    def turn(self) -> bytes:
        """The client whose turn it is (``ready`` must be True)."""
        return self._turns[0]

    def put(self, client: bytes, item: T) -> None:
        q = self._queues.get(client)
        if q is None:
            q = self._queues[client] = deque()
            self._line_up(client)
        q.append(item)
        self._size += 1
        if len(q) == self.per_client:
            self._at_bound += 1

    def head(self) -> T:
        """The item whose turn it is (``ready`` must be True)."""
        return self._queues[self._turns[0]][0]

    def pop(self) -> T:
        """Take :meth:`head` (after its send took the client's slot, if it did); the client's
        next item waits for its next turn."""
        client = self._turns.popleft()
        q = self._queues[client]
        if len(q) == self.per_client:
            self._at_bound -= 1
        item = q.popleft()
        self._size -= 1
        if q:
            self._line_up(client)
        else:
            del self._queues[client]
        return item

    def answered(self, client: bytes) -> None:
        """A reply to ``client`` came back: its oldest slot is free."""
        window = self.window
        if window is None:
            return
        window.answered(client)
        if client in self._parked and window.open(client):
            self._parked.discard(client)
            self._turns.append(client)

    def tick(self, now: float) -> None:
        """Free the parked clients' stale slots (call it on every wake-up: it costs one look
        per parked client)."""
        window = self.window
        if window is None or not self._parked:
            return
        for client in list(self._parked):
            window.expire(client, now)
            if window.open(client):
                self._parked.discard(client)
                self._turns.append(client)

    def clear_window(self) -> None:
        """The back end lost every peer: every slot is free, every client takes turns again."""
        if self.window is not None:
            self.window.clear()
        self._turns.extend(self._parked)
        self._parked.clear()

    def _line_up(self, client: bytes) -> None:
        if self.window is None or self.window.open(client):
            self._turns.append(client)
        else:
            self._parked.add(client)


__all__ = ["FairQueue", "Window"]
