"""gateway.tools.harness.peers.remote and peerd: the matrix's peers of other generations and
runtimes (their table, finding interpreters, saying why one cannot run) and the peer program's
command loop (driven here with a stand-in driver: the real libraries are in the matrix)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.tools.harness.peers import IMPLEMENTATIONS as PEER_CLASSES
from gateway.tools.harness.peers import peerd, remote
from gateway.tools.matrix.impls import IMPLEMENTATIONS


def test_every_remote_implementation_has_a_runtime_and_a_row() -> None:
    remote_impls = {n for n, i in IMPLEMENTATIONS.items() if i.runtime == "remote"}
    assert remote_impls == set(remote.RUNTIMES)
    assert remote_impls == {n for n, (mod, _) in PEER_CLASSES.items() if mod == "remote"}
    for rt in remote.RUNTIMES.values():
        assert rt.driver in peerd.DRIVERS
        assert rt.wire in IMPLEMENTATIONS[rt.impl].wires
        assert rt.what and (rt.packages or rt.apt), rt.impl  # how it gets onto a machine


def test_find_python(tmp_path: Path) -> None:
    assert remote.find_python("self") == sys.executable
    assert remote.find_python(sys.executable) == sys.executable
    assert remote.find_python(str(tmp_path / "no-such-python")) is None
    assert remote.find_python("python2.1") is None  # neither on PATH nor among pyenv's


def test_a_missing_runtime_is_unavailable_with_the_reason(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_PEERS", str(tmp_path))
    monkeypatch.setattr(remote, "_STATUS", {})
    why = remote.unavailable("nng-2.0")
    assert why is not None and str(tmp_path / "nng-2.0") in why and "install" in why
    monkeypatch.setitem(remote.RUNTIMES, "omq", remote.Runtime(
        "omq", "zmq", "pyomq", sys.executable, apt="python3-omq-that-is-not"))
    why = remote.unavailable("omq")
    assert why is not None and "cannot import pyomq" in why and "apt-get install" in why
    with pytest.raises(remote.Unavailable, match="nng-2.0"):
        remote.RemotePeer("nng-2.0", "REQ", "sp", "client", str(tmp_path))


class Echo(peerd.Driver):
    """A stand-in socket: what is sent comes back on the next receive."""

    def __init__(self, kind: str, side: str, options: dict[str, Any]) -> None:
        super().__init__(kind, side, options)
        self.box: list[list[bytes]] = []
        self.topics = [bytes.fromhex(t) for t in options.get("topics", [])]

    def bind(self, url: str) -> str:
        return url.replace(":0", ":5555")

    def connect(self, url: str) -> None:
        self.url = url

    def send(self, frames: list[bytes], timeout: float) -> bool:
        self.box.append(frames)
        return True

    def recv(self, timeout: float) -> list[bytes] | None:
        return self.box.pop(0) if self.box else None

    def subscribe(self, topic: bytes, on: bool) -> None:
        (self.topics.append if on else self.topics.remove)(topic)


def test_peerd_answers_each_command_line(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(peerd.DRIVERS, "echo", Echo)
    monkeypatch.setattr(peerd, "version", lambda driver: {"library": "echo 1"})
    lines = [{"op": "open", "sock": 1, "kind": "REQ", "side": "client",
              "options": {"topics": [b"a.".hex()]}},
             {"op": "bind", "sock": 1, "url": "tcp://127.0.0.1:0"},
             {"op": "request", "sock": 1, "frames": [b"hi".hex()], "timeout": 1},
             {"op": "send", "sock": 1, "data": b"x".hex()},
             {"op": "drain", "sock": 1, "quiet": 0.01, "timeout": 1},
             {"op": "unsubscribe", "sock": 1, "topic": b"a.".hex()},
             {"op": "evidence", "sock": 1},
             {"op": "bogus", "sock": 1},
             {"op": "close", "sock": 1},
             {"op": "seen", "sock": 1}]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(json.dumps(x) + "\n" for x in lines)))
    assert peerd.main(["peerd", "echo"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == 'READY {"library": "echo 1"}'
    results = [json.loads(line.removeprefix("RESULT ")) for line in out[1:]]
    assert results[0] == {} and results[1] == {"url": "tcp://127.0.0.1:5555"}
    assert results[2] == {"frames": [b"hi".hex()]}  # sent, then received back
    assert results[4] == {"messages": [b"x".hex()]}
    assert results[6] == {"evidence": None}
    assert "unknown op 'bogus'" in results[7]["error"]
    assert results[8] == {} and "KeyError" in results[9]["error"]  # closed: no such socket
