"""The C allocator's thresholds for a gateway process (glibc's malloc), set once at start-up.

A message of more than a few KiB is a Python ``bytes`` or ``bytearray`` that glibc's malloc
serves from the heap's top (or, past ``M_MMAP_THRESHOLD``, from a mapping of its own). With
glibc's defaults each free of such a block gives its pages back to the kernel (``brk`` shrinks
past ``M_TRIM_THRESHOLD``, 128 KiB; a mapping is ``munmap``-ed), and the next message faults
them in again, zeroed: at 64 KiB request-reply through the gateway, page faults, ``brk`` and
``munmap`` were ~40 % of the process's CPU (perf, issue 36). Keeping up to :data:`THRESHOLDS`
of freed memory for the next message ends that churn; the process's memory is still bounded by
what its bounded buffers hold at their peak, plus that much.

Only the CLI's bridge processes do this (``gateway.cli``, before the loop runs): a library
user's process, and the bench's own Python peers, keep the allocator as their owner set it. An operator's own ``GLIBC_TUNABLES`` with
``glibc.malloc`` settings wins, and so does any of glibc's older ``MALLOC_*`` variables (the
env aliases of those tunables, :data:`OPERATOR_VARIABLES`): nothing is changed then.
"""

from __future__ import annotations

import ctypes
import os
import platform

#: mallopt(3) parameter -> value: keep up to 64 MiB free at the heap's top, and serve blocks up
#: to 32 MiB (glibc's largest mmap threshold on 64-bit machines) from the heap
THRESHOLDS = {"M_TRIM_THRESHOLD": 64 << 20, "M_MMAP_THRESHOLD": 32 << 20}
#: <malloc.h>'s numbers for those parameters
_PARAMETER = {"M_TRIM_THRESHOLD": -1, "M_MMAP_THRESHOLD": -3}

#: glibc's environment variables for its malloc tunables (the env aliases of
#: ``glibc.malloc.*`` in glibc's elf/dl-tunables.list), which glibc still reads
OPERATOR_VARIABLES = ("MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_CHECK_",
                      "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_PERTURB_",
                      "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_")

_done: str | None = None


def tune() -> str:
    """Set :data:`THRESHOLDS` once per process; what was done, as a reason word: ``tuned``,
    ``operator`` (GLIBC_TUNABLES or a MALLOC_* variable sets malloc), ``not-glibc``, or
    ``refused`` (mallopt said no)."""
    global _done
    if _done is None:
        _done = _tune()
    return _done


def _tune() -> str:
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", "") or any(
            name in os.environ for name in OPERATOR_VARIABLES):
        return "operator"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "not-glibc"
    libc = ctypes.CDLL(None)  # (the process's own: glibc is loaded; no ldconfig run)
    said = [libc.mallopt(_PARAMETER[name], value) for name, value in THRESHOLDS.items()]
    return "tuned" if all(r == 1 for r in said) else "refused"


__all__ = ["OPERATOR_VARIABLES", "THRESHOLDS", "tune"]
