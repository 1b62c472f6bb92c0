"""The markdown form of ``gateway matrix report`` (:mod:`gateway.tools.matrix.report`), from
the aggregates of :mod:`gateway.tools.matrix.report_data`.
"""

from __future__ import annotations

from typing import Any

from gateway.tools.matrix.report_data import (
    FAMILY_TITLES,
    _stamp_line,
    _us,
    grids,
    impl_pair_totals,
    pairing_table,
    pattern_pairing_tables,
    summary_text,
)


# -- markdown ----------------------------------------------------------------------------------------
def _md_table(headers: list[str], rows: list[list[Any]]) -> str:
    def esc(v: Any) -> str:
        return str("" if v is None else v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(esc(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(d: dict[str, Any], path: str) -> str:
    t = d["totals"]
    parts = [f"# Interop matrix report\n\nSource: `{path}`; {_stamp_line(d)}\n",
             f"**{t['cells']} cells: {t['as_expected']} as expected, {t['mismatches']} mismatch(es), "
             f"{t.get('known') or 0} known issue(s), {t.get('skipped') or 0} skipped, "
             f"{t['envelope_bad']} envelope problem(s)**; "
             f"{t['cell_seconds']} s of cell time.\n",
             "Legend: ex = exchanged, hs = refused at handshake, lim = refused by the size limit, auth = refused the credentials, "
             "to = timeout, conn = connected although nobody could send, err = error; a number is "
             "how many cells (shapes x transports) ended that way. ✓ = every cell as expected.\n",
             "## Expected vs observed\n",
             _md_table(["expected", "observed", "cells"],
                       [[r["expected"], r["observed"], r["n"]] for r in d["confusion"]]),
             "\n## Pairing tables, as the libraries showed them\n",
             "ZMTP verdicts come from the libzmq <-> libzmq rows, SP verdicts from rows where both "
             "ends are nng, nng-raw, nanomsg or nng-1.5; \"native engine\" is the same pairing with "
             "our engine on at least one end.\n"]
    pt = pairing_table(d)
    parts.append(_md_table(list(pt[0].keys()), [list(r.values()) for r in pt]) if pt else "(no rows)")
    for fam, fam_rows in pattern_pairing_tables(d).items():
        parts.append(f"\n## {FAMILY_TITLES.get(fam, fam)}: pairings as the libraries showed them\n")
        parts.append(_md_table(list(fam_rows[0].keys()), [list(r.values()) for r in fam_rows]))
    parts.append("\n## Routes\n")
    parts.append(_md_table(
        ["wire", "route", "cells", "as expected", "exchanged", "refused hs", "refused limit",
         "refused auth", "p50 small (µs)"],
        [[r["wire"], r["route"], r["n"], r["ok"], r["exchanged"], r["refused_handshake"],
          r["refused_limit"], r.get("refused_auth", 0), _us(r["p50_small_us"])] for r in d["by_wire"]]))
    parts.append("\n## Default receive limits (oversize = 1 MiB + 1 KiB, direct, unlimited client)\n")
    parts.append(_md_table(["server impl", "cells", "refused", "accepted", "as expected"],
                           [[r["impl"], r["n"], r["refused"], r["accepted"], r["as_expected"]]
                            for r in d["limits"]]))
    pairs = impl_pair_totals(d)
    if pairs:
        clients = sorted({c for c, _ in pairs})
        servers = sorted({v for _, v in pairs})
        parts.append("\n## Implementation pairs (cells as expected / cells; client rows)\n")
        parts.append(_md_table(["client \\ server"] + servers,
                               [[f"**{c}**"] + [pairs.get((c, v), "") for v in servers]
                                for c in clients]))
    parts.append("\n## Grids (client rows x server columns)\n")
    for wire, route, clients, servers, cells in grids(d):
        parts.append(f"\n### {wire} — {route}\n")
        rows = []
        for c in clients:
            rows.append([f"**{c}**"] + [summary_text(cells[(c, s)]) if (c, s) in cells else ""
                                        for s in servers])
        parts.append(_md_table(["client \\ server"] + servers, rows))
    parts.append("\n## Slowest cells (median round trip)\n")
    parts.append(_md_table(["cell", "rtt (µs)", "cell time (s)"],
                           [[r["cell_id"], _us(r["rtt_us"]), r["duration_s"]] for r in d["slowest"]]))
    parts.append("\n## Slowest 100-byte cells (median round trip)\n")
    parts.append(_md_table(["cell", "rtt (µs)", "cell time (s)"],
                           [[r["cell_id"], _us(r["rtt_us"]), r["duration_s"]]
                            for r in d.get("slowest_small", [])]))
    parts.append("\n## Longest-running cells\n")
    parts.append(_md_table(["cell", "observed", "cell time (s)"],
                           [[r["cell_id"], r["observed"], r["duration_s"]] for r in d["longest"]]))
    if d["problems"]:  # what went wrong comes first, right after the totals
        parts[2:2] = ["## Mismatches and envelope problems\n",
                      _md_table(["cell", "expected", "observed", "envelope ok", "known issue",
                                 "detail", "bytes each side saw"],
                                [[r["cell_id"], r["expected"], r["observed"], r["envelope_ok"],
                                  r.get("known_issue") or "", (r["detail"] or "")[:400],
                                  (r.get("bytes_seen") or "")[:300]]
                                 for r in d["problems"]]) + "\n"]
    else:
        parts.append("\n## Mismatches and envelope problems\n")
        parts.append("None: every cell behaved as the pairing tables and limits predict.")
    return "\n".join(parts) + "\n"
