"""gateway.supervisor: the READY line's one codec (written by the supervisor and the parent of
``--workers``, read by the workers' parent and the tools' gateway launcher)."""

from __future__ import annotations

import pytest

from gateway.supervisor import READY_FIELDS, parse_ready, ready_line


def test_ready_line_writes_the_fields_in_order_and_leaves_out_none() -> None:
    assert ready_line(back="sp+tcp://127.0.0.1:2", front="zmq+tcp://127.0.0.1:1") == \
        "READY front=zmq+tcp://127.0.0.1:1 back=sp+tcp://127.0.0.1:2"
    line = ready_line(workers=3, metrics="127.0.0.1:9100", name="a", back="b", front="f")
    assert line == "READY front=f back=b name=a metrics=127.0.0.1:9100 workers=3"
    assert ready_line(front="f", back="b", name=None, metrics=None) == "READY front=f back=b"


def test_parse_ready_reads_what_ready_line_writes() -> None:
    fields = {"front": "zmq+tcp://127.0.0.1:5555", "back": "sp+ipc:///tmp/x.sock?a=1",
              "name": "zmq-to-nng", "metrics": "127.0.0.1:9100", "workers": "2",
              "control": "zmq+tcp://127.0.0.1:7001", "capture": "zmq+tcp://127.0.0.1:7002"}
    assert list(fields) == list(READY_FIELDS)
    assert parse_ready(ready_line(**fields)) == fields
    assert parse_ready(ready_line(**fields) + "\n") == fields


@pytest.mark.parametrize("line", ["", "\n", "ready front=x", "READYfront=x", "gateway: error: x"])
def test_parse_ready_says_none_for_other_lines(line: str) -> None:
    assert parse_ready(line) is None


def test_ready_line_refuses_an_unknown_field() -> None:
    with pytest.raises(ValueError, match="bogus"):
        ready_line(front="f", back="b", bogus="x")
