"""The bench's PNG: bar charts of latency and throughput per route (matplotlib, optional)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_png(result: dict[str, Any], path: str) -> str | None:
    """Bar charts: p50/p99 latency and throughput per route. Returns a reason if skipped."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"matplotlib not installed ({exc}); pip install matplotlib"
    figs = [f for f in result["routes"].values() if "latency" in f]
    if not figs:
        return "no route measured"
    windows = result["meta"]["settings"]["windows"]
    names = [f["name"] for f in figs]
    x = list(range(len(names)))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, 0.8 * len(names) + 3), 9),
                                   constrained_layout=True)
    w = 0.38
    p50 = [f["latency"]["p50_us"] for f in figs]
    p99 = [f["latency"]["p99_us"] for f in figs]
    ax1.bar([i - w / 2 for i in x], p50, w, label="p50")
    ax1.bar([i + w / 2 for i in x], p99, w, label="p99")
    ax1.set_ylabel("round trip (µs), 1 client")
    ax1.set_title(f"Latency, {result['meta']['settings']['size']} B request-reply")
    ax1.set_xticks(x, names, rotation=35, ha="right")
    ax1.legend()
    ax1.grid(axis="y", alpha=0.3)
    series = [("x1", [f["latency"].get("rps_1") or 0 for f in figs])]
    series += [(f"x{win}", [(f.get("throughput", {}).get(str(win), {}).get("rps") or 0)
                            for f in figs]) for win in windows]
    bw = 0.8 / len(series)
    for k, (label, vals) in enumerate(series):
        ax2.bar([i - 0.4 + bw * (k + 0.5) for i in x], vals, bw, label=f"{label} in flight")
    ax2.set_ylabel("requests / s")
    ax2.set_title("Throughput")
    ax2.set_xticks(x, names, rotation=35, ha="right")
    ax2.legend()
    ax2.grid(axis="y", alpha=0.3)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return None
