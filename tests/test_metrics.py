"""gateway.metrics: the store and its exposition through prometheus_client."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.device.ledger import Ledger, clock
from gateway.metrics import BUCKETS, METRICS, SPECS, Histogram, Key, Registry


def _families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_every_metric_has_help_a_unit_and_counters_end_in_total() -> None:
    for name, spec in SPECS.items():
        assert spec.help.strip(), name
        assert name.startswith("gateway_")
        if spec.kind == "counter":
            assert name.endswith("_total"), name
        else:
            assert name.endswith(("_seconds", "_requests", "_tokens", "_peers", "_info",
                                  "_processes", "_prefixes", "_ratio")), name
    text = METRICS.render()
    for name in SPECS:
        assert f"# HELP {name} " in text, name


def test_label_values_are_escaped_and_the_text_parses() -> None:
    """A bridge name with quotes, a backslash and a newline: prometheus_client's own parser
    reads the scrape back (the hand-written exporter produced text it rejected)."""
    name = 'orders "eu"\\1\nnext'
    ledger = Ledger(name)
    ledger.dropped("hwm", "reply", "x")
    families = _families(METRICS.render())
    dropped = families["gateway_dropped_messages"]
    samples = {(s.labels.get("bridge"), s.labels.get("reason")): s.value
               for s in dropped.samples if s.name.endswith("_total")}  # type: ignore[attr-defined]
    assert samples[(name, "hwm")] == 1
    ledger.close()


def test_two_bridges_keep_their_own_gauges() -> None:
    a, b = Ledger(f"a-{uuid.uuid4().hex[:6]}"), Ledger(f"b-{uuid.uuid4().hex[:6]}")
    a.in_flight, b.in_flight = 3, 5
    fam = _families(METRICS.render())["gateway_in_flight_requests"]
    values = {s.labels["bridge"]: s.value for s in fam.samples}  # type: ignore[attr-defined]
    assert values[a.bridge] == 3 and values[b.bridge] == 5
    a.close()
    fam = _families(METRICS.render())["gateway_in_flight_requests"]
    assert a.bridge not in {s.labels["bridge"] for s in fam.samples}  # type: ignore[attr-defined]
    b.close()


def test_build_info() -> None:
    import zmq

    from gateway import __version__

    fam = _families(METRICS.render())["gateway_build_info"]
    (sample,) = fam.samples  # type: ignore[attr-defined]
    assert sample.value == 1
    assert sample.labels["version"] == __version__
    assert sample.labels["libzmq"] == zmq.zmq_version()
    assert sample.labels["pynng"]
    assert sample.labels["kernel"] in ("compiled", "pure")


def test_histogram_buckets_and_exposition() -> None:
    reg = Registry()
    hist = reg.histogram("gateway_hop_latency_seconds", bridge="h", direction="request")
    for seconds in (10e-6, 30e-6, 0.5, 5.0):
        hist.observe(seconds)
    assert hist.count == 4 and hist.counts[0] == 1 and hist.counts[1] == 1
    assert hist.counts[-1] == 1  # over the largest bucket: +Inf only
    fam = _families(reg.render())["gateway_hop_latency_seconds"]
    buckets = {s.labels["le"]: s.value for s in fam.samples  # type: ignore[attr-defined]
               if s.name.endswith("_bucket")}
    assert buckets["2.5e-05"] == 1 and buckets["1.0"] == 3 and buckets["+Inf"] == 4
    assert len(buckets) == len(BUCKETS) + 1


def test_histogram_observe_is_bisect() -> None:
    hist = Histogram()
    hist.observe(BUCKETS[3])  # on a bound: that bucket (le is inclusive)
    assert hist.counts[3] == 1


def test_undeclared_names_and_wrong_labels_are_errors() -> None:
    reg = Registry()
    with pytest.raises(KeyError, match="undeclared"):
        reg.inc("gateway_made_up_total")
    with pytest.raises(KeyError, match="takes labels"):
        reg.inc("gateway_pipes_closed_total", bridge="x")
    reg.inc("gateway_pipes_closed_total", reason="garbage")
    assert reg.get("gateway_pipes_closed_total", reason="garbage") == 1
    assert reg.total("gateway_pipes_closed_total") == 1


def test_cells_count_towards_their_key_everywhere() -> None:
    """A hot-path cell adds to its key's value in get, total, total_where and the scrape;
    two cells of one key (two bridges of one name across a reload) add up."""
    reg = Registry()
    reg.inc("gateway_forwarded_messages_total", 2, bridge="b", direction="request")
    one = reg.cell("gateway_forwarded_messages_total", bridge="b", direction="request")
    two = reg.cell("gateway_forwarded_messages_total", bridge="b", direction="request")
    other = reg.cell("gateway_forwarded_messages_total", bridge="b", direction="reply")
    one[0] += 3
    two[0] += 4
    other[0] += 1
    assert reg.get("gateway_forwarded_messages_total", bridge="b", direction="request") == 9
    assert reg.total("gateway_forwarded_messages_total") == 10
    assert reg.total_where("gateway_forwarded_messages_total", direction="reply") == 1
    samples = {s.labels["direction"]: s.value
               for s in _families(reg.render())["gateway_forwarded_messages"].samples
               if s.name.endswith("_total")}
    assert samples == {"request": 9.0, "reply": 1.0}
    fresh = reg.cell("gateway_unconfirmed_replies_total", bridge="c")
    assert fresh == [0]  # exported at zero before its first increment
    assert 'gateway_unconfirmed_replies_total{bridge="c"} 0.0' in reg.render()


def test_a_ledger_counts_through_cells() -> None:
    reg = Registry()
    ledger = Ledger("cells", reg)
    ledger.replies_confirmed = False
    ledger.request_forwarded(0.0)
    ledger.reply_forwarded(0.0)
    assert ledger.forwarded("request") == ledger.forwarded("reply") == 1
    assert reg.get("gateway_unconfirmed_replies_total", bridge="cells") == 1
    assert ledger.in_flight == 0


def test_a_released_cell_keeps_its_count_and_is_forgotten() -> None:
    """A bridge that closes folds its cells into the counters: the values stay, the cells go
    (a reload every few seconds must not grow the registry), the other owner's cell stays."""
    reg = Registry()
    old = Ledger("r", reg)
    old.request_forwarded(0.0)
    old.request_forwarded(0.0)
    old.reply_forwarded(0.0)
    keep = reg.cell("gateway_forwarded_messages_total", bridge="r", direction="request")
    keep[0] += 5
    old.close()
    old.close()  # twice: nothing counted twice
    assert reg.get("gateway_forwarded_messages_total", bridge="r", direction="request") == 7
    assert reg.get("gateway_forwarded_messages_total", bridge="r", direction="reply") == 1
    assert sum(len(c) for c in reg.cells.values()) == 1  # only `keep`
    for _ in range(50):  # a reload loop: the same bridge again and again
        ledger = Ledger("r", reg)
        ledger.reply_forwarded(0.0)
        ledger.close()
    assert reg.get("gateway_forwarded_messages_total", bridge="r", direction="reply") == 51
    assert sum(len(c) for c in reg.cells.values()) == 1


def test_a_scrape_during_a_release_counts_the_cell_exactly_once() -> None:
    """Counters are monotonic for Prometheus: a release that lands in the middle of a read
    (after the counters are copied, before the cells are) must wait for the read to end."""
    import threading

    reg = Registry()
    cell = reg.cell("gateway_forwarded_messages_total", bridge="s", direction="request")
    cell[0] += 3
    releasing: list[threading.Thread] = []

    class Cells(dict[Key, list[list[int]]]):
        def items(self) -> Any:
            if not releasing:  # the read is between its two copies: release now
                releasing.append(threading.Thread(target=reg.release, args=(cell,)))
                releasing[0].start()
                releasing[0].join(0.3)  # done at once unless the read holds it off
            return super().items()

    reg.cells = Cells(reg.cells)
    assert reg.total("gateway_forwarded_messages_total") == 3
    releasing[0].join(10)
    assert not releasing[0].is_alive()
    assert reg.total("gateway_forwarded_messages_total") == 3 and not reg.cells


def test_a_ledgers_latencies_are_exported_and_kept_when_it_closes() -> None:
    """A ledger's histograms are its tally's cells (the compiled twin's: C numbers), attached
    to the registry's histogram: a scrape shows them, a closed ledger's stay counted, and a
    reload loop attaches no more parts than the ledgers open."""
    reg = Registry()
    for _ in range(3):
        ledger = Ledger("h", reg)
        ledger.request_forwarded(clock())
        ledger.close()
        ledger.close()  # twice: nothing counted twice
    live = Ledger("h", reg)
    live.request_forwarded(clock())
    live.tally.req_counts[-1] += 2  # what a kernel adds in one read, past the largest bucket
    live.tally.req_total[0] += 10.0
    hist = reg.histogram("gateway_hop_latency_seconds", bridge="h", direction="request")
    assert hist.count == live.latency_count("request") == 6 and len(hist._parts) == 1

    def exposed() -> dict[str, float]:
        fam = _families(reg.render())["gateway_hop_latency_seconds"]
        return {s.labels["le"] if s.name.endswith("_bucket") else s.name: s.value
                for s in fam.samples  # type: ignore[attr-defined]
                if s.labels["direction"] == "request"}

    before = exposed()
    assert before["+Inf"] == 6 and before["1.0"] == 4
    assert 10.0 < before["gateway_hop_latency_seconds_sum"] < 11.0
    live.close()
    assert exposed() == before and not hist._parts
