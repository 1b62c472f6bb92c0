"""The fuzzing corpus as regression tests: every input kept in ``fuzz/corpus/<harness>/`` (the
seeds captured from libzmq and nng, the inputs with new coverage that ``python -m fuzz run
--merge`` kept, any crash a run found) goes through its harness on every ``make test``.

An input that shows a known, open finding is ``known-<id>`` (``fuzz._data.KNOWN`` says which
issue fixes it): the replay tolerates such findings, and the strict run of that one input is
``xfail(strict=True)``; when the fix lands the strict run passes, the xfail turns that into a
failure, and the KNOWN entry and the xfail go together. A ``crash-*`` file (a new finding) fails
the replay until it is fixed or named a known finding.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # fuzz/ is not installed: it runs from the repository
    sys.path.insert(0, str(ROOT))

from fuzz import HARNESSES  # noqa: E402
from fuzz.__main__ import CORPUS, corpus_files, harness, replay  # noqa: E402
from fuzz._data import KNOWN, Finding  # noqa: E402


@pytest.mark.parametrize("name", list(HARNESSES))
def test_every_kept_input_replays(name: str) -> None:
    assert corpus_files(name), f"fuzz/corpus/{name}/ is empty"
    failures = replay(name)
    assert not failures, (f"{len(failures)} of {len(corpus_files(name))} inputs of {name} "
                          f"fail: {[f for f, _ in failures]}\n{failures[0][1]}")


@pytest.mark.parametrize("name", list(HARNESSES))
def test_every_harness_starts_from_real_peers_or_sessions(name: str) -> None:
    """``python -m fuzz seeds`` wrote them: libzmq's and nng's bytes, honest sessions."""
    assert any(p.name.startswith("seed-") for p in corpus_files(name))


def _known_path(finding: str) -> Path:
    paths = [p for p in CORPUS.glob(f"*/known-{finding}")]
    assert len(paths) == 1, f"one fuzz/corpus/*/known-{finding} input, not {paths}"
    return paths[0]


def test_known_inputs_and_known_findings_match() -> None:
    files = {p.name.removeprefix("known-") for p in CORPUS.glob("*/known-*")}
    assert files == set(KNOWN)


@pytest.mark.parametrize("finding", [
    pytest.param(f, marks=pytest.mark.xfail(raises=Finding, strict=True, reason=KNOWN[f]))
    for f in sorted(KNOWN)])
def test_known_finding_is_fixed(finding: str) -> None:
    path = _known_path(finding)
    harness(path.parent.name).one_input(path.read_bytes(), strict=True)
