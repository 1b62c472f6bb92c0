"""gateway.logging: the bounded warning throttle and peer-supplied log fields."""

from __future__ import annotations

import datetime
import sys
import time

import pytest
import structlog

from gateway.logging import OVERFLOW, Throttle, _UtcStamp, shown


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_key_and_interval_with_the_count_held_back() -> None:
    clock = Clock()
    throttle = Throttle(10.0, 8, clock)
    assert throttle("a") == 0  # first line
    assert [throttle("a") for _ in range(5)] == [None] * 5  # held back
    assert throttle("b") == 0  # another key has its own line
    clock.now += 10.0
    assert throttle("a") == 5  # the next line says how many were held back
    assert throttle("a") is None


def test_keys_are_bounded_and_new_ones_share_one_line() -> None:
    """A peer that announces a new value on every connection (issue 20, finding 3) gets one
    line per interval, and the table never holds more than max_keys + 1 entries."""
    clock = Clock()
    throttle = Throttle(10.0, 4, clock)
    lines = sum(throttle(("endpoint", f"type-{i}")) is not None for i in range(10_000))
    assert lines == 4 + 1  # four keys, then the overflow key's one line
    assert len(throttle) == 5
    assert throttle(OVERFLOW) is None  # 9,996 held back under it
    clock.now += 10.0
    # stale keys make room again: a new key gets its own line after the interval
    assert throttle(("endpoint", "later")) == 0
    assert len(throttle) <= 5


def test_shown_cuts_what_a_peer_chose() -> None:
    assert shown("REQ") == "REQ"
    long = "x" * 65536
    cut = shown(long)
    assert len(cut) < 100 and cut.startswith("x" * 64) and "65472" in cut


def test_the_stamp_is_structlogs_iso_utc_formatted_once_a_second(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock read as ``datetime.now`` reads it (nanoseconds, down to the microsecond),
    across a second's turn, and within a second of structlog's own stamp."""
    stamp = _UtcStamp()
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    for ns in (1_795_000_000_000_000_000, 1_795_000_000_999_999_999,
               1_795_000_001_000_000_500, 1_795_000_001_788_723_500, 1_795_000_001_500_000_000):
        monkeypatch.setattr(time, "time_ns", lambda ns=ns: ns)
        expected = epoch + datetime.timedelta(microseconds=ns // 1000)
        assert stamp(None, "info", {})["timestamp"] == expected.strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ"), ns
    monkeypatch.undo()
    theirs = structlog.processors.TimeStamper(fmt="iso", utc=True)
    ours, reference = stamp(None, "info", {})["timestamp"], theirs(None, "info", {})["timestamp"]
    assert len(ours) == 27 and ours.endswith("Z")
    gap = (datetime.datetime.fromisoformat(reference.rstrip("Z"))
           - datetime.datetime.fromisoformat(ours[:-1]))
    assert datetime.timedelta(0) <= gap < datetime.timedelta(seconds=1)


def test_threads_that_stamp_at_once_never_mix_two_seconds() -> None:
    """The second and its text change in one store (review: a thread could pair the new
    second with the last one's text)."""
    import threading

    stamp = _UtcStamp()
    clock = [1_795_000_000_000_000_000]
    read = threading.local()  # what this thread's last clock reading was
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    wrong: list[tuple[str, str]] = []

    def ticking() -> int:
        clock[0] += 250_000_000  # a second every four readings
        read.ns = clock[0]
        return read.ns

    def worker() -> None:
        for _ in range(2_000):
            got = stamp(None, "info", {})["timestamp"]
            expected = (epoch + datetime.timedelta(microseconds=read.ns // 1000)).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ")
            if got != expected:
                wrong.append((got, expected))

    switch = sys.getswitchinterval()
    original = time.time_ns
    time.time_ns = ticking  # type: ignore[assignment]
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        time.time_ns = original  # type: ignore[assignment]
        sys.setswitchinterval(switch)
    assert wrong == [], wrong[:3]
