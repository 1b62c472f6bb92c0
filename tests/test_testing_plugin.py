"""gateway.testing.pytest_plugin: what a test that times out leaves behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

STUCK = '''
import asyncio

import pytest

from gateway.testing.pytest_plugin import engine_path  # noqa: F401


@pytest.mark.timeout(1)
def test_stuck() -> None:
    async def never() -> None:
        await asyncio.Event().wait()  # the await that never returns

    async def main() -> None:
        await asyncio.create_task(never(), name="the-stuck-one")

    asyncio.run(main())
'''


def _timed_out(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    """``source`` run as a test file by pytest in a process of its own; it failed."""
    (tmp_path / "test_it.py").write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path / "test_it.py")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    return done


def test_a_timed_out_test_shows_what_each_of_its_tasks_awaits(tmp_path: Path) -> None:
    """CI once saw a test hang with only its threads' stacks and a loop in ``select``: the
    coroutine stuck on an ``await`` (a refused client's send) had to be found by a stress
    run. The stack of every task of the test's loop is now in the timeout's report."""
    done = _timed_out(tmp_path, STUCK)
    assert "Timeout (>1.0s)" in done.stdout
    assert "Task the-stuck-one" in done.stdout
    assert "await asyncio.Event().wait()  # the await that never returns" in done.stdout


MANY = '''
import asyncio

import pytest

from gateway.testing.pytest_plugin import engine_path  # noqa: F401


@pytest.mark.timeout(1)
def test_many() -> None:
    async def main() -> None:
        await asyncio.gather(*(asyncio.sleep(3600) for _ in range(5000)))

    asyncio.run(main())
'''


def test_tasks_waiting_at_one_place_are_shown_once_with_their_count(tmp_path: Path) -> None:
    """A timed-out test of 5,000 tasks asleep at one line shows that place once, with the
    count, not 5,000 stacks (20,000 once wrote 10 MB into the report)."""
    done = _timed_out(tmp_path, MANY)
    assert "Timeout (>1.0s)" in done.stdout
    assert done.stdout.count("and 4999 more task(s) waiting there") == 1, done.stdout[-3000:]
    assert len(done.stdout) < 50_000
