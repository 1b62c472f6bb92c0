"""gateway.tools.harness.prometheus: the tools' one Prometheus text reader."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from gateway.tools.harness.prometheus import parse, series_name, total


def _text() -> str:
    reg = CollectorRegistry()
    c = Counter("gateway_forwarded_messages", "forwarded", ["bridge", "direction"], registry=reg)
    c.labels("a", "request").inc(3)
    c.labels("a", "reply").inc(2)
    c.labels("b", "reply").inc(5)
    Gauge("gateway_pending_tokens", "pending", registry=reg).set(7)
    return generate_latest(reg).decode()


def test_parse_keys_samples_by_exposed_name_and_labels() -> None:
    series = parse(_text())
    key = ("gateway_forwarded_messages_total", frozenset({("bridge", "a"), ("direction", "reply")}))
    assert series[key] == 2.0
    assert series[("gateway_pending_tokens", frozenset())] == 7.0


def test_total_sums_the_samples_whose_labels_include_the_given_ones() -> None:
    series = parse(_text())
    assert total(series, "gateway_forwarded_messages_total") == 10.0
    assert total(series, "gateway_forwarded_messages_total", direction="reply") == 7.0
    assert total(series, "gateway_forwarded_messages_total", bridge="a") == 5.0
    assert total(series, "gateway_forwarded_messages_total", bridge="zzz") is None
    assert total(series, "no_such_metric") is None


def test_series_name_writes_the_exposition_spelling() -> None:
    assert series_name(("x_total", frozenset({("b", "2"), ("a", "1")}))) == 'x_total{a="1",b="2"}'
    assert series_name(("g", frozenset())) == "g"


def test_text_that_is_not_prometheus_fails_loudly() -> None:
    with pytest.raises(ValueError):
        parse("this is { not prometheus\n")
