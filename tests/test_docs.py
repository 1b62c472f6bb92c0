"""docs/observability.md names every metric, drop reason and handshake failure reason the code
has."""

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


def test_every_handshake_reason_is_documented() -> None:
    from gateway.errors import HANDSHAKE_REASONS

    missing = [reason for reason in HANDSHAKE_REASONS if f"| `{reason}` |" not in DOC]
    assert not missing, f"docs/observability.md lacks handshake reasons {missing}"
