"""One harness under atheris (libFuzzer), in a process of its own:
``python -m fuzz._atheris NAME [libFuzzer flags and corpus directories]``.

The product's modules (``gateway``, ``gateway_plugins``) and the libraries the harnesses drive
(``wsproto``, ``h11``) are imported inside ``atheris.instrument_imports``, so libFuzzer sees
their coverage; the harness code itself is not instrumented (its branches are not the
product's). The kernel harnesses (``fuzz.SANITIZED``) instrument no Python: libFuzzer follows
the edges of the compiled kernel, built with its counters (``fuzz/_asan.py``); the reference's
Python, instrumented too, made each input four to five times slower. ``python -m fuzz run``
starts this; see ``fuzz/README.md``.
"""

from __future__ import annotations

import importlib
import os
import sys

import atheris

from fuzz import HARNESSES, SANITIZED

INSTRUMENTED = ["gateway", "gateway_plugins", "wsproto", "h11"]


def main() -> None:
    name = sys.argv[1]
    if name in SANITIZED:  # libFuzzer follows the compiled kernel's own edges (fuzz/_asan.py)
        module = importlib.import_module(HARNESSES[name][0])
    else:
        with atheris.instrument_imports(include=INSTRUMENTED):
            module = importlib.import_module(HARNESSES[name][0])
    one_input = module.one_input
    from gateway.logging import configure

    configure(level="critical")  # (a line for each pipe a run closes would swamp the log)
    if name in SANITIZED and os.environ.get("FUZZ_SANITIZED"):
        from fuzz import _asan

        print(_asan.verify(), flush=True)  # (or SystemExit: not the sanitizer build)

    def test_one_input(data: bytes) -> None:
        one_input(data)

    # libFuzzer runs argv[0] again for -merge=1: a launcher script (python -m fuzz run makes
    # one), since this file is not a program of its own
    argv0 = os.environ.get("FUZZ_ARGV0", sys.argv[0])
    atheris.Setup([argv0, *sys.argv[2:]], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
