"""The unit tests' rules beyond pytest's: the hot path's modules run on both engine paths,
the compiled kernel and the pure-Python reference, in this one process
(:mod:`gateway.testing.pytest_plugin`; ids ``[compiled]`` and ``[pure]``); and no hypothesis
test has a deadline (a first example that took 1.9 s on a loaded machine, 0.06 s when
replayed, failed the run as "flaky": a test never races the machine)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hypothesis import settings

from gateway.testing.pytest_plugin import both_paths, engine_path  # noqa: F401 (the fixture)

settings.register_profile("gateway", deadline=None)
settings.load_profile("gateway")

#: the modules of the engine, the wires, the device and the tables the kernel has twins of
BOTH_PATHS = ("test_engine", "test_device", "test_wire", "test_inflight", "test_envelope",
              "test_ledger", "test_patterns")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.path.name.startswith(BOTH_PATHS):
        both_paths(metafunc)


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A local TCP port with a listener on it for the test's duration (taken: in use)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]
