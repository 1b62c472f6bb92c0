"""The import graph, read from the source (nothing is imported): no cycles inside ``gateway/``,
neither the product nor the built-in plugins import the test suites, and the core never
imports the tools wing (``gateway.tools``), directly, through another module, or by name."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules(package_dir: Path, name: str) -> dict[str, Path]:
    mods = {}
    for f in package_dir.rglob("*.py"):
        rel = f.relative_to(package_dir).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        mods[".".join((name, *parts))] = f
    return mods


def _imports(module: str, path: Path) -> set[str]:
    """Every module named by an import statement, at any depth (a lazy import inside a function
    is still a dependency), except under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if path.name != "__init__.py":
                    base = base[:-1]
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            found.update(f"{prefix}.{a.name}" for a in node.names)
    return found


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for target in _imports(m, path):
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != m and not m.startswith(target + ".") \
                    and not target.startswith(m + "."):
                edges[m].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_inside_gateway() -> None:
    cycles = _cycles(_graph(_modules(ROOT / "gateway", "gateway")))
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_product_and_plugins_never_import_the_tests() -> None:
    """Nor the fuzzing harnesses (``fuzz/``: not installed), nor pytest, but in the one pytest
    plugin (``gateway.testing.pytest_plugin``, loaded only by the suites' conftests)."""
    offenders = []
    for package_dir, name in ((ROOT / "gateway", "gateway"), (ROOT / "plugins", "gateway_plugins")):
        for module, path in _modules(package_dir, name).items():
            tests = ("interop_tests", "tests", "conftest", "fuzz")
            if module != "gateway.testing.pytest_plugin":
                tests += ("pytest",)
            bad = {t for t in _imports(module, path) if t.split(".")[0] in tests}
            if bad:
                offenders.append(f"{path.relative_to(ROOT)}: {sorted(bad)}")
    assert not offenders, offenders


def test_plugins_import_the_core_not_each_other_by_a_generic_name() -> None:
    for module, path in _modules(ROOT / "plugins", "gateway_plugins").items():
        generic = {t for t in _imports(module, path) if t.split(".")[0] == "plugins"}
        assert not generic, f"{module} imports {generic}"


TOOLS = "gateway.tools"


def _core(mods: dict[str, Path]) -> dict[str, Path]:
    return {m: p for m, p in mods.items() if m != TOOLS and not m.startswith(TOOLS + ".")}


def test_the_core_never_imports_the_tools_wing() -> None:
    """Every module of ``gateway/`` outside ``gateway.tools``, and every built-in plugin: no
    path through the import graph (lazy imports included) reaches the tools wing."""
    mods = _modules(ROOT / "gateway", "gateway")
    plugins = _modules(ROOT / "plugins", "gateway_plugins")
    edges = _graph(mods | plugins)
    offenders = []
    for start in (*_core(mods), *plugins):
        seen, todo = {start}, [start]
        while todo:
            for target in edges[todo.pop()]:
                if target == TOOLS or target.startswith(TOOLS + "."):
                    offenders.append(f"{start} -> ... -> {target}")
                elif target not in seen:
                    seen.add(target)
                    todo.append(target)
    assert not offenders, offenders


def test_the_core_names_no_tool_module_in_a_string() -> None:
    """``importlib.import_module("gateway.tools...")`` would dodge the graph above: no string in
    a core module (docstrings aside) names the tools wing; the CLI finds the tools' commands
    through the ``gateway.commands`` entry-point group."""
    offenders = []
    for path in _core(_modules(ROOT / "gateway", "gateway")).values():
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docs and TOOLS in node.value):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not offenders, offenders


def test_the_tools_graph_check_finds_an_import() -> None:
    """The walk above is not vacuous: the tools wing imports the core (an edge the walk sees)."""
    mods = _modules(ROOT / "gateway", "gateway")
    edges = _graph(mods)
    assert any(t.startswith("gateway.") and not t.startswith(TOOLS)
               for t in edges["gateway.tools.matrix.cells"])
    assert "gateway.tools.matrix.cells" in edges["gateway.tools.matrix.runner"]


#: the developers' guide: no module over 500 lines, no class over 300
MAX_MODULE_LINES, MAX_CLASS_LINES = 500, 300


def _sources() -> list[Path]:
    found = []
    for top in (ROOT / "gateway", ROOT / "plugins"):
        for f in sorted(top.rglob("*")):
            if f.suffix in (".py", ".pyx", ".pxi"):
                found.append(f)
    return found


def test_no_module_over_500_lines_and_no_class_over_300() -> None:
    """Modules (and the kernel's Cython files) stay under 500 lines, classes under 300 (for the
    Cython files: each ``cdef class`` up to the next top-level statement)."""
    too_long = []
    for f in _sources():
        text = f.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{f.relative_to(ROOT)}: {lines} lines")
        if f.suffix == ".py":
            spans = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(text))
                     if isinstance(n, ast.ClassDef) and n.end_lineno is not None]
        else:
            spans, name, start = [], "", 0
            rows = text.split("\n")
            for i, row in enumerate(rows + ["end"]):
                if row and not row[0].isspace() and not row.startswith("#"):
                    if name:
                        spans.append((name, i - start))
                        name = ""
                    if row.startswith("cdef class "):
                        name, start = row.split()[2].split("(")[0].rstrip(":"), i
        too_long += [f"{f.relative_to(ROOT)}: class {n}, {size} lines" for n, size in spans
                     if size > MAX_CLASS_LINES]
    assert too_long == []


def test_the_pipe_and_the_socket_core_stay_at_most_250_lines() -> None:
    """The two classes every connection runs through stay readable in one sitting (issue 35):
    their reading, writing and receiving halves are mixins of their own."""
    sizes = {}
    for rel, name in (("gateway/engine/pipe.py", "PipeBody"),
                      ("gateway/engine/core.py", "SocketCore")):
        tree = ast.parse((ROOT / rel).read_text())
        sizes[name] = next(n.end_lineno - n.lineno + 1 for n in ast.walk(tree)
                           if isinstance(n, ast.ClassDef) and n.name == name
                           and n.end_lineno is not None)
    assert all(size <= 250 for size in sizes.values()), sizes
