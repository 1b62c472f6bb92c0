"""What every harness shares: a reader that turns the fuzzer's bytes into choices, the finding
type, and the list of findings that are known and open.

A harness input is plain bytes (what libFuzzer mutates and what a corpus file holds): the
first bytes say what to build (a role, a size limit, where to cut the stream), the rest is the
payload. :class:`Data` reads them; once the input is used up it answers zeros and empty
strings, so every input is valid and the same bytes always make the same run (a corpus file
replays without atheris). The layout of each harness's input is fixed: a change invalidates the
corpus, so add choices at the end, never in the middle.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["KNOWN", "Data", "Finding", "check"]

T = TypeVar("T")

#: Findings the harnesses report that are known and open, by id: what the check sees and the
#: issue that will fix it. A harness run without ``strict`` counts such a finding and goes on
#: (so a budget run can look for new ones); ``tests/test_fuzz_corpus.py`` replays the input
#: that shows it with ``strict=True`` under ``xfail(strict=True)``: once the fix lands the
#: test passes, xfail turns that into a failure, and the entry and the xfail go together.
KNOWN: dict[str, str] = {}

#: known findings a non-strict run saw, by id (the runner prints them at the end)
SEEN: dict[str, int] = {}
#: where a run under atheris writes SEEN (set by ``python -m fuzz run``)
_SEEN_FILE = os.environ.get("FUZZ_SEEN_FILE", "")


class Finding(AssertionError):
    """A harness's oracle failed: the product did something it must not."""


def check(ok: bool, finding: str, message: str, strict: bool) -> None:
    """Raise :class:`Finding` unless ``ok``; a known finding (:data:`KNOWN`) is only counted
    when ``strict`` is False."""
    if ok:
        return
    if not strict and finding in KNOWN:
        count = SEEN[finding] = SEEN.get(finding, 0) + 1
        if _SEEN_FILE and not count & (count - 1):  # the first time, then at 2, 4, 8 ...
            with open(_SEEN_FILE, "w") as f:  # (libFuzzer's exit skips atexit)
                json.dump(SEEN, f)
        return
    raise Finding(f"[{finding}] {message}")


def raised_in(exc: BaseException, module_prefix: str) -> bool:
    """True when ``exc`` came through code of a module whose name starts with
    ``module_prefix`` (any frame of its traceback)."""
    tb = exc.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith(module_prefix):
            return True
        tb = tb.tb_next
    return False


class Data:
    """The fuzzer's bytes, read front to back as choices; zeros once they run out."""

    __slots__ = ("_buf", "_pos")

    def __init__(self, buf: bytes) -> None:
        self._buf = bytes(buf)
        self._pos = 0

    def __len__(self) -> int:
        """Bytes not read yet."""
        return len(self._buf) - self._pos

    def byte(self) -> int:
        if self._pos >= len(self._buf):
            return 0
        self._pos += 1
        return self._buf[self._pos - 1]

    def uint(self, size: int) -> int:
        """A big-endian unsigned integer of ``size`` bytes."""
        return int.from_bytes(self.take(size).ljust(size, b"\x00"), "big")

    def below(self, n: int) -> int:
        """A number in ``0..n-1`` (one byte, or two when ``n`` > 256)."""
        if n <= 1:
            return 0
        return (self.byte() if n <= 256 else self.uint(2)) % n

    def choice(self, options: Sequence[T]) -> T:
        return options[self.below(len(options))]

    def flag(self) -> bool:
        return bool(self.byte() & 1)

    def take(self, n: int) -> bytes:
        """Up to ``n`` bytes (fewer when the input runs out)."""
        out = self._buf[self._pos : self._pos + max(n, 0)]
        self._pos += len(out)
        return out

    def short(self) -> bytes:
        """A length byte, then that many bytes."""
        return self.take(self.byte())

    def rest(self) -> bytes:
        out = self._buf[self._pos :]
        self._pos = len(self._buf)
        return out


class Writer:
    """The inverse of :class:`Data` for the seeds: choices written as the reader reads them."""

    def __init__(self) -> None:
        self.out = bytearray()

    def byte(self, value: int) -> Writer:
        self.out.append(value & 0xFF)
        return self

    def uint(self, value: int, size: int) -> Writer:
        self.out += value.to_bytes(size, "big")
        return self

    def raw(self, data: bytes) -> Writer:
        self.out += data
        return self

    def short(self, data: bytes) -> Writer:
        assert len(data) <= 255
        return self.byte(len(data)).raw(data)

    def bytes(self) -> bytes:
        return bytes(self.out)
