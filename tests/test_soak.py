"""``gateway.tools.soak``: its judgement (flatness, the books) on made-up figures, its config,
and a short real run through every code path (peers, probe, restarts, reloads, summary). The
soak itself is ``make soak``, never a timed test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway import config
from gateway.tools import soak

METRICS = """\
# TYPE gateway_forwarded_messages_total counter
gateway_forwarded_messages_total{bridge="rr-zmq-sp",direction="reply"} 95.0
gateway_forwarded_messages_total{bridge="rr-sp-zmq",direction="reply"} 50.0
gateway_forwarded_messages_total{bridge="pubsub",direction="reply"} 10.0
# TYPE gateway_dropped_messages_total counter
gateway_dropped_messages_total{bridge="rr-zmq-sp",reason="backend-lost"} 5.0
gateway_dropped_messages_total{bridge="rr-zmq-sp",reason="hwm"} 0.0
gateway_dropped_messages_total{bridge="pipeline",reason="shutdown"} 1.0
# TYPE gateway_socket_dropped_messages_total counter
gateway_socket_dropped_messages_total{reason="hwm"} 2.0
"""


def test_durations() -> None:
    assert soak.duration("90") == soak.duration("90s") == 90
    assert soak.duration("30m") == 1800 and soak.duration("1h") == 3600


def test_slope_is_per_hour() -> None:
    assert soak.slope_per_hour([(0, 10.0), (1800, 11.0), (3600, 12.0)]) == pytest.approx(2.0)
    assert soak.slope_per_hour([(5, 3.0)]) == 0.0


def _samples(rss: list[float]) -> list[dict[str, object]]:
    return [{"t": 10.0 * i, "extra": i % 4 == 1, "rss_mib": r, "fds": 30 + 5 * (i % 4 == 1),
             "threads": 2, "tasks": 31, "cells": 279} for i, r in enumerate(rss)]


def test_flat_series_pass_and_a_leak_does_not() -> None:
    steady = soak.flatness(_samples([40.0 + 0.01 * (i % 3) for i in range(60)]), warmup=30)
    assert all(f["flat"] for f in steady.values()), steady
    assert steady["fds"]["end"] == 30  # judged without the samples of the extra bridge
    leaking = soak.flatness(_samples([40.0 + 0.5 * i for i in range(60)]), warmup=30)
    assert not leaking["rss_mib"]["flat"]
    assert leaking["rss_mib"]["slope_per_hour"] == pytest.approx(180.0)


def test_books_balance_with_the_gateway_counters_and_catch_a_loss() -> None:
    load = {"rr-zmq-sp": {"sent": 100, "ok": 95, "lost": 5},
            "rr-sp-zmq": {"sent": 51, "ok": 50, "lost": 1},
            "pipeline": {"sent": 41}, "pubsub": {"subscribers": 2, "received": 18}}
    books = soak.books(METRICS, load, published=10, pulled=40)
    assert books["rr-zmq-sp"]["accounted"]  # 5 lost, 5 counted backend-lost
    assert not books["rr-sp-zmq"]["accounted"]  # 1 lost that nobody counted
    assert books["pipeline"]["accounted"]  # 41 = 40 pulled + 1 counted
    assert books["pubsub"]["accounted"]  # 10 x 2 = 18 received + 2 counted at the XPUB


def test_the_config_is_one_the_gateway_accepts(tmp_path: Path) -> None:
    ports = {k: 10_000 + i for i, k in enumerate(
        ("f1", "f2", "f3", "f4", "s1", "s2", "s3", "s4", "metrics"))}
    for extra in (None, "extra"):
        path = tmp_path / "gateway.toml"
        soak.write_config(path, ports, extra)
        loaded = config.load(str(path))
        assert [b.name for b in loaded.bridges] == ["rr-zmq-sp", "rr-sp-zmq", "pubsub",
                                                     "pipeline", *([extra] if extra else [])]


@pytest.mark.timeout(120)
def test_a_short_soak_restarts_reloads_and_balances_its_books(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    rc = soak.main(["--duration", "14s", "--restart", "5", "--reload", "3", "--sample", "1",
                    "--out", str(tmp_path), "--clients", "2", "--life", "3"])
    text = capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["restarts"] == 2 and summary["reloads"] == 4, text
    assert summary["exit_code"] == 0
    assert all(b["accounted"] for b in summary["books"].values()), text
    assert all(s["sent"] > 0 for s in summary["books"].values()), text
    assert summary["flatness"]["tasks"]["end"] > 0  # the probe counted the loop's tasks
    assert (tmp_path / "samples.csv").read_text().count("\n") >= 10
    assert rc == (0 if summary["ok"] else 1)
    assert "accounted" in text
