"""The unit tests' one rule beyond pytest's: the hot path's modules run on both engine paths,
the compiled kernel and the pure-Python reference, in this one process
(:mod:`gateway.testing.pytest_plugin`; ids ``[compiled]`` and ``[pure]``)."""

from __future__ import annotations

import pytest

from gateway.testing.pytest_plugin import both_paths, engine_path  # noqa: F401 (the fixture)

#: the modules of the engine, the wires, the device and the tables the kernel has twins of
BOTH_PATHS = ("test_engine", "test_device", "test_wire", "test_inflight", "test_envelope",
              "test_ledger", "test_patterns")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.path.name.startswith(BOTH_PATHS):
        both_paths(metafunc)
