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
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         timeout=60, env={**os.environ, **env}, check=True).stdout
    return dict(json.loads(out))


def test_tuned_a_freed_large_block_is_kept_for_the_next() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    got = _probe(**env, GLIBC_TUNABLES="")
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
