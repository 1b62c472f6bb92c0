"""structlog set-up: quiet by default for library users, one line per event for the CLI."""

from __future__ import annotations

import logging
import sys
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
            structlog.processors.TimeStamper(fmt="iso", utc=True),
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
