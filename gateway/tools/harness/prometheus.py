"""The one Prometheus text reader of the tools and tests: fetch ``/metrics`` and read it with
prometheus_client's own parser (``prometheus_client.parser``), so text that is not valid
exposition format fails loudly instead of being half read."""

from __future__ import annotations

import urllib.request

#: one sample: (sample name, its labels as a frozenset of (name, value) pairs)
Series = tuple[str, frozenset[tuple[str, str]]]


def scrape(address: str, timeout: float = 5.0) -> str:
    """The text of ``http://ADDRESS/metrics`` (raises ``OSError`` when it cannot be had, and
    ``ValueError`` when it is not Prometheus text)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as r:
        if r.status != 200 or not r.headers["Content-Type"].startswith("text/plain"):
            raise ValueError(f"http://{address}/metrics: {r.status} {r.headers['Content-Type']}")
        return str(r.read().decode())


def parse(text: str) -> dict[Series, float]:
    """Every sample of a Prometheus text: ``{(sample name, labels): value}`` (sample names as
    exposed: ``..._total`` for counters, ``..._bucket``/``_count``/``_sum`` for histograms)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[Series, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = float(s.value)
    return out


def total(series: dict[Series, float], name: str, **labels: str) -> float | None:
    """The sum of the samples named ``name`` whose labels include ``labels``; None when there
    is no such sample."""
    want = set(labels.items())
    values = [v for (n, lab), v in series.items() if n == name and want <= lab]
    return sum(values) if values else None


def series_name(key: Series) -> str:
    """``name{label="value",...}`` (labels sorted), as the exposition format writes a series."""
    name, labels = key
    if not labels:
        return name
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels)) + "}"
