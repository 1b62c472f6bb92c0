"""Metrics: plain counters on the hot path, exported through prometheus_client.

Every metric is declared once in :data:`SPECS` (type, help, labels); code increments a plain
``dict`` entry (one operation under the GIL, no lock, no label lookup), the per-message path a
cell (a one-item list: not even the key's hash), and a prometheus_client collector turns the
store into metric families at scrape time, so exposition, escaping of label values and the
text format are prometheus_client's::

    METRICS.inc("gateway_pipes_closed_total", reason="handshake-timeout")
    key = METRICS.declare("gateway_dropped_messages_total", bridge="orders", reason="hwm")
    METRICS.counters[key] += 1
    cell = METRICS.cell("gateway_forwarded_messages_total", bridge="orders", direction="request")
    cell[0] += 1                                # what the device's ledger does per message
    text = METRICS.render()                     # Prometheus text, via prometheus_client

Declared label sets are exported at zero from the start.
"""

from __future__ import annotations

import platform
import threading
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

Labels = tuple[tuple[str, str], ...]
Key = tuple[str, Labels]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    kind: str  # "counter", "gauge", "histogram"
    help: str
    labels: tuple[str, ...] = ()


#: Every metric the gateway exports. Names carry their unit; counters end in ``_total``.
SPECS: dict[str, MetricSpec] = {
    "gateway_forwarded_messages_total": MetricSpec(
        "counter", "Messages a bridge forwarded, by direction (request: front to back).",
        ("bridge", "direction")),
    "gateway_dropped_messages_total": MetricSpec(
        "counter", "Messages a bridge dropped, by reason (see docs: drop reasons).",
        ("bridge", "reason")),
    "gateway_hop_latency_seconds": MetricSpec(
        "histogram", "Time from receiving a message to handing it to the other side.",
        ("bridge", "direction")),
    "gateway_unconfirmed_replies_total": MetricSpec(
        "counter", "Replies a library front took but may still drop without a word (nng's raw "
        "rep, when a client's pipe queue is full); also counted as forwarded.", ("bridge",)),
    "gateway_in_flight_requests": MetricSpec(
        "gauge", "Requests forwarded to the back end and not yet answered or dropped.",
        ("bridge",)),
    "gateway_waiting_requests": MetricSpec(
        "gauge", "Requests waiting for a back-end peer: held in the gateway because the back "
        "end has no room, plus those in flight while it has no connected peer.", ("bridge",)),
    "gateway_backend_down_total": MetricSpec(
        "counter", "Outages of a bridge's back end: the times it was seen with no peer after "
        "having one (or had none a second after the start); its peers are looked at every "
        "0.2 s, so a shorter outage may go uncounted. Each logs backend.down, at most one line "
        "every 10 s per bridge.", ("bridge",)),
    "gateway_pending_tokens": MetricSpec(
        "gauge", "ZeroMQ envelopes parked in the token table, waiting for an SP reply.",
        ("bridge",)),
    "gateway_subscribed_prefixes": MetricSpec(
        "gauge", "Pub/sub bridges: prefixes the gateway holds at the publisher (the union of its "
        "subscribers' and the configured ones).", ("bridge",)),
    "gateway_peers": MetricSpec(
        "gauge", "Connected peers of a bridge side (-1: the backend cannot tell).",
        ("bridge", "side")),
    "gateway_proxy_forwarded_frames_total": MetricSpec(
        "counter", "Frames libzmq's own proxy forwarded (the proxy route cannot count messages).",
        ("bridge", "direction")),
    "gateway_proxy_forced_stops_total": MetricSpec(
        "counter", "libzmq proxies stopped by ending their context (stalled on a full backend).",
        ("bridge",)),
    "gateway_pipes_closed_total": MetricSpec(
        "counter", "Native pipes closed because of bad input, a timeout or a refused peer.",
        ("reason",)),
    "gateway_auth_failures_total": MetricSpec(
        "counter", "ZeroMQ peers refused by authentication (PLAIN or CURVE, the hook "
        "gateway_authenticate); the socket serves the others.", ("socket", "mechanism", "reason")),
    "gateway_socket_dropped_messages_total": MetricSpec(
        "counter", "Messages a native socket dropped (outside any bridge's accounting).",
        ("reason",)),
    "gateway_dial_failures_total": MetricSpec(
        "counter", "Failed connection attempts of native sockets, by reason (refused, "
        "unreachable, timeout, error); the socket keeps redialling with backoff.", ("reason",)),
    "gateway_socket_option_failures_total": MetricSpec(
        "counter", "Connection options the kernel refused on a new connection, by option "
        "(keepalive, buffers); the connection goes on without it.", ("option",)),
    "gateway_refused_connections_total": MetricSpec(
        "counter", "Connections a native listener refused, by socket and reason (not-allowed: "
        "outside the endpoint's allow list; max-connections: the endpoint's limit was reached; "
        "origin: a web page's Origin a ws or wss endpoint does not allow, answered 403).",
        ("socket", "reason")),
    "gateway_open_files_ratio": MetricSpec(
        "gauge", "Open file descriptors of the process over its limit (RLIMIT_NOFILE); a "
        "listener logs a warning (fd.limit) once above 0.9."),
    "gateway_handshake_failures_total": MetricSpec(
        "counter", "Connections that ended before their handshake completed, and handshakes a "
        "library reported failed, by socket and reason (see docs: handshake failure reasons).",
        ("socket", "reason")),
    "gateway_requests_resent_total": MetricSpec(
        "counter", "Requests a native REQ socket resent (nng's resend timer or pipe loss)."),
    "gateway_worker_processes": MetricSpec(
        "gauge", "Worker processes of --workers N (served by the parent only): configured, and "
        "answering this scrape; the other series are summed over those.", ("state",)),
    "gateway_side_parts_total": MetricSpec(
        "counter", "Bridges with a control or capture endpoint: message parts each side received "
        "(direction in) and sent (out), counted as zmq_proxy_steerable's STATISTICS counts them "
        "(a ZeroMQ side: each frame, the routing id too; an SP side: each message).",
        ("bridge", "side", "direction")),
    "gateway_side_bytes_total": MetricSpec(
        "counter", "Bridges with a control or capture endpoint: bytes of those parts (an SP "
        "side: its backtrace and body), as STATISTICS counts them.",
        ("bridge", "side", "direction")),
    "gateway_control_commands_total": MetricSpec(
        "counter", "Commands a bridge's control endpoint answered (PAUSE, RESUME, TERMINATE, "
        "STATISTICS; unknown: anything else, answered with an empty reply as libzmq does).",
        ("bridge", "command")),
    "gateway_capture_published_total": MetricSpec(
        "counter", "Forwarded messages a bridge's capture endpoint published.", ("bridge",)),
    "gateway_capture_peers": MetricSpec(
        "gauge", "Readers a bridge's capture endpoint publishes to now: connected and holding "
        "a subscription.", ("bridge",)),
    "gateway_capture_dropped_total": MetricSpec(
        "counter", "Forwarded messages a bridge's capture endpoint did not publish, by reason "
        "(no-reader: nobody subscribed; hwm: every reader at its high-water mark; queue-full: "
        "the tap's own queue was full). Forwarding never waits for a capture reader.",
        ("bridge", "reason")),
    "gateway_build_info": MetricSpec(
        "gauge", "Versions of the gateway and the libraries it runs on, and which forwarding "
        "path runs (kernel: compiled or pure; value 1).",
        ("version", "python", "pyzmq", "libzmq", "pynng", "kernel")),
}

#: Hop-latency buckets, seconds: 25 us to 1 s.
BUCKETS = (25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 0.1, 1.0)


class Histogram:
    """Bucket counts and a sum; ``observe`` is one bisect and two additions. The sum lives in
    a cell (``total[0]``), as the hot counters do. Owners that count for themselves attach
    their cells as parts (a bridge's ledger: gateway.device.ledger.Tally, whose compiled
    kernel adds to them without an attribute look-up); what it reads is its own cells and its
    parts', and a part detached is folded in (a bridge that closed: the counts stay)."""

    __slots__ = ("_lock", "_parts", "counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = [0.0]
        self._parts: list[tuple[Sequence[int], Sequence[float]]] = []
        self._lock = threading.Lock()  # (a part folded in is never read twice or not at all)

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BUCKETS, seconds)] += 1
        self.total[0] += seconds

    def attach(self, counts: Sequence[int], total: Sequence[float]) -> None:
        """Count ``counts`` (per bucket) and ``total`` (the sum, one cell) in, as they go."""
        if len(counts) != len(self.counts) or len(total) != 1:
            raise ValueError(f"a part counts {len(self.counts)} buckets and one sum, not "
                             f"{len(counts)} and {len(total)}")
        with self._lock:
            self._parts.append((counts, total))

    def detach(self, counts: Sequence[int], total: Sequence[float]) -> None:
        """Fold an attached part in and forget it (its owner is done: an increment after
        this one is not counted). Nothing when it is not attached."""
        with self._lock:
            for i, (c, t) in enumerate(self._parts):
                if c is counts and t is total:
                    del self._parts[i]
                    for j, n in enumerate(list(c)):
                        self.counts[j] += n
                    self.total[0] += t[0]
                    return

    def snapshot(self) -> tuple[list[int], float]:
        """The counts per bucket and the sum, parts included."""
        with self._lock:
            counts = list(self.counts)
            total = self.total[0]
            for c, t in list(self._parts):
                for j, n in enumerate(list(c)):
                    counts[j] += n
                total += t[0]
        return counts, total

    @property
    def sum(self) -> float:
        return self.snapshot()[1]

    @property
    def count(self) -> int:
        return sum(self.snapshot()[0])


def _key(name: str, labels: dict[str, str]) -> Key:
    spec = SPECS.get(name)
    if spec is None:
        raise KeyError(f"undeclared metric {name!r} (add it to gateway.metrics.SPECS)")
    if set(labels) != set(spec.labels):
        raise KeyError(f"{name} takes labels {spec.labels}, not {tuple(labels)}")
    return name, tuple((k, str(labels[k])) for k in spec.labels)


class Registry:
    """The store behind the exporter. Thread-safe enough: one writer per key (the loop or one
    poller thread), readers copy with ``list()``, which the GIL makes atomic for a dict."""

    def __init__(self) -> None:
        self.counters: defaultdict[Key, int] = defaultdict(int)
        #: hot-path counters (see :meth:`cell`), counted into their key's value
        self.cells: dict[Key, list[list[int]]] = {}
        #: held while cells are folded into counters (:meth:`release`) and while they are read
        self._fold = threading.Lock()
        self.gauges: dict[Key, Callable[[], float]] = {}
        self.histograms: dict[Key, Histogram] = {}
        self.prometheus = CollectorRegistry(auto_describe=True)
        self.prometheus.register(_Collector(self))

    # -- counters ---------------------------------------------------------------------------
    def declare(self, name: str, **labels: str) -> Key:
        """The key of one labelled counter, exported at zero until it is incremented."""
        key = _key(name, labels)
        self.counters.setdefault(key, 0)
        return key

    def cell(self, name: str, cell: list[int] | None = None, **labels: str) -> list[int]:
        """A counter for a hot path: its owner adds with ``cell[0] += 1``, which hashes
        nothing (``counters[key] += 1`` hashes the labelled key twice). Read, summed and
        exported with ``counters`` like any other; several cells may count towards one key
        (two bridges of one name across a reload). ``cell``: the owner's own (anything
        indexed as ``[0]`` is: a compiled tally's C number), else a new one."""
        key = self.declare(name, **labels)
        if cell is None:
            cell = [0]
        with self._fold:  # not into a list that a release is replacing
            self.cells.setdefault(key, []).append(cell)
        return cell

    def release(self, *cells: list[int]) -> None:
        """Fold cells whose owner is done (a bridge that closed) into their keys' counters and
        forget them: the values stay, and a gateway reloaded every few seconds for weeks keeps
        no cell per bridge it ever ran. An increment after the release is not counted."""
        gone = {id(c) for c in cells}  # alive while we run: their ids are theirs
        with self._fold:
            for key, owned in list(self.cells.items()):
                kept = [c for c in owned if id(c) not in gone]
                if len(kept) == len(owned):
                    continue
                self.counters[key] += sum(c[0] for c in owned if id(c) in gone)
                if kept:
                    self.cells[key] = kept
                else:
                    del self.cells[key]

    def value(self, key: Key) -> int:
        """One counter's value: its ``counters`` entry and its cells."""
        with self._fold:
            return self.counters.get(key, 0) + sum(c[0] for c in self.cells.get(key, ()))

    def values(self) -> dict[Key, int]:
        """Every counter's value (a snapshot; never a released cell twice or not at all)."""
        with self._fold:
            out = dict(list(self.counters.items()))
            for key, cells in list(self.cells.items()):
                out[key] = out.get(key, 0) + sum(c[0] for c in list(cells))
        return out

    def inc(self, name: str, amount: int = 1, **labels: str) -> None:
        self.counters[_key(name, labels)] += amount

    def get(self, name: str, **labels: str) -> int:
        return self.value(_key(name, labels))

    def total(self, name: str) -> int:
        return sum(v for (n, _), v in self.values().items() if n == name)

    def total_where(self, name: str, **labels: str) -> int:
        """The sum of ``name`` over the label sets that include ``labels``."""
        want = set(labels.items())
        return sum(v for (n, lab), v in self.values().items()
                   if n == name and want <= set(lab))

    # -- gauges and histograms --------------------------------------------------------------
    def gauge(self, name: str, read: Callable[[], float], **labels: str) -> Key:
        key = _key(name, labels)
        self.gauges[key] = read
        return key

    def histogram(self, name: str, **labels: str) -> Histogram:
        key = _key(name, labels)
        hist = self.histograms.get(key)
        if hist is None:
            hist = self.histograms[key] = Histogram()
        return hist

    def forget_gauge(self, key: Key, read: Callable[[], float]) -> None:
        """Drop the gauge ``key`` if ``read`` still reads it (a bridge that closed while the
        bridge that replaced it, of the same name, already reads its own)."""
        if self.gauges.get(key) is read:
            del self.gauges[key]

    def forget_gauges(self, **labels: str) -> None:
        """Drop the gauges carrying these labels (a bridge that closed: nothing left to read)."""
        wanted = set(labels.items())
        for key in [k for k in self.gauges if wanted <= set(k[1])]:
            del self.gauges[key]

    # -- exposition ---------------------------------------------------------------------------
    def render(self) -> str:
        return generate_latest(self.prometheus).decode()


def build_labels() -> dict[str, str]:
    from gateway import __version__
    from gateway.kernel import IMPLEMENTATION

    labels = {"version": __version__, "python": platform.python_version(),
              "pyzmq": "", "libzmq": "", "pynng": "", "kernel": IMPLEMENTATION}
    try:
        import zmq

        labels["pyzmq"], labels["libzmq"] = zmq.pyzmq_version(), zmq.zmq_version()
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        labels["pynng"] = version("pynng")
    except Exception:  # noqa: BLE001 - not installed, or metadata missing
        pass
    return labels


class _Collector:
    """prometheus_client's view of a :class:`Registry`: families built at scrape time."""

    def __init__(self, store: Registry) -> None:
        self._store = store
        self._build: dict[str, str] | None = None

    def collect(self) -> Iterator[Metric]:
        store = self._store
        families: dict[str, Metric] = {}
        for name, spec in SPECS.items():
            if spec.kind == "counter":
                families[name] = CounterMetricFamily(name.removesuffix("_total"), spec.help,
                                                     labels=spec.labels)
            elif spec.kind == "gauge":
                families[name] = GaugeMetricFamily(name, spec.help, labels=spec.labels)
            else:
                families[name] = HistogramMetricFamily(name, spec.help, labels=spec.labels)
        for (name, labels), value in sorted(store.values().items()):
            families[name].add_metric([v for _, v in labels], value)  # type: ignore[attr-defined]
        for (name, labels), read in sorted(list(store.gauges.items())):
            try:
                level = float(read())
            except Exception:  # noqa: BLE001 - a gauge of a closing bridge: skip it this once
                continue
            families[name].add_metric([v for _, v in labels], level)  # type: ignore[attr-defined]
        for (name, labels), hist in sorted(list(store.histograms.items())):
            cumulative, buckets = 0, []
            counts, total = hist.snapshot()
            for bound, count in zip((*BUCKETS, float("inf")), counts, strict=True):
                cumulative += count
                buckets.append((floatToGoString(bound), cumulative))
            families[name].add_metric([v for _, v in labels], buckets, total)  # type: ignore[attr-defined]
        if self._build is None:
            self._build = build_labels()
        info = families["gateway_build_info"]
        info.add_metric([self._build[k] for k in SPECS["gateway_build_info"].labels], 1.0)  # type: ignore[attr-defined]
        yield from families.values()


#: The process-wide store the engine, the device and the CLI share.
METRICS = Registry()
for _reason in ("ttl", "unexpected-reply", "stale-reply", "wrong-pipe", "no-delimiter",
                "unroutable", "hwm"):
    METRICS.declare("gateway_socket_dropped_messages_total", reason=_reason)
METRICS.declare("gateway_requests_resent_total")
for _reason in ("refused", "unreachable", "timeout", "error"):
    METRICS.declare("gateway_dial_failures_total", reason=_reason)
for _option in ("keepalive", "buffers"):
    METRICS.declare("gateway_socket_option_failures_total", option=_option)
