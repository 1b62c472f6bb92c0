"""The protocol layers stay sans-IO: no socket, event loop, thread or binding imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "gateway"
FORBIDDEN = frozenset({"asyncio", "socket", "selectors", "threading", "zmq", "pynng"})


def _modules() -> list[Path]:
    files: list[Path] = []
    for sub in ("wire", "patterns", "envelope"):
        files += sorted((ROOT / sub).rglob("*.py"))
    return files


def _imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_modules_found() -> None:
    names = {str(p.relative_to(ROOT)) for p in _modules()}
    assert {"wire/__init__.py", "wire/events.py", "wire/zmtp/readers.py", "patterns/pairing.py",
            "envelope/__init__.py", "envelope/translators.py"} <= names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_io_imports(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = {name for name in _imported(tree) if name.split(".")[0] in FORBIDDEN}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_checker_catches_imports() -> None:
    src = "import socket\nfrom zmq.asyncio import Context\nimport os.path\nfrom . import x\n"
    assert {n.split(".")[0] for n in _imported(ast.parse(src))} & FORBIDDEN == {"socket", "zmq"}


@pytest.mark.parametrize("path", sorted((ROOT / "wire").rglob("*.py")), ids=lambda p: p.name)
def test_codecs_import_no_pattern(path: Path) -> None:
    """Codecs get their identity as data (mangos' ProtocolInfo): wire never imports patterns."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assert not {n for n in _imported(tree) if n.startswith("gateway.patterns")}


def test_transport_interface_imports_no_engine() -> None:
    tree = ast.parse((ROOT / "transport.py").read_text(encoding="utf-8"))
    # the exception tree, the log and the counters (leaves: structlog, prometheus_client and
    # the stdlib) only: no engine, no codec, no plugin
    assert {n for n in _imported(tree) if n.startswith("gateway.")} <= {
        "gateway.errors", "gateway.logging", "gateway.metrics"}
