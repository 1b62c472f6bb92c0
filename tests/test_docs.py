"""docs/observability.md names every metric, and its reason tables are the code's tables, word
for word (the tables in gateway.errors are the one source; the docs show them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.errors import (
    AUTH_REASONS,
    DROP_REASONS,
    HANDSHAKE_REASONS,
    PIPE_CLOSE_REASONS,
    REFUSAL_REASONS,
    ProtocolError,
)
from gateway.metrics import SPECS

DOC = (Path(__file__).resolve().parents[1] / "docs" / "observability.md").read_text()


def _table(heading: str) -> dict[str, str]:
    """The ``| `word` | meaning |`` rows of the first table after ``heading``."""
    section = DOC[DOC.index(heading):]
    rows = section[section.index("| reason | meaning |"):].splitlines()[2:]
    table = {}
    for row in rows:
        match = re.fullmatch(r"\| `([^`]+)` \| (.*) \|", row)
        if match is None:
            break
        table[match[1]] = match[2]
    return table


def test_every_metric_is_documented() -> None:
    missing = [name for name in SPECS if f"`{name}`" not in DOC]
    assert not missing


@pytest.mark.parametrize(("heading", "table"), [
    ("## Drop reasons", DROP_REASONS),
    ("## Handshake and dial failure reasons", HANDSHAKE_REASONS),
    ("## Pipe close reasons", PIPE_CLOSE_REASONS),
    ("## Authentication refusal reasons", AUTH_REASONS),
    ("## Connection refusal reasons", REFUSAL_REASONS),
])
def test_the_reason_tables_are_the_codes(heading: str, table: dict[str, str]) -> None:
    assert _table(heading) == table


def _subclasses(cls: type[ProtocolError]) -> list[type[ProtocolError]]:
    found: list[type[ProtocolError]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_every_protocol_error_closes_with_a_documented_reason() -> None:
    """Each exception a codec may raise (the plugins' too) carries reason words from the tables:
    the pipe counts and logs ``reason`` (or ``handshake_reason`` before the handshake)."""
    from gateway.plugins import registry

    registry()  # every plugin's codecs imported
    classes: list[type[ProtocolError]] = [ProtocolError, *_subclasses(ProtocolError)]
    for cls in classes:
        assert cls.reason in PIPE_CLOSE_REASONS, cls
        assert getattr(cls, "handshake_reason", "garbage") in HANDSHAKE_REASONS, cls
