"""The interop tests' one rule beyond pytest's: the native engine against the real libraries
runs on both engine paths, the compiled kernel and the pure-Python reference, in this one
process (:mod:`gateway.testing.pytest_plugin`; ids ``[compiled]`` and ``[pure]``). The rest
runs on the path the process has; CI runs this whole folder once more on the pure path
(.ci/run)."""

from __future__ import annotations

import pytest

from gateway.testing.pytest_plugin import both_paths, engine_path  # noqa: F401 (the fixture)

#: the native engine's sockets against libzmq, nng and nanomsg
BOTH_PATHS = ("test_engine_",)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.path.name.startswith(BOTH_PATHS):
        both_paths(metafunc)
