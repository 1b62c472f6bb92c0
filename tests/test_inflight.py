"""gateway.device.inflight: the table of requests in flight on the back end (pure bookkeeping)."""

from __future__ import annotations

from gateway.device.inflight import InFlight

A, B = (b"\x00\x00\x00\x01", b""), (b"\x80\x00\x00\x07",)


def test_a_key_in_flight_several_times_is_answered_oldest_first() -> None:
    t = InFlight(ttl=10.0)
    assert t.sent(A, b"p1", 0.0) is None
    t.sent(A, b"p2", 1.0)  # the same client envelope again (a DEALER with two requests out)
    t.sent(A, b"p1", 2.0)
    t.sent(B, b"p2", 3.0)
    assert len(t) == 4
    assert t.answered(A)
    assert t.lost(b"p1") == [A]  # the first went: only the third is still on p1
    assert t.answered(A)  # the second
    assert not t.answered(A)  # none left
    assert t.answered(B) and not t.answered(B)
    assert len(t) == 0 and not t._where


def test_a_closed_pipe_gives_each_of_its_requests_once() -> None:
    t = InFlight()
    for i in range(3):
        t.sent(A, b"p1", float(i))
    t.sent(B, b"p1", 3.0)
    t.sent(B, b"p2", 4.0)
    assert sorted(t.lost(b"p1")) == sorted([A, A, A, B])
    assert t.lost(b"p1") == []
    assert t.answered(B) and len(t) == 0


def test_expiry_goes_by_deadline_and_leaves_the_rest() -> None:
    t = InFlight(ttl=5.0)
    t.sent(A, b"p", 0.0)
    t.sent(B, b"p", 1.0)
    t.sent(A, b"p", 2.0)
    assert t.expire(5.5) == [A]
    assert t.expire(6.5) == [B]
    assert t.answered(A) and len(t) == 0


def test_bounded_the_oldest_is_evicted() -> None:
    t = InFlight(max_entries=2)
    t.sent(A, b"p", 0.0)
    t.sent(B, b"p", 1.0)
    assert t.sent(A, b"p", 2.0) == [A]  # full: the oldest request makes room
    assert len(t) == 2
    assert t.answered(A) and t.answered(B) and not t.answered(A)
