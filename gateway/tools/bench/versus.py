"""The bench's figure helpers and the routes compared with references of their own: the
secured routes (against their plain twins and libzmq's CURVE), ``stream`` (byte-stream clients, against ``zmq-proxy-stream``) and ``cpeers`` (C load peers,
issue 22, against ``zmq-proxy-c`` and ``nng-device-c``, with the direct C ceilings).
"""

from __future__ import annotations

import math
from typing import Any


def r(x: float | None, nd: int = 1) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(x, nd)


def p50(fig: dict[str, Any] | None) -> float | None:
    if not fig or "latency" not in fig:
        return None
    v = fig["latency"].get("p50_us")
    return float(v) if v is not None else None


def rps(fig: dict[str, Any] | None, window: int) -> float | None:
    try:
        return float(fig["throughput"][str(window)]["rps"])  # type: ignore[index]
    except (KeyError, TypeError):
        return None


def round_p50s(fig: dict[str, Any] | None) -> list[float]:
    return list((fig or {}).get("per_round", {}).get("p50_us", []))


def median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def cpu(fig: dict[str, Any] | None, big: int | None) -> float | None:
    mid = (fig or {}).get("middle_process", {})
    return mid.get(f"cpu_us_per_req_{big}") if big else mid.get("cpu_us_per_req")


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def security(figs: dict[str, dict[str, Any]], big: int | None) -> dict[str, Any]:
    """Each secured route against its plain one, and CURVE routes against libzmq's own CURVE
    (``zmq-proxy-curve``): p50, throughput at the largest window and the middle's CPU per
    request, as ratios (secured / reference)."""
    out: dict[str, Any] = {}
    for name, fig in figs.items():
        if not fig.get("security"):
            continue
        refs = [("plain", fig.get("plain"))]
        if fig["security"] == "curve" and name != "zmq-proxy-curve":
            refs.append(("libzmq_curve", "zmq-proxy-curve"))
        entry: dict[str, Any] = {"security": fig["security"]}
        for label, ref in refs:
            other = figs.get(ref or "")
            entry[label] = ref
            entry[f"p50_vs_{label}"] = r(ratio(p50(fig), p50(other)), 2)
            if big:
                entry[f"tput{big}_vs_{label}"] = r(ratio(rps(fig, big), rps(other, big)), 2)
            entry[f"cpu_vs_{label}"] = r(ratio(cpu(fig, big), cpu(other, big)), 2)
        out[name] = entry
    return out


def stream(figs: dict[str, dict[str, Any]], big: int | None) -> dict[str, Any]:
    """The ``stream`` routes (byte-stream clients: the middles' own ceilings) against
    ``zmq-proxy-stream``: throughput at the largest window and the middle's CPU per request as
    ratios, and the hop over the stream directs (``zmq-echo-stream``, ``sp-echo-stream``; the
    mean of both across families) as a ratio to the proxy's hop."""
    return versus(figs, big, "stream", ("zmq-proxy-stream",),
                  {"zmq": "zmq-echo-stream", "sp": "sp-echo-stream"})


def cpeers(figs: dict[str, dict[str, Any]], big: int | None) -> dict[str, Any]:
    """The ``cpeers`` routes (C clients and echoes, issue 22) as :func:`stream` does it, with
    ratios to ``zmq-proxy-c`` (the reference) and to ``nng-device-c``, and each route's share
    of its front's direct C ceiling (``zmq-echo-c``, ``sp-echo-c``)."""
    direct = {"zmq": "zmq-echo-c", "sp": "sp-echo-c"}
    out = versus(figs, big, "cpeers", ("zmq-proxy-c", "nng-device-c"), direct)
    for name, entry in out.items():
        fig = figs[name]
        ceiling = rps(figs.get(direct[fig["front"]]), big) if big else None
        entry["ceiling_rps"] = r(ceiling, 0)
        entry["tput_vs_ceiling"] = r(ratio(entry.get("rps"), ceiling), 2)
        entry["client_cores"] = (fig.get("client_process") or {}).get(f"cores_{big}")
    return out


def versus(figs: dict[str, dict[str, Any]], big: int | None, group: str,
            refs: tuple[str, ...], directs: dict[str, str]) -> dict[str, Any]:
    """Every route of ``group`` with a middle: throughput at window ``big``, the middle's CPU
    per request and the hop over ``directs`` (the mean of both across families), each as a
    ratio to ``refs[0]`` (keys ``*_vs_reference``) and to the other ``refs`` (``*_vs_NAME``)."""
    direct = {fam: p50(figs.get(name)) for fam, name in directs.items()}

    def hop(fig: dict[str, Any] | None) -> float | None:
        p = p50(fig)
        if fig is None or p is None:
            return None
        if fig["front"] == fig["back"]:
            b = direct[fig["front"]]
        else:
            z, n = direct["zmq"], direct["sp"]
            b = (z + n) / 2 if z is not None and n is not None else None
        return p - b if b is not None else None

    rounds_direct = {fam: round_p50s(figs.get(name)) for fam, name in directs.items()}

    def round_hops(fig: dict[str, Any] | None) -> list[float]:
        """The hop of each round, over the same round's direct p50s (the rounds run their
        routes within seconds of each other: this pairs up the machine's drift)."""
        r = round_p50s(fig)
        if fig is None or not r:
            return []
        z, n = rounds_direct["zmq"], rounds_direct["sp"]
        if fig["front"] == fig["back"]:
            base = rounds_direct[fig["front"]]
        else:
            base = [(a + b) / 2 for a, b in zip(z, n, strict=True)] if len(z) == len(n) else []
        return [p - b for p, b in zip(r, base, strict=True)] if len(base) == len(r) else []

    out: dict[str, Any] = {}
    for name, fig in figs.items():
        if fig.get("group") != group or fig.get("middle") is None:
            continue
        h = hop(fig)
        entry: dict[str, Any] = {"reference": refs[0], "hop_us": r(h)}
        if big:
            entry["window"] = big
            entry["rps"] = r(rps(fig, big), 0)
            entry["cpu_us_per_req"] = cpu(fig, big)
        for i, ref_name in enumerate(refs):
            ref, label = figs.get(ref_name), "reference" if i == 0 else ref_name
            ref_hop = hop(ref)
            entry[f"hop_vs_{label}"] = (r(ratio(h, ref_hop), 2)
                                        if h is not None and ref_hop and ref_hop > 0 else None)
            mine, theirs = round_hops(fig), round_hops(ref)
            paired = ([a / b for a, b in zip(mine, theirs, strict=True) if b > 0]
                      if len(mine) == len(theirs) else [])
            if paired:  # (a round where the reference's hop was not positive has no ratio)
                entry[f"hop_vs_{label}_median_of_rounds"] = r(median(paired), 2)
                entry[f"hop_vs_{label}_rounds"] = [r(min(paired), 2), r(max(paired), 2)]
                entry[f"hop_vs_{label}_rounds_used"] = [len(paired), len(mine)]
            if big:
                entry[f"tput_vs_{label}"] = r(ratio(rps(fig, big), rps(ref, big)), 2)
                entry[f"cpu_vs_{label}"] = r(ratio(cpu(fig, big), cpu(ref, big)), 2)
        out[name] = entry
    return out



def _rounds(e: dict[str, Any], label: str) -> str:
    """The median of the per-round hop ratios and their spread: ``0.91x [0.80-1.10]``,
    ``... in 4 of 5`` when a round had no ratio (its reference's hop not positive)."""
    m, spread = e.get(f"hop_vs_{label}_median_of_rounds"), e.get(f"hop_vs_{label}_rounds")
    if m is None or not spread:
        return "-"
    used, of = e.get(f"hop_vs_{label}_rounds_used") or (0, 0)
    some = f" in {used} of {of}" if used != of else ""
    return f"{fmt(m, 2)}x [{fmt(spread[0], 2)}-{fmt(spread[1], 2)}]{some}"


def group_lines(d: dict[str, Any]) -> list[str]:
    """The table's lines of the ``stream`` and ``cpeers`` comparisons (``d``: the derived
    figures)."""
    lines: list[str] = []
    st = d.get("stream") or {}
    if st:
        lines.append("stream clients (the middles' own ceilings; ratios to zmq-proxy-stream: "
                     "throughput, middle CPU per request, hop over the stream directs (pooled "
                     "p50s; rounds = the median [range] of each round's ratio to "
                     "zmq-proxy-stream)):")
        for name, e in st.items():
            lines.append(f"  {name:<18} x{e.get('window')}: {fmt(e.get('rps'), 0)} req/s "
                         f"({fmt(e.get('tput_vs_reference'), 2)}x), "
                         f"{fmt(e.get('cpu_us_per_req'))} us/req "
                         f"({fmt(e.get('cpu_vs_reference'), 2)}x), hop "
                         f"{fmt(e.get('hop_us'))} us ({fmt(e.get('hop_vs_reference'), 2)}x; "
                         f"rounds {_rounds(e, 'reference')})")
    cp = d.get("cpeers") or {}
    if cp:
        lines.append("C peers (issue 22; ratios to zmq-proxy-c / nng-device-c: throughput, "
                     "middle CPU per request, hop over the C directs (pooled p50s; rounds = "
                     "the median [range] of each round's ratio to zmq-proxy-c); ceiling = the "
                     "direct C rate of the front's wire; client = cores the C client kept "
                     "busy):")
        for name, e in cp.items():
            lines.append(f"  {name:<14} x{e.get('window')}: {fmt(e.get('rps'), 0)} req/s "
                         f"({fmt(e.get('tput_vs_reference'), 2)}x / "
                         f"{fmt(e.get('tput_vs_nng-device-c'), 2)}x; "
                         f"{fmt(e.get('tput_vs_ceiling'), 2)} of {fmt(e.get('ceiling_rps'), 0)})"
                         f", {fmt(e.get('cpu_us_per_req'))} us/req "
                         f"({fmt(e.get('cpu_vs_reference'), 2)}x / "
                         f"{fmt(e.get('cpu_vs_nng-device-c'), 2)}x), hop {fmt(e.get('hop_us'))}"
                         f" us ({fmt(e.get('hop_vs_reference'), 2)}x / "
                         f"{fmt(e.get('hop_vs_nng-device-c'), 2)}x; rounds "
                         f"{_rounds(e, 'reference')}), client "
                         f"{fmt(e.get('client_cores'), 2)} cores")
    return lines
