"""gateway.device.fair: the poller's turns per client and its window on the back end."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.device.fair import FairQueue, Window


def test_clients_take_turns_one_message_each() -> None:
    q: FairQueue[str] = FairQueue(total=100, per_client=50)
    for i in range(5):
        q.put(b"flood", f"f{i}")
    q.put(b"a", "a0")
    q.put(b"b", "b0")
    q.put(b"a", "a1")
    order = []
    while q:
        assert q.head() == (taken := q.pop())
        order.append(taken)
    # a client's messages keep their order; a late client waits one turn of each other, not
    # behind the whole backlog of the one that came first
    assert order == ["f0", "a0", "b0", "f1", "a1", "f2", "f3", "f4"]
    assert len(q) == 0 and q.clients == 0 and not q.full


def test_full_at_the_total_or_when_one_client_is_at_its_bound() -> None:
    q: FairQueue[int] = FairQueue(total=4, per_client=2)
    q.put(b"x", 1)
    assert not q.full
    q.put(b"x", 2)
    assert q.full  # x at its bound: taking more from the front could only grow x
    q.pop()
    assert not q.full
    q.put(b"y", 3)
    q.put(b"z", 4)
    q.put(b"w", 5)  # put never refuses what the caller already holds
    assert q.full and len(q) == 4
    assert q.clients == 4


def test_bounds_are_at_least_one_and_per_client_within_the_total() -> None:
    q: FairQueue[int] = FairQueue(total=0, per_client=10)
    assert q.total == 1 and q.per_client == 1
    q.put(b"", 1)
    assert q.full
    assert FairQueue(total=8, per_client=100).per_client == 8


@given(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", b""]), st.booleans()), max_size=200))
def test_any_interleaving_keeps_counts_order_and_bounds(ops: list[tuple[bytes, bool]]) -> None:
    q: FairQueue[tuple[bytes, int]] = FairQueue(total=6, per_client=3)
    sent = {c: 0 for c in (b"a", b"b", b"c", b"")}
    got = {c: 0 for c in sent}
    for client, take in ops:
        if take and q:
            c, n = q.pop()
            assert n == got[c]  # per client, first in first out
            got[c] += 1
        elif not q.full:
            q.put(client, (client, sent[client]))
            sent[client] += 1
        waiting = {c: sent[c] - got[c] for c in sent}
        assert len(q) == sum(waiting.values()) <= q.total
        assert max(waiting.values()) <= q.per_client
        assert q.full == (len(q) >= q.total or q.per_client in waiting.values())
        assert q.clients == sum(1 for n in waiting.values() if n)


def test_window_slots_per_client_free_on_replies_and_with_time() -> None:
    w = Window(2, stale=1.0, floor=2)
    assert w.open(b"a")
    w.sent(b"a", 10.0)
    w.sent(b"a", 10.5)
    assert not w.open(b"a") and w.open(b"b") and len(w) == 2
    w.answered(b"a")
    assert w.open(b"a") and len(w) == 1
    w.sent(b"a", 10.6)
    w.expire(b"a", 11.4)  # the slot taken at 10.5 is not stale yet
    assert not w.open(b"a")
    w.expire(b"a", 11.5)
    assert w.open(b"a") and len(w) == 1
    w.answered(b"a")
    w.answered(b"a")  # a reply beyond what was counted (a stale slot's) frees nothing more
    w.answered(b"nobody")
    assert len(w) == 0
    w.sent(b"a", 12.0)
    w.sent(b"b", 12.5)
    w.sweep(13.2)  # a's every slot is stale: a is forgotten, b is not
    assert len(w) == 1
    w.clear()
    assert len(w) == 0 and w.open(b"b")
    assert Window(0, stale=1.0).size == 1


def test_the_budget_is_shared_among_the_clients_active_at_least_a_floor_each() -> None:
    w = Window(12, stale=1.0, floor=2)
    for _ in range(12):  # alone: the whole budget
        assert w.open(b"flood")
        w.sent(b"flood", 0.0)
    assert not w.open(b"flood") and w.size == 12 and w.active == 1
    w.sent(b"a", 0.1)  # another client: the flood's share is 6 now; it has 12 out
    assert w.size == 6 and not w.open(b"flood") and w.open(b"a")
    for _ in range(7):
        w.answered(b"flood")
    assert w.open(b"flood")  # 5 out of 6
    w.answered(b"a")  # a's slots are free, but a stays active until the next sweep
    assert w.active == 2 and w.size == 6
    for c in (b"b", b"c", b"d", b"e", b"f", b"g"):
        w.sent(c, 0.2)
    assert w.size == 2  # 12 // 8 is 1: the floor
    for c in (b"b", b"c", b"d", b"e", b"f", b"g"):
        w.answered(c)
    w.sweep(0.3)  # only the flood has anything out: it is alone again
    assert w.active == 1 and w.size == 12 and w.open(b"flood") and len(w) == 5


def test_a_flooder_gets_its_share_back_when_the_others_leave() -> None:
    w = Window(4, stale=10.0, floor=1)
    q: FairQueue[str] = FairQueue(total=100, per_client=50, window=w)
    for i in range(8):
        q.put(b"flood", f"f{i}")
    q.put(b"a", "a0")
    sent = []
    while q.ready:
        w.sent(q.turn, 0.0)
        sent.append(q.pop())
    # in turn: f0 a0 (now two active: 2 each), f1; then the flood is parked
    assert sent == ["f0", "a0", "f1"] and not q.ready
    q.answered(b"a")
    assert not q.ready  # a's reply frees none of the flood's slots
    w.sweep(0.1)  # a has nothing out: the flood is alone, its share is 4 again
    q.tick(0.1)
    while q.ready:
        w.sent(q.turn, 0.1)
        sent.append(q.pop())
    assert sent[3:] == ["f2", "f3"] and len(w) == 4


def test_a_client_whose_window_is_full_sits_its_turns_out() -> None:
    w = Window(2, stale=1.0, floor=2)
    q: FairQueue[str] = FairQueue(total=100, per_client=50, window=w)
    for i in range(4):
        q.put(b"flood", f"f{i}")
    sent = []

    def send_ready(now: float) -> None:
        while q.ready:
            w.sent(q.turn, now)  # what the poller's send does when the back end takes it
            sent.append(q.pop())

    send_ready(0.0)
    assert sent == ["f0", "f1"] and not q.ready and len(q) == 2 and q.clients == 1
    q.put(b"a", "a0")  # another client is not held up by the parked one
    assert q.ready and q.turn == b"a"
    send_ready(0.1)
    assert sent[-1] == "a0" and not q.ready
    q.answered(b"flood")  # a reply frees one slot: one more request of the flood
    send_ready(0.2)
    assert sent[-1] == "f2" and not q.ready
    q.tick(0.9)
    assert not q.ready
    q.tick(1.05)  # the slot taken at 0.0 is stale: one more
    send_ready(1.05)
    assert sent[-1] == "f3" and len(q) == 0
    q.put(b"flood", "f4")
    assert not q.ready  # still two slots out (0.2, 1.05)
    q.clear_window()  # the back end lost its peers: nothing out any more
    assert q.ready and q.head() == "f4"


@given(st.lists(st.tuples(st.sampled_from(["put", "send", "reply", "tick"]),
                          st.sampled_from([b"a", b"b", b"c"])), max_size=300))
def test_with_a_window_no_client_exceeds_its_share_and_nothing_is_lost(
        ops: list[tuple[str, bytes]]) -> None:
    w = Window(2, stale=1.0, floor=2)  # (a fixed share: the floor is the budget)
    q: FairQueue[tuple[bytes, int]] = FairQueue(total=8, per_client=4, window=w)
    now = 0.0
    put = {c: 0 for c in (b"a", b"b", b"c")}
    sent = dict.fromkeys(put, 0)
    for op, client in ops:
        now += 0.1
        if op == "put" and not q.full:
            q.put(client, (client, put[client]))
            put[client] += 1
        elif op == "send" and q.ready:
            c = q.turn
            assert w.open(c)  # whose turn it is has a free slot: nobody exceeds its share
            w.sent(c, now)
            got = q.pop()
            assert got == (c, sent[c])  # per client, first in first out
            sent[c] += 1
        elif op == "reply":
            q.answered(client)
        elif op == "tick":
            q.tick(now)
        # a client waits only while its share is out
        waiting = {c for c in put if put[c] > sent[c]}
        assert q.ready == any(w.open(c) for c in waiting)
        assert len(q) == sum(put[c] - sent[c] for c in put) and q.clients == len(waiting)
