"""The kernel's security review (of 1ceb8db, findings F1-F6), each finding's reproduction as a
test: the sanitizer build checks indexes, values Python code can set go to the reference (or
raise) instead of being cast blindly, each kernel keeps its buckets, a size limit past 2**62 is
refused by the settings and clamped by the kernel, a pipe whose wire is not the translator's is
the reference's, and the pending tables and the size limit count bytes. ``.ci/sanitize.sh``
runs this module against the ASan/UBSan build too.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import test_kernel as T

from gateway import kernel
from gateway.engine import core

ROOT = Path(__file__).resolve().parents[1]
needs_kernel = T.needs_kernel


def _outcome(go: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """What ``go`` returns, or the name of what it raised."""
    try:
        return asyncio.run(go())
    except Exception as exc:  # noqa: BLE001 - compared by the caller
        return type(exc).__name__


async def _rig(front: str, back: str, compiled: bool, **kw: Any) -> T.Rig:
    core._RUNNING_PIPE_IDS[0] = 100
    rig = T.Rig(front, back, compiled, **kw)
    await rig.open(clients=1, servers=1)
    return rig


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


# -- F1: the sanitizer build checks Cython's indexes -------------------------------------------
def _generated_c(tmp_path: Path, sanitize: bool) -> str:
    """gateway/_kernel.c as setup.py generates it (cythonize only, no compiler)."""
    pytest.importorskip("Cython")
    (tmp_path / "gateway").mkdir()
    shutil.copy(ROOT / "setup.py", tmp_path)
    for src in (ROOT / "gateway").glob("_kernel*.p*"):
        shutil.copy(src, tmp_path / "gateway")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GATEWAY_SANITIZE", "GATEWAY_NO_EXTENSIONS", "LD_PRELOAD")}
    if sanitize:
        env["GATEWAY_SANITIZE"] = "1"
    subprocess.run([sys.executable, "setup.py", "-q", "--name"], cwd=tmp_path, env=env,
                   check=True, capture_output=True, timeout=300)
    return (tmp_path / "gateway" / "_kernel.c").read_text()


#: the round robin's ``picks[idx]`` (_Dests.pick), as Cython writes it without and with checks
UNCHECKED = "__Pyx_PyList_GET_ITEM(__pyx_v_picks, __pyx_v_idx)"
CHECKED = "__Pyx_GetItemInt_List(__pyx_v_picks, __pyx_v_idx, Py_ssize_t, 1, PyLong_FromSsize_t, 1, 1, 1"


@pytest.mark.parametrize("sanitize", [True, False], ids=["sanitize", "normal"])
def test_setup_switches_the_index_checks_on_only_for_the_sanitizer_build(
        tmp_path: Path, sanitize: bool) -> None:
    """F1: the .pyx header's directives used to beat setup.py's, so GATEWAY_SANITIZE=1 built
    the kernel without bounds checks; the normal build keeps them off (its speed)."""
    c = _generated_c(tmp_path, sanitize)
    assert (CHECKED in c, UNCHECKED in c) == (sanitize, not sanitize)


def test_the_kernel_header_leaves_the_index_checks_to_setup() -> None:
    header = [line for line in (ROOT / "gateway" / "_kernel.pyx").read_text().splitlines()
              if line.startswith("# cython:")]
    assert header and not any(d in line for line in header
                              for d in ("boundscheck", "wraparound", "initializedcheck"))


@needs_kernel
def test_the_sanitizer_build_checks_indexes() -> None:
    """Run by .ci/sanitize.sh (GATEWAY_SANITIZE set): an index past the end is an IndexError,
    a negative one counts from the end (wraparound)."""
    if not os.environ.get("GATEWAY_SANITIZE"):
        pytest.skip("the normal build does not check indexes (.ci/sanitize.sh runs this)")
    assert kernel.compiled is not None
    with pytest.raises(IndexError):
        kernel.compiled._index_probe([1, 2, 3], 13)
    assert kernel.compiled._index_probe([1, 2, 3], -1) == 3
