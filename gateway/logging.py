"""structlog set-up: quiet by default for library users, one line per event for the CLI."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Hashable, MutableMapping
from typing import Any

import structlog


class _Stderr:
    """A structlog logger writing to whatever ``sys.stderr`` is at the time (not the stream of
    the moment ``configure`` ran: test runners and daemons swap it)."""

    def msg(self, message: str) -> None:
        # one write per line: the workers of --workers N share one stderr, and a pipe keeps a
        # write of up to PIPE_BUF bytes whole (print writes the newline separately)
        stream = sys.stderr
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


def _stderr_logger(*args: Any) -> _Stderr:
    return _Stderr()


class _UtcStamp:
    """structlog's ``TimeStamper(fmt="iso", utc=True)`` (``2026-11-27T06:17:05.302046Z``, always
    with its microseconds, which ``isoformat`` leaves out when they are 0), with the date and
    time formatted once a second: a connection storm logs thousands of lines a second, and the
    stamp was a tenth of a line's cost. The clock is read as ``datetime.now`` reads it
    (nanoseconds, down to the microsecond); the second and its text are one tuple, replaced in
    one store, so threads that log at once never pair one second's text with another's."""

    __slots__ = ("_cached",)

    def __init__(self) -> None:
        self._cached: tuple[int, str] = (-1, "")

    def __call__(self, logger: Any, name: str,
                 event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        second, micro = divmod(time.time_ns() // 1000, 1_000_000)
        cached = self._cached
        if cached[0] != second:
            cached = self._cached = (second, time.strftime("%Y-%m-%dT%H:%M:%S",
                                                           time.gmtime(second)))
        event_dict["timestamp"] = f"{cached[1]}.{micro:06d}Z"
        return event_dict


def configure(fmt: str = "console", level: str = "info") -> None:
    """Log to stderr, ``console`` (human) or ``json`` (one object per line)."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,  # e.g. worker=N under --workers
            structlog.processors.add_log_level,
            _UtcStamp(),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    if not structlog.is_configured():
        configure(level="warning")
    return structlog.get_logger(name)


#: the key lines beyond a throttle's table are counted under (``what="other"`` in the line)
OVERFLOW = ("other",)


class Throttle:
    """One warning line per key every ``interval`` seconds, in bounded memory: what peers make
    the gateway log (failed handshakes, refused connections, denied clients) never grows a
    table or the log without limit.

    ``throttle(key)`` returns ``None`` when the line is held back (counted), else how many
    lines of that key were held back since the last one (the line says ``suppressed=N``).
    At most ``max_keys`` keys are kept; a key whose last line is older than ``interval`` is
    forgotten when room is needed, and new keys beyond that share one :data:`OVERFLOW` key,
    so a peer inventing a new key per connection gets one line per interval, not one each.
    """

    __slots__ = ("_clock", "_seen", "interval", "max_keys")

    def __init__(self, interval: float = 10.0, max_keys: int = 64,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.max_keys = max_keys
        self._clock = clock
        self._seen: dict[Hashable, list[float | int]] = {}  # key -> [last line, held since]

    def __call__(self, key: Hashable) -> int | None:
        now = self._clock()
        seen = self._seen
        entry = seen.get(key)
        if entry is None:
            if len(seen) >= self.max_keys:
                self._prune(now)
            if len(seen) >= self.max_keys:
                key = OVERFLOW
                entry = seen.get(key)
            if entry is None:
                seen[key] = [now, 0]
                return 0
        if now - entry[0] < self.interval:
            entry[1] += 1
            return None
        held = int(entry[1])
        entry[0], entry[1] = now, 0
        return held

    def _prune(self, now: float) -> None:
        stale = [k for k, (last, _) in self._seen.items()
                 if now - last >= self.interval and k != OVERFLOW]
        for k in stale:
            del self._seen[k]

    def __len__(self) -> int:
        return len(self._seen)


def shown(value: str, limit: int = 64) -> str:
    """A peer-supplied string as a log field: at most ``limit`` characters (the rest counted),
    so a peer cannot make one line as long as its handshake."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}...(+{len(value) - limit} chars)"
