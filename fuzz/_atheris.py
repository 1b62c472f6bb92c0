"""One harness under atheris (libFuzzer), in a process of its own:
``python -m fuzz._atheris NAME [libFuzzer flags and corpus directories]``.

The product's modules (``gateway``, ``gateway_plugins``) and the libraries the harnesses drive
(``wsproto``, ``h11``) are imported inside ``atheris.instrument_imports``, so libFuzzer sees
their coverage; the harness code itself is not instrumented (its branches are not the
product's). ``python -m fuzz run`` starts this; see ``fuzz/README.md``.
"""

from __future__ import annotations

import importlib
import os
import sys

import atheris

from fuzz import HARNESSES

INSTRUMENTED = ["gateway", "gateway_plugins", "wsproto", "h11"]


def main() -> None:
    name = sys.argv[1]
    with atheris.instrument_imports(include=INSTRUMENTED):
        module = importlib.import_module(HARNESSES[name][0])
    one_input = module.one_input

    def test_one_input(data: bytes) -> None:
        one_input(data)

    # libFuzzer runs argv[0] again for -merge=1: a launcher script (python -m fuzz run makes
    # one), since this file is not a program of its own
    argv0 = os.environ.get("FUZZ_ARGV0", sys.argv[0])
    atheris.Setup([argv0, *sys.argv[2:]], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
