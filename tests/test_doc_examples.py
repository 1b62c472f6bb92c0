""".ci/doc_examples.py: every code block of the two READMEs is either run by CI or says why not."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_examples", REPO / ".ci" / "doc_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["doc_examples"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_block_has_a_known_language_and_skips_say_why() -> None:
    runner = _runner()
    found = [b for path in runner.DOCS for b in runner.blocks(path)]
    assert found
    for b in found:
        assert b.lang in runner.RUN or b.lang in runner.SHOWN, f"{b.path}:{b.line}: {b.lang!r}"
        if b.lang in runner.RUN and b.skip is not None:
            assert b.skip != "no reason given", f"{b.path}:{b.line}"
    run = [b for b in found if b.lang in runner.RUN and b.skip is None]
    commands = "".join(b.text for b in run)
    for needed in ("make demo", "gateway bridge", "gateway run", "gateway check",
                   "examples/zmq_to_nng_bridge.sh", "examples/nng_to_zmq_bridge.sh", "nanocat",
                   "nngcat", ". .venv/bin/activate"):
        assert needed in commands, needed


def test_blocks_are_read_with_their_line_and_skip_reason(tmp_path: Path) -> None:
    runner = _runner()
    doc = tmp_path / "X.md"
    doc.write_text("text\n```sh\n# docs: skip: too slow\nmake all\n```\n\n```python\nprint(1)\n```\n")
    runner.REPO = tmp_path
    got = runner.blocks("X.md")
    assert [(b.line, b.lang, b.skip) for b in got] == [(2, "sh", "too slow"), (7, "python", None)]


def test_the_readme_opens_with_the_operators_two_minutes() -> None:
    """Issue 39: the first command block of the README is a virtualenv and `pip install` of the
    checkout, then a bridge with its two peers: no root, no system packages, no make; CI runs
    it (not skipped); `make demo` and `make test` stay the repository's set-up commands,
    after it."""
    runner = _runner()
    text = (REPO / "README.md").read_text()
    first = next(b for b in runner.blocks("README.md") if b.lang in runner.RUN)
    assert first.skip is None
    lines = [line for line in first.text.splitlines() if line.strip()]
    assert "python3 -m venv" in lines[0] and "pip install" in lines[0] and " ." in lines[0]
    assert any(line.startswith("gateway bridge ") for line in lines)
    assert len([line for line in lines if not line.startswith(". ")]) <= 5
    for word in ("sudo", "apt", "make ", ".venv/"):
        assert word not in first.text, word
    assert text.index(first.text) < text.index("make demo") < text.index("make test")
    assert "needs root" in text and "make env" in text
