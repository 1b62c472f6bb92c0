"""gateway.tools.harness.procs: the helpers the suites and the matrix share."""

from __future__ import annotations

import pytest

from gateway.tools.harness.procs import port_of


@pytest.mark.parametrize(("url", "port"), [
    ("@zmq+tcp://127.0.0.1:5555?backend=native", 5555),
    ("tcp://127.0.0.1:6000", 6000),
    ("127.0.0.1:46177", 46177),  # pynng's listener.local_address
    ("[::1]:7000", 7000),
])
def test_port_of(url: str, port: int) -> None:
    assert port_of(url) == port


def test_port_of_without_a_port() -> None:
    with pytest.raises(ValueError, match="no port"):
        port_of("ipc:///tmp/x.sock")
