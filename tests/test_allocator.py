"""The CLI process's allocator thresholds (gateway.engine.allocator): a large block freed and
allocated again costs no page faults once tuned, and the operator's GLIBC_TUNABLES wins."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from typing import Any

import pytest

from gateway.engine import allocator

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="glibc's mallopt")

#: in a fresh interpreter: minor page faults of 200 rounds of four 70,000-byte blocks (a read's
#: worth of 64 KiB messages) made, touched and freed, before and after tune() (what tune() said)
_PROBE = """
import json, resource, sys
from gateway.engine import allocator

def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(200):
        blocks = [bytearray(70_000) for _ in range(4)]  # zeroed: every page touched
        del blocks
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

untuned = faults()
said = allocator.tune()
print(json.dumps({"said": said, "again": allocator.tune(), "untuned": untuned,
                  "tuned": faults()}))
"""


def _probe(**env: str) -> dict[str, Any]:
    """The probe's figures in this environment with the operator's malloc settings unset
    (a CI runner may set some: MALLOC_ARENA_MAX is common in containers), then ``env``."""
    unset = {k: v for k, v in os.environ.items()
             if k != "GLIBC_TUNABLES" and k not in allocator.OPERATOR_VARIABLES}
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         timeout=60, env={**unset, **env}, check=True).stdout
    return dict(json.loads(out))


def test_tuned_a_freed_large_block_is_kept_for_the_next() -> None:
    got = _probe()
    assert got["said"] == got["again"] == "tuned"
    # glibc's defaults: the heap's top (280 KB > the 128 KiB trim threshold) is given back at
    # each round's last free and faulted in again (~27 pages a round; 5,500 seen)
    assert int(got["untuned"]) > 2000, got
    # tuned: faulted in once, then reused (55 seen)
    assert int(got["tuned"]) < 500, got


def test_the_operators_glibc_tunables_win() -> None:
    got = _probe(GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072")
    assert got["said"] == "operator"
    assert int(got["tuned"]) > 2000, got  # glibc's own, as said


@pytest.mark.parametrize("name, value", [("MALLOC_TRIM_THRESHOLD_", "131072"),
                                         ("MALLOC_MMAP_THRESHOLD_", "65536")])
def test_the_operators_malloc_environment_variables_win(name: str, value: str) -> None:
    """glibc still reads its older MALLOC_*_ variables (the env aliases of its glibc.malloc
    tunables): an operator who set one chose malloc's settings as much as with
    GLIBC_TUNABLES, and the gateway must not override them."""
    got = _probe(**{name: value})
    assert got["said"] == "operator", got
    assert int(got["tuned"]) > 2000, got  # glibc's own (the operator's), as said
