"""gateway.logging: the bounded warning throttle and peer-supplied log fields."""

from __future__ import annotations

import datetime
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
    stamp = _UtcStamp()
    theirs = structlog.processors.TimeStamper(fmt="iso", utc=True)
    for now in (1_795_000_000.0, 1_795_000_000.999999, 1_795_000_001.000001, 1_795_000_001.5):
        monkeypatch.setattr(time, "time", lambda now=now: now)
        ours = stamp(None, "info", {})["timestamp"]
        expected = datetime.datetime.fromtimestamp(now, datetime.UTC)
        assert ours == expected.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    monkeypatch.undo()
    ours, reference = stamp(None, "info", {})["timestamp"], theirs(None, "info", {})["timestamp"]
    assert len(ours) == len(reference) == 27 and ours.endswith("Z")
    gap = (datetime.datetime.fromisoformat(reference[:-1])
           - datetime.datetime.fromisoformat(ours[:-1]))
    assert datetime.timedelta(0) <= gap < datetime.timedelta(seconds=1)
