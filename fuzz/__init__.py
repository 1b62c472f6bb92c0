"""Fuzzing harnesses for the gateway's parsers (not installed; run from the repository root).

Every harness is a module of this package with ``NAME`` and ``one_input(data, strict=False)``:
bytes in, an exception out when the product broke a rule (``fuzz._data.Finding``) or crashed.
The same function runs under atheris (coverage-guided, libFuzzer), under hypothesis where
atheris is not installed, and in ``tests/test_fuzz_corpus.py``, which replays every input kept
in ``fuzz/corpus/<harness>/``. ``python -m fuzz --help`` runs them; ``fuzz/README.md`` says how.
"""

from __future__ import annotations

#: harness name -> (module, the longest input worth trying)
HARNESSES: dict[str, tuple[str, int]] = {
    "zmtp_codec": ("fuzz.zmtp_codec", 4096),
    "sp_codec": ("fuzz.sp_codec", 4096),
    "curve": ("fuzz.curve", 4096),
    "plain": ("fuzz.plain", 2048),
    "ws": ("fuzz.ws", 8192),
    "config": ("fuzz.config", 2048),
    "kernel_zmtp": ("fuzz.kernel_zmtp", 4096),
    "kernel_sp": ("fuzz.kernel_sp", 4096),
    "kernel_curve": ("fuzz.kernel_curve", 4096),
}
#: the harnesses of the compiled kernel: under atheris they run on its sanitizer build
#: (fuzz/_asan.py), in processes with the sanitizer's runtime preloaded, guided by the kernel's
#: own coverage (their Python is not instrumented: fuzz/_atheris.py)
SANITIZED = frozenset({"kernel_zmtp", "kernel_sp", "kernel_curve"})
