"""Counters, gauges and a latency histogram, rendered in Prometheus text format.

Deliberately tiny and lock-free: every update is one dict operation under the GIL. Names follow
Prometheus habits (``_total`` for counters).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

Labels = tuple[tuple[str, str], ...]

BUCKETS_US = (50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 1000000)


class Registry:
    def __init__(self) -> None:
        self.counters: defaultdict[tuple[str, Labels], int] = defaultdict(int)
        self.gauges: dict[str, Callable[[], float]] = {}
        self.hist_counts: dict[str, list[int]] = {}
        self.hist_sums: dict[str, float] = {}
        self.help: dict[str, str] = {}

    def inc(self, name: str, amount: int = 1, **labels: str) -> None:
        self.counters[(name, tuple(sorted(labels.items())))] += amount

    def get(self, name: str, **labels: str) -> int:
        return self.counters.get((name, tuple(sorted(labels.items()))), 0)

    def total(self, name: str) -> int:
        return sum(v for (n, _), v in self.counters.items() if n == name)

    def gauge(self, name: str, read: Callable[[], float], help: str = "") -> None:
        self.gauges[name] = read
        if help:
            self.help[name] = help

    def observe_us(self, name: str, value_us: float) -> None:
        counts = self.hist_counts.get(name)
        if counts is None:
            counts = self.hist_counts[name] = [0] * (len(BUCKETS_US) + 1)
            self.hist_sums[name] = 0.0
        for i, bound in enumerate(BUCKETS_US):
            if value_us <= bound:
                counts[i] += 1
                break
        else:
            counts[-1] += 1
        self.hist_sums[name] += value_us

    def render(self) -> str:
        lines: list[str] = []
        seen: set[str] = set()
        for (name, labels), value in sorted(self.counters.items()):
            if name not in seen:
                seen.add(name)
                lines.append(f"# TYPE {name} counter")
            lab = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"{name}{{{lab}}} {value}" if lab else f"{name} {value}")
        for name, read in sorted(self.gauges.items()):
            if name in self.help:
                lines.append(f"# HELP {name} {self.help[name]}")
            lines.append(f"# TYPE {name} gauge")
            lines.append(f"{name} {read()}")
        for name, counts in sorted(self.hist_counts.items()):
            lines.append(f"# TYPE {name} histogram")
            cumulative = 0
            for bound, count in zip(BUCKETS_US, counts, strict=False):
                cumulative += count
                lines.append(f'{name}_bucket{{le="{bound / 1e6:g}"}} {cumulative}')
            cumulative += counts[-1]
            lines.append(f'{name}_bucket{{le="+Inf"}} {cumulative}')
            lines.append(f"{name}_sum {self.hist_sums[name] / 1e6:.6f}")
            lines.append(f"{name}_count {cumulative}")
        return "\n".join(lines) + "\n"


#: The process-wide registry the engine, the device and the CLI share.
METRICS = Registry()
