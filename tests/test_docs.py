"""docs/observability.md names every metric and every drop reason the code has."""

from __future__ import annotations

from pathlib import Path

from gateway.errors import DROP_REASONS
from gateway.metrics import SPECS

DOC = (Path(__file__).resolve().parents[1] / "docs" / "observability.md").read_text()


def test_every_metric_is_documented() -> None:
    missing = [name for name in SPECS if f"`{name}`" not in DOC]
    assert not missing


def test_every_drop_reason_is_documented() -> None:
    missing = [reason for reason in DROP_REASONS if f"`{reason}`" not in DOC]
    assert not missing
