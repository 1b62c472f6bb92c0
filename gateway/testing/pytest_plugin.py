"""Both engine paths in one test process, as aiohttp runs its parser twins (``REQUEST_PARSERS``):
a pytest plugin whose ``engine_path`` fixture runs a test on the compiled kernel and again on
the pure-Python reference, instead of a second run of the whole suite. The one module of the
package that imports pytest (as ``anyio.pytest_plugin`` does), loaded only by a conftest that
asks for it; nothing registers it for other projects' tests.

A conftest takes the fixture and picks the tests that run on both::

    from gateway.testing.pytest_plugin import both_paths, engine_path  # noqa: F401

    def pytest_generate_tests(metafunc):
        if metafunc.definition.path.name.startswith(("test_engine", "test_device")):
            both_paths(metafunc)           # test_x[compiled] and test_x[pure]

On the ``pure`` path the fixture sets :data:`gateway.kernel.compiled` to ``None`` for the test
(every pipe, table and bridge made during it is the reference's: the kernel is read when they
are made) and ``GATEWAY_NO_EXTENSIONS=1`` in the environment, so the processes the test starts
run the reference too. Any other test gets the path the process runs, unchanged. Where the
kernel is not built there is one path, ``pure``; ``GATEWAY_TEST_PATHS=compiled`` (or ``pure``)
keeps one of the two (CI's runs on the other Pythons, .ci/pythons.sh, keep the compiled one).

A test that pytest-timeout ends shows, after the stacks of its threads, the coroutine stack of
every task of the event loop it was running (:func:`dump_tasks`): a test stuck on an
``await`` is otherwise seen only as a loop waiting in ``select``.
"""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Iterator
from typing import Any

import pytest

from gateway import kernel

#: the paths a test on both runs on here: the compiled one only where the kernel is built, and
#: only those GATEWAY_TEST_PATHS names where it is set
PATHS: tuple[str, ...] = tuple(
    p for p in (("compiled", "pure") if kernel.compiled is not None else ("pure",))
    if p in os.environ.get("GATEWAY_TEST_PATHS", "compiled,pure").split(","))


@pytest.fixture(autouse=True)
def engine_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """``compiled`` or ``pure``: the path this test runs on (see the module's docstring)."""
    path = getattr(request, "param", kernel.IMPLEMENTATION)
    if path == kernel.IMPLEMENTATION:
        yield path
        return
    if path != "pure":
        raise pytest.UsageError(f"engine_path: {path!r} is not built here (paths: {PATHS})")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernel, "compiled", None)
        mp.setattr(kernel, "IMPLEMENTATION", "pure")
        mp.setenv("GATEWAY_NO_EXTENSIONS", "1")
        yield path


def both_paths(metafunc: pytest.Metafunc) -> None:
    """Run this test function on every path of :data:`PATHS` (ids ``compiled`` and ``pure``);
    none left (GATEWAY_TEST_PATHS naming no path built here) is an error, not a skip."""
    if not PATHS:
        raise pytest.UsageError(
            f"GATEWAY_TEST_PATHS={os.environ.get('GATEWAY_TEST_PATHS')!r} leaves no engine path "
            f"to run (compiled, pure; the kernel is {kernel.IMPLEMENTATION} here)")
    metafunc.parametrize("engine_path", PATHS, indirect=True)


#: at most this many places a task waits at are shown (a test of 20,000 tasks once wrote 10 MB)
MAX_PLACES = 32


def dump_tasks(terminal: Any) -> None:
    """Write the stack of every task of the event loop running in this thread (none: nothing)
    to ``terminal`` (pytest's TerminalWriter): what each coroutine awaits. Tasks waiting at the
    same place (the same frames) are shown once with their count, :data:`MAX_PLACES` places at
    most; a task that cannot be shown is named with why (the timeout is still reported)."""
    loop = asyncio.events._get_running_loop()
    if loop is None:
        return
    places: dict[tuple[tuple[str, int], ...], list[asyncio.Task[Any]]] = {}
    for task in sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name()):
        try:
            place = tuple((f.f_code.co_filename, f.f_lineno) for f in task.get_stack(limit=8))
        except Exception:  # noqa: BLE001 - shown alone, with why (below)
            place = (("", id(task)),)
        places.setdefault(place, []).append(task)
    for tasks in list(places.values())[:MAX_PLACES]:
        task, more = tasks[0], len(tasks) - 1
        out = io.StringIO()
        try:
            task.print_stack(limit=8, file=out)
        except Exception as exc:  # noqa: BLE001 - the report goes on
            out.write(f"(its stack cannot be shown: {exc!r})\n")
        also = f", and {more} more task(s) waiting there" if more else ""
        terminal.sep("~", title=f"Task {task.get_name()} ({task.get_coro()!r:.80}){also}")
        terminal.write(out.getvalue())
    if len(places) > MAX_PLACES:
        terminal.sep("~", title=f"{len(places) - MAX_PLACES} more place(s) tasks wait at, "
                                "not shown")


def _with_tasks() -> None:
    """pytest-timeout's stack dump (its signal method runs it on the test's own thread)
    followed by :func:`dump_tasks`."""
    try:
        import pytest_timeout
    except ImportError:  # (the plugin is not installed: no timeouts to explain)
        return
    threads = pytest_timeout.dump_stacks
    if getattr(threads, "with_tasks", False):
        return

    def dump_stacks(terminal: Any) -> None:
        threads(terminal)
        dump_tasks(terminal)

    dump_stacks.with_tasks = True  # type: ignore[attr-defined]
    pytest_timeout.dump_stacks = dump_stacks


_with_tasks()

__all__ = ["MAX_PLACES", "PATHS", "both_paths", "dump_tasks", "engine_path"]
