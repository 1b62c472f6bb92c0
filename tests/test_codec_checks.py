"""gateway.testing.codec_checks: the checks the wire-codec tests share can fail, and third parties
can import them without pytest or hypothesis."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gateway.errors import RemoteProtocolError
from gateway.testing.codec_checks import chunked, feed_garbage


class _Scripted:
    """A codec whose ``next_event`` replays a script: events, then ``None`` or an exception."""

    def __init__(self, *, endless: bool = False, error: Exception | None = None) -> None:
        self.endless, self.error, self.fed = endless, error, []

    def receive_data(self, data: bytes) -> None:
        self.fed.append(data)

    def next_event(self):
        if self.error is not None:
            raise self.error
        return ("event",) if self.endless else None


def test_chunked_keeps_every_byte_in_order() -> None:
    assert chunked(b"abcdef", [2, 4, 2 + 7]) == [b"ab", b"cd", b"ef"]
    assert chunked(b"", [5]) == [b"", b""]
    assert b"".join(chunked(b"xyz" * 10, [29, 3, 0, 1000])) == b"xyz" * 10


def test_feed_garbage_accepts_none_and_protocol_errors() -> None:
    quiet = _Scripted()
    feed_garbage(quiet, [b"a", b"b"])  # type: ignore[arg-type]
    assert quiet.fed == [b"a", b"b"]
    rejecting = _Scripted(error=RemoteProtocolError("bad"))
    feed_garbage(rejecting, [b"a", b"b"])  # type: ignore[arg-type]
    assert rejecting.fed == [b"a"]  # stops at the first rejection


def test_feed_garbage_fails_an_endless_codec() -> None:
    with pytest.raises(AssertionError, match="never returned None"):
        feed_garbage(_Scripted(endless=True), [b"a"])  # type: ignore[arg-type]


def test_feed_garbage_lets_other_errors_through() -> None:
    with pytest.raises(ValueError):
        feed_garbage(_Scripted(error=ValueError("crash")), [b"a"])  # type: ignore[arg-type]


def test_codec_checks_import_no_pytest_or_hypothesis() -> None:
    code = ("import sys, gateway.testing.codec_checks; "
            "sys.exit('pytest' in sys.modules or 'hypothesis' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 0
