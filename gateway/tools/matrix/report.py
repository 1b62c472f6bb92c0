"""``gateway matrix report DIR --format markdown|html|json [--output FILE] [--master URL]``.

Reads the Parquet of ``gateway matrix run`` with Spark and aggregates it with Spark SQL:

1. totals (expected x observed, envelope checks);
2. the pairing tables as the real libraries showed them: ZMTP from the libzmq <-> libzmq rows,
   SP from the rows where both ends are nng / nng-raw / nanomsg / nng-1.5, next to the engine's
   table (``gateway.patterns.pairing``), plus what the native
   engine did on the same pairings;
3. every gateway route (front backend -> back backend, per wire pair);
4. default receive limits per implementation (oversize = 1 MiB + 1 KiB);
5. one client x server grid per wire and route (HTML: green = every cell as expected, red =
   at least one mismatch or a failed envelope check; hover for expected vs observed per cell);
6. the slowest cells (median round trip) and the longest-running cells;
7. every mismatch and envelope problem with its detail.
"""

from __future__ import annotations

import argparse
import html
import sys
from collections import defaultdict
from itertools import combinations_with_replacement
from typing import Any

ABBR = {"exchanged": "ex", "refused-handshake": "hs", "refused-limit": "lim",
        "refused-auth": "auth", "timeout": "to", "connected": "conn", "error": "err",
        "bad-reply": "bad"}
ZMTP_ORDER = ("REQ", "REP", "DEALER", "ROUTER")
LIB_SP = ("nng", "nng-raw", "nanomsg", "nng-1.5")


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="Parquet directory written by `gateway matrix run`")
    p.add_argument("--format", choices=("markdown", "html", "json"), default="markdown",
                   help="markdown (default), html, or json (the aggregates, for machines)")
    p.add_argument("--output", "-o", default=None, metavar="FILE", help="write here (default: stdout)")
    p.add_argument("--master", default=None, metavar="URL", help="Spark master (default local[*])")
    p.epilog = "Exit code: 0 when every cell behaved as predicted, 1 otherwise, 2 on bad input."


# -- data -------------------------------------------------------------------------------------------
def _rows(spark: Any, sql: str) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.sql(sql).collect()]


def gather(spark: Any, path: str) -> dict[str, Any]:
    """Every aggregate of the report, computed with Spark SQL over the ``cells`` view."""
    df = spark.read.option("pathGlobFilter", "*.parquet").parquet(path)  # not a report beside
    df.createOrReplaceTempView("cells")
    d: dict[str, Any] = {"columns": list(df.columns)}
    d["totals"] = _rows(spark, """
        SELECT count(*) AS cells,
               sum(CASE WHEN observed = expected THEN 1 ELSE 0 END) AS as_expected,
               sum(CASE WHEN observed <> expected AND observed <> 'skipped' THEN 1 ELSE 0 END)
                   AS mismatches,
               sum(CASE WHEN observed = 'skipped' THEN 1 ELSE 0 END) AS skipped,
               sum(CASE WHEN envelope_ok OR observed = 'skipped' THEN 0 ELSE 1 END)
                   AS envelope_bad,
               round(sum(duration_s), 1) AS cell_seconds
        FROM cells""")[0]
    d["confusion"] = _rows(spark, """
        SELECT expected, observed, count(*) AS n FROM cells
        GROUP BY expected, observed ORDER BY expected, observed""")
    d["by_wire"] = _rows(spark, """
        SELECT wire, route, count(*) AS n,
               sum(CASE WHEN observed = expected AND envelope_ok THEN 1 ELSE 0 END) AS ok,
               sum(CASE WHEN observed = 'exchanged' THEN 1 ELSE 0 END) AS exchanged,
               sum(CASE WHEN observed = 'refused-handshake' THEN 1 ELSE 0 END) AS refused_handshake,
               sum(CASE WHEN observed = 'refused-limit' THEN 1 ELSE 0 END) AS refused_limit,
               sum(CASE WHEN observed = 'refused-auth' THEN 1 ELSE 0 END) AS refused_auth,
               percentile_approx(CASE WHEN shape = 'small' THEN rtt_us END, 0.5) AS p50_small_us
        FROM cells GROUP BY wire, route ORDER BY wire, route""")
    # pairings: one row per (wire, ordered pair, who), verdict from small cells
    d["pairs"] = _rows(spark, """
        SELECT CASE WHEN wire = 'zmq' THEN 'zmq' ELSE 'sp' END AS wire,
               least(client_type, server_type) AS a, greatest(client_type, server_type) AS b,
               CASE WHEN client_impl = 'native' OR server_impl = 'native' THEN 'native' ELSE 'lib' END AS who,
               count(*) AS n,
               sum(CASE WHEN observed IN ('exchanged', 'refused-limit') THEN 1 ELSE 0 END) AS talked,
               sum(CASE WHEN observed = 'refused-handshake' THEN 1 ELSE 0 END) AS refused,
               collect_set(concat(client_impl, '>', server_impl)) AS impls
        FROM cells
        WHERE route = 'direct' AND expected <> 'refused-auth' AND (
              (wire = 'zmq' AND client_impl IN ('libzmq', 'native') AND server_impl IN ('libzmq', 'native'))
           OR (wire = 'sp'))
        GROUP BY 1, 2, 3, 4""")
    d["limits"] = _rows(spark, """
        SELECT server_impl AS impl, count(*) AS n,
               sum(CASE WHEN observed = 'refused-limit' THEN 1 ELSE 0 END) AS refused,
               sum(CASE WHEN observed = 'exchanged' THEN 1 ELSE 0 END) AS accepted,
               sum(CASE WHEN observed = expected THEN 1 ELSE 0 END) AS as_expected
        FROM cells
        WHERE route = 'direct' AND shape = 'oversize'
              AND client_impl IN ('libzmq', 'nng', 'nng-raw', 'nng-1.5')
        GROUP BY server_impl ORDER BY server_impl""")
    d["grid"] = _rows(spark, """
        SELECT wire, route, concat(client_impl, ' ', client_type) AS client,
               concat(server_impl, ' ', server_type) AS server,
               count(*) AS n,
               sum(CASE WHEN observed = expected AND envelope_ok THEN 1 ELSE 0 END) AS ok,
               collect_list(concat(shape, ' ', transport, ': expected ', expected, ', observed ',
                                   observed, CASE WHEN envelope_ok THEN '' ELSE ' (envelope!)' END))
                   AS lines,
               collect_list(observed) AS observed,
               collect_list(CASE WHEN observed <> expected OR NOT envelope_ok
                                 THEN concat(shape, ' ', transport, ': ', expected, ' -> ', observed,
                                             CASE WHEN envelope_ok THEN '' ELSE ' (envelope!)' END)
                            END) AS bad_lines
        FROM cells GROUP BY wire, route, client, server""")
    d["slowest"] = _rows(spark, """
        SELECT cell_id, rtt_us, duration_s FROM cells WHERE rtt_us IS NOT NULL
        ORDER BY rtt_us DESC LIMIT 15""")
    d["slowest_small"] = _rows(spark, """
        SELECT cell_id, rtt_us, duration_s FROM cells WHERE rtt_us IS NOT NULL AND shape = 'small'
        ORDER BY rtt_us DESC LIMIT 10""")
    d["longest"] = _rows(spark, """
        SELECT cell_id, observed, duration_s FROM cells ORDER BY duration_s DESC LIMIT 8""")
    has_bytes = "bytes_seen" in df.columns
    d["problems"] = _rows(spark, f"""
        SELECT cell_id, expected, observed, envelope_ok, detail,
               {'bytes_seen' if has_bytes else "''"} AS bytes_seen FROM cells
        WHERE (observed <> expected OR NOT envelope_ok) AND observed <> 'skipped'
        ORDER BY cell_id""")
    d["skipped"] = _rows(spark, """
        SELECT detail, count(*) AS n FROM cells WHERE observed = 'skipped'
        GROUP BY detail ORDER BY n DESC""")
    d["impl_pairs"] = _rows(spark, """
        SELECT client_impl, server_impl, client_type, server_type, count(*) AS n,
               sum(CASE WHEN observed = expected AND envelope_ok THEN 1 ELSE 0 END) AS ok,
               sum(CASE WHEN observed = 'skipped' THEN 1 ELSE 0 END) AS skipped,
               collect_list(concat(shape, ' ', transport, ' ', route, ': ', observed)) AS lines,
               collect_list(observed) AS observed
        FROM cells GROUP BY client_impl, server_impl, client_type, server_type""")
    d["all_cells"] = _rows(spark, """
        SELECT cell_id, client_impl, client_type, server_impl, server_type, transport, route,
               shape, expected, observed, envelope_ok, rtt_us FROM cells ORDER BY cell_id""")
    return d


def pairing_table(d: dict[str, Any]) -> list[dict[str, str]]:
    """The corrected legal/illegal list, one row per unordered pairing and wire."""
    from gateway.patterns.pairing import sp_legal, sp_protocol, zmtp_legal

    idx = {(r["wire"], r["a"], r["b"], r["who"]): r for r in d["pairs"]}

    def verdict(r: dict[str, Any] | None) -> str:
        if r is None:
            return "not run"
        if r["talked"] == r["n"]:
            return "legal"
        if r["refused"] == r["n"]:
            return "illegal"
        return f"mixed ({r['talked']} talked, {r['refused']} refused of {r['n']})"

    out = []
    for wire, types in (("zmq", ZMTP_ORDER), ("sp", ("REQ", "REP"))):
        for a, b in combinations_with_replacement(types, 2):  # REQ-DEALER order
            key = (wire, min(a, b), max(a, b))  # the SQL keys pairs as least/greatest
            lib = idx.get((*key, "lib"))
            nat = idx.get((*key, "native"))
            table = zmtp_legal(a, b) if wire == "zmq" else sp_legal(sp_protocol(a), sp_protocol(b))
            out.append({
                "wire": "ZMTP" if wire == "zmq" else "SP",
                "pairing": f"{a}-{b}" if wire == "zmq" else f"{a.lower()}-{b.lower()}",
                "observed (libraries)": verdict(lib),
                "rows": str(lib["n"]) if lib else "0",
                "pairing table": "legal" if table else "illegal",
                "native engine": verdict(nat),
                "agrees": ("-" if lib is None
                           else "yes" if verdict(lib) == ("legal" if table else "illegal") else "NO"),
            })
    return out


FAMILY_TITLES = {"pubsub": "Publish-subscribe", "pipeline": "Pipeline (push-pull)",
                 "pair": "Pair"}


def pattern_pairing_tables(d: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    """One table per pattern family: each pairing the libraries were run with (direct cells),
    its verdict against :mod:`gateway.tools.matrix.cells`' pattern tables; then each gateway route of
    the family (``gateway-<pattern>:...``) with how many of its cells behaved as expected."""
    from gateway.tools.matrix.cells import FAMILY_OF, pattern_legal

    out: dict[str, list[dict[str, str]]] = {f: [] for f in FAMILY_TITLES}
    for r in sorted(d["pairs"], key=lambda r: (r["wire"], r["a"], r["b"])):
        fam = FAMILY_OF.get(r["a"]) or FAMILY_OF.get(r["b"])
        if fam is None or r["who"] != "lib":
            continue
        verdict = ("legal" if r["talked"] == r["n"] else "illegal" if r["refused"] == r["n"]
                   else f"mixed ({r['talked']} talked, {r['refused']} refused of {r['n']})")
        table = "legal" if pattern_legal(r["wire"], r["a"], r["b"]) else "illegal"
        out[fam].append({"wire": "ZMTP" if r["wire"] == "zmq" else "SP",
                         "pairing": f"{r['a']}-{r['b']}", "observed": verdict,
                         "cells": str(r["n"]), "pairing table": table,
                         "agrees": "yes" if verdict == table else "NO"})
    for r in d["by_wire"]:
        head = str(r["route"]).partition(":")[0]
        pattern = head.partition("-")[2]
        if not pattern:
            continue
        fam = "pair" if pattern == "pair1" else pattern
        out.setdefault(fam, []).append({
            "wire": r["wire"], "pairing": f"through the gateway ({r['route']})",
            "observed": f"{r['exchanged']} exchanged, {r['refused_handshake']} refused",
            "cells": str(r["n"]), "pairing table": "-",
            "agrees": "yes" if r["ok"] == r["n"] else "NO"})
    return {f: rows for f, rows in out.items() if rows}


def grids(d: dict[str, Any]) -> list[tuple[str, str, list[str], list[str], dict[tuple[str, str], dict[str, Any]]]]:
    by: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    for r in d["grid"]:
        by[(r["wire"], r["route"])][(r["client"], r["server"])] = r
    out = []
    for (wire, route), cells in sorted(by.items(), key=lambda kv: (kv[0][1] != "direct", kv[0])):
        clients = sorted({c for c, _ in cells})
        servers = sorted({s for _, s in cells})
        out.append((wire, route, clients, servers, cells))
    return out


def summary_text(r: dict[str, Any]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for o in r["observed"]:
        counts[ABBR.get(o, o)] += 1
    text = " ".join(f"{k}{v if v > 1 else ''}" for k, v in sorted(counts.items()))
    if r["ok"] == r["n"]:
        return "✓ " + text
    bad = r.get("bad_lines") or []
    return f"✗ {r['ok']}/{r['n']} {text}; " + "; ".join(bad[:2]) + (" ..." if len(bad) > 2 else "")


# -- markdown ----------------------------------------------------------------------------------------
def _md_table(headers: list[str], rows: list[list[Any]]) -> str:
    def esc(v: Any) -> str:
        return str("" if v is None else v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(esc(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def stamp() -> dict[str, str]:
    """When the report was made and with what: the project and every library on the path."""
    import datetime
    import shutil
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    out = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}
    for dist in ("zmq-sp-gateway", "pyzmq", "pynng", "pyspark"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    try:
        import zmq

        out["libzmq"] = zmq.zmq_version()
    except ImportError:
        out["libzmq"] = "not installed"
    for cli in ("nngcat", "nanocat"):
        exe = shutil.which(cli)
        if exe is None:
            out[cli] = "not installed"
            continue
        try:
            done = subprocess.run(["dpkg-query", "-W", "-f=${Version}",
                                   "nng-utils" if cli == "nngcat" else "nanomsg-utils"],
                                  capture_output=True, text=True, timeout=5)
            out[cli] = done.stdout.strip() or "unknown version"
        except (OSError, subprocess.SubprocessError):
            out[cli] = "unknown version"
    return out


def _stamp_line(d: dict[str, Any]) -> str:
    st = d.get("stamp") or {}
    return "; ".join(f"{k} {v}" for k, v in st.items())


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


def impl_pair_totals(d: dict[str, Any]) -> dict[tuple[str, str], str]:
    """``ok/n`` per (client implementation, server implementation), skipped cells as ``-``."""
    acc: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in d.get("impl_pairs", []):
        a = acc[(r["client_impl"], r["server_impl"])]
        a[0] += r["ok"]
        a[1] += r["n"]
        a[2] += r.get("skipped") or 0
    return {k: (f"{ok}/{n}" + (f" ({sk} skipped)" if sk else "")) for k, (ok, n, sk) in acc.items()}


def _us(v: Any) -> str:
    return "" if v is None else f"{float(v):.0f}"


# -- html --------------------------------------------------------------------------------------------
CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 7px;font-size:13px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.ok{background:#c8f0c8}
td.bad{background:#f5b5b5;font-weight:bold}
td.none{background:#fafafa}
td.skip{background:#ddd}
td.mono{font-family:monospace;font-size:11px;word-break:break-all}
.small{color:#666;font-size:12px}
"""


def _h_table(headers: list[str], rows: list[list[Any]], classes: list[list[str]] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in headers) + "</tr>"]
    for i, row in enumerate(rows):
        tds = []
        for j, v in enumerate(row):
            cls = classes[i][j] if classes else ""
            tds.append(f"<td class=\"{cls}\">{v if str(v).startswith('<') else html.escape(str('' if v is None else v))}</td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    return "\n".join(out + ["</table>"])


def _h_grid(corner: str, rows_keys: list[str], cols_keys: list[str],
            cells: dict[tuple[str, str], dict[str, Any]]) -> str:
    """A grid of groups of cells: green when every cell of the square is as expected (or
    skipped), red otherwise, grey when all were skipped; hover for each cell's outcome."""
    rows, classes = [], []
    for a in rows_keys:
        row, cls = [f"<b>{html.escape(a)}</b>"], [""]
        for b in cols_keys:
            r = cells.get((a, b))
            if r is None:
                row.append("")
                cls.append("none")
                continue
            tip = html.escape("\n".join(r["lines"]), quote=True)
            row.append(f"<span title=\"{tip}\">{html.escape(summary_text(r))}</span>")
            skipped = r.get("skipped") or 0
            cls.append("skip" if skipped == r["n"] else
                       "ok" if r["ok"] + skipped == r["n"] else "bad")
        rows.append(row)
        classes.append(cls)
    return _h_table([corner] + cols_keys, rows, classes)


def render_html(d: dict[str, Any], path: str) -> str:
    t = d["totals"]
    p = [f"<!doctype html><html><head><meta charset=\"utf-8\"><title>Interop matrix</title>"
         f"<style>{CSS}</style></head><body>",
         "<h1>Interop matrix report</h1>",
         f"<p class=small>Source: {html.escape(path)}; {html.escape(_stamp_line(d))}</p>",
         f"<p><b>{t['cells']} cells: {t['as_expected']} as expected, {t['mismatches']} mismatch(es), "
         f"{t.get('known') or 0} known issue(s), {t.get('skipped') or 0} skipped, "
         f"{t['envelope_bad']} envelope problem(s)</b>; "
         f"{t['cell_seconds']} s of cell time.</p>",
         "<p class=small>ex = exchanged, hs = refused at handshake, lim = refused by the size limit, auth = refused the credentials, "
         "to = timeout, conn = connected although nobody could send, err = error. Green: every cell "
         "of the group as expected; red: at least one mismatch or envelope problem. Hover a cell for "
         "expected vs observed.</p>",
         "<h2>Expected vs observed</h2>",
         _h_table(["expected", "observed", "cells"],
                  [[r["expected"], r["observed"], r["n"]] for r in d["confusion"]],
                  [["", "ok" if r["expected"] == r["observed"] else "bad", ""] for r in d["confusion"]]),
         "<h2>Pairing tables, as the libraries showed them</h2>"]
    pt = pairing_table(d)
    if pt:
        keys = list(pt[0].keys())
        p.append(_h_table(keys, [list(r.values()) for r in pt],
                          [[("ok" if r["agrees"] == "yes" else "bad" if r["agrees"] == "NO" else "")
                            if k == "agrees" else "" for k in keys] for r in pt]))
    for fam, fam_rows in pattern_pairing_tables(d).items():
        p.append(f"<h2>{html.escape(FAMILY_TITLES.get(fam, fam))}: pairings as the libraries "
                 f"showed them</h2>")
        fam_keys = list(fam_rows[0].keys())
        p.append(_h_table(fam_keys, [list(r.values()) for r in fam_rows],
                          [[("ok" if r["agrees"] == "yes" else "bad") if k == "agrees" else ""
                            for k in fam_keys] for r in fam_rows]))
    p.append("<h2>Routes</h2>")
    p.append(_h_table(
        ["wire", "route", "cells", "as expected", "exchanged", "refused hs", "refused limit",
         "refused auth", "p50 small (µs)"],
        [[r["wire"], r["route"], r["n"], r["ok"], r["exchanged"], r["refused_handshake"],
          r["refused_limit"], r.get("refused_auth", 0), _us(r["p50_small_us"])] for r in d["by_wire"]],
        [["", "", "", "ok" if r["ok"] == r["n"] else "bad", "", "", "", "", ""]
         for r in d["by_wire"]]))
    p.append("<h2>Default receive limits (oversize = 1 MiB + 1 KiB)</h2>")
    p.append(_h_table(["server impl", "cells", "refused", "accepted", "as expected"],
                      [[r["impl"], r["n"], r["refused"], r["accepted"], r["as_expected"]] for r in d["limits"]]))
    p.append("<h2>Grids (client rows &times; server columns)</h2>")
    for wire, route, clients, servers, cells in grids(d):
        p.append(f"<h3>{html.escape(wire)} &mdash; {html.escape(route)}</h3>")
        p.append(_h_grid("client \\ server", clients, servers, cells))
    p.append("<h2>Slowest cells (median round trip)</h2>")
    p.append(_h_table(["cell", "rtt (µs)", "cell time (s)"],
                      [[r["cell_id"], _us(r["rtt_us"]), r["duration_s"]] for r in d["slowest"]]))
    p.append("<h2>Slowest 100-byte cells (median round trip)</h2>")
    p.append(_h_table(["cell", "rtt (µs)", "cell time (s)"],
                      [[r["cell_id"], _us(r["rtt_us"]), r["duration_s"]] for r in d.get("slowest_small", [])]))
    p.append("<h2>Longest-running cells</h2>")
    p.append(_h_table(["cell", "observed", "cell time (s)"],
                      [[r["cell_id"], r["observed"], r["duration_s"]] for r in d["longest"]]))
    if d["problems"]:  # what went wrong comes first, right after the totals
        p[5:5] = ["<h2 id=problems>Mismatches and envelope problems</h2>",
                  "<p class=small>Each with the bytes each side saw (hex, each message cut at "
                  "24 bytes).</p>",
                  _h_table(["cell", "expected", "observed", "envelope ok", "known issue",
                            "detail", "bytes each side saw"],
                           [[r["cell_id"], r["expected"], r["observed"], r["envelope_ok"],
                             r.get("known_issue") or "", (r["detail"] or "")[:600],
                             r.get("bytes_seen") or ""] for r in d["problems"]],
                           [["", "", "skip" if r.get("known_issue") else "bad", "", "", "",
                             "mono"] for r in d["problems"]])]
    else:
        p.append("<h2>Mismatches and envelope problems</h2>")
        p.append("<p>None: every cell behaved as the pairing tables and limits predict.</p>")
    p += html_skipped(d) + html_implementations(d) + html_impl_pairs(d) + html_cells(d)
    p.append(f"<script>{FILTER_JS}</script></body></html>")
    return "\n".join(p) + "\n"


def html_skipped(d: dict[str, Any]) -> list[str]:
    if not d.get("skipped"):
        return []
    return ["<h2>Skipped cells</h2>",
            "<p class=small>An implementation missing on the machine that ran the matrix: "
            "its cells are reported here, with the reason, never dropped.</p>",
            _h_table(["reason", "cells"], [[r["detail"], r["n"]] for r in d["skipped"]])]


def html_implementations(d: dict[str, Any]) -> list[str]:
    from gateway.tools.matrix.impls import IMPLEMENTATIONS

    cells: dict[str, int] = defaultdict(int)
    for r in d.get("impl_pairs", []):
        cells[r["client_impl"]] += r["n"]
        if r["server_impl"] != r["client_impl"]:
            cells[r["server_impl"]] += r["n"]
    return ["<h2>Implementations</h2>",
            _h_table(["name", "wire", "the wire implementation inside", "runs as", "cells"],
                     [[i.name, "/".join(i.wires), i.what, i.runtime, cells.get(i.name, 0)]
                      for i in IMPLEMENTATIONS.values()])]


def html_impl_pairs(d: dict[str, Any]) -> list[str]:
    """One pairing table per implementation pair (client implementation > server
    implementation): client types down, server types across, every cell of the pair counted
    there (all shapes, transports and routes); hover for each cell's outcome."""
    by: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    for r in d.get("impl_pairs", []):
        by[(r["client_impl"], r["server_impl"])][(r["client_type"], r["server_type"])] = r
    out = ["<h2>Pairing tables per implementation pair</h2>",
           "<p class=small>Client implementation &gt; server implementation; rows: the client's "
           "socket type, columns: the server's; each square counts that pairing's cells over "
           "every shape, transport and route (direct and through the gateway). Green: all as "
           "expected; red: at least one not; grey: skipped here.</p>"]
    for (ci, si), grid in sorted(by.items()):
        n = sum(r["n"] for r in grid.values())
        out.append(f"<h3>{html.escape(ci)} &gt; {html.escape(si)} ({n} cells)</h3>")
        out.append(_h_grid(f"{ci} \\ {si}", sorted({a for a, _ in grid}),
                           sorted({b for _, b in grid}), grid))
    return out


def html_cells(d: dict[str, Any]) -> list[str]:
    """Every cell, filtered in the page by shape, route and outcome."""
    cells = d.get("all_cells", [])
    if not cells:
        return []

    def options(key: str) -> str:
        values = sorted({str(r[key]) for r in cells})
        return "".join(f"<option>{html.escape(v)}</option>" for v in values)

    out = ["<h2 id=cells>Every cell</h2>",
           "<p class=small>Filter: "
           f"shape <select id=f-shape data-col=shape><option value=''>all</option>{options('shape')}</select> "
           f"route <select id=f-route data-col=route><option value=''>all</option>{options('route')}</select> "
           f"outcome <select id=f-outcome data-col=outcome><option value=''>all</option>"
           "<option value=as-expected>as expected</option><option value=not-as-expected>not as "
           f"expected</option>{options('observed')}</select> "
           "<span id=f-count></span></p>",
           "<table id=cells-table><tr><th>cell</th><th>client</th><th>server</th><th>transport</th>"
           "<th>route</th><th>shape</th><th>expected</th><th>observed</th><th>rtt (µs)</th></tr>"]
    for r in cells:
        good = r["observed"] == r["expected"] and r["envelope_ok"]
        state = ("skip" if r["observed"] == "skipped" else "ok" if good else "bad")
        verdict = "as-expected" if good else "not-as-expected"
        out.append(
            f"<tr data-shape=\"{html.escape(r['shape'])}\" data-route=\"{html.escape(r['route'])}\" "
            f"data-outcome=\"{html.escape(r['observed'])} {verdict}\">"
            f"<td>{html.escape(r['cell_id'])}</td>"
            f"<td>{html.escape(r['client_impl'])} {html.escape(r['client_type'])}</td>"
            f"<td>{html.escape(r['server_impl'])} {html.escape(r['server_type'])}</td>"
            f"<td>{html.escape(r['transport'])}</td><td>{html.escape(r['route'])}</td>"
            f"<td>{html.escape(r['shape'])}</td><td>{html.escape(r['expected'])}</td>"
            f"<td class={state}>{html.escape(r['observed'])}</td><td>{_us(r['rtt_us'])}</td></tr>")
    out.append("</table>")
    return out


FILTER_JS = """
(function () {
  var sels = ['f-shape', 'f-route', 'f-outcome'].map(function (i) { return document.getElementById(i); });
  var rows = Array.prototype.slice.call(document.querySelectorAll('#cells-table tr[data-shape]'));
  function apply() {
    var shown = 0;
    rows.forEach(function (tr) {
      var ok = sels.every(function (s) {
        if (!s || !s.value) { return true; }
        var have = tr.getAttribute('data-' + s.getAttribute('data-col')).split(' ');
        return have.indexOf(s.value) >= 0;
      });
      tr.style.display = ok ? '' : 'none';
      if (ok) { shown += 1; }
    });
    var c = document.getElementById('f-count');
    if (c) { c.textContent = shown + ' of ' + rows.length + ' cells'; }
  }
  sels.forEach(function (s) { if (s) { s.addEventListener('change', apply); } });
  var q = new URLSearchParams(window.location.search);
  sels.forEach(function (s) { if (s && q.get(s.getAttribute('data-col'))) { s.value = q.get(s.getAttribute('data-col')); } });
  apply();
})();
"""


def run(args: argparse.Namespace) -> int:
    import os

    if not os.path.isdir(args.dir):
        print(f"gateway matrix report: {args.dir} is not a directory", file=sys.stderr)
        return 2
    from gateway.tools.matrix import spark_session

    spark = spark_session(args.master, "gateway-matrix-report")
    try:
        d = gather(spark, args.dir)
    finally:
        spark.stop()
    mark_known(d)
    d["stamp"] = stamp()
    if args.format == "json":
        import json

        text = json.dumps(d, indent=1, default=str) + "\n"
    elif args.format == "html":
        text = render_html(d, args.dir)
    else:
        text = render_markdown(d, args.dir)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"report written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return exit_code(d)


def mark_known(d: dict[str, Any]) -> None:
    """Each problem that is a known issue (``cells.KNOWN_ISSUES``) says so, and the totals
    count it apart: it is explained, not a mismatch."""
    from gateway.tools.matrix.cells import Cell, known_issue

    t = d["totals"]
    t["known"] = 0
    for r in d["problems"]:
        try:
            why = known_issue(Cell.from_id(r["cell_id"]))
        except (ValueError, KeyError):  # a cell of another version of the catalog
            why = None
        r["known_issue"] = why or ""
        if why:
            t["known"] += 1
            if r["observed"] != r["expected"]:
                t["mismatches"] = (t.get("mismatches") or 0) - 1
            if not r["envelope_ok"]:
                t["envelope_bad"] = (t.get("envelope_bad") or 0) - 1


def exit_code(d: dict[str, Any]) -> int:
    """1 when a cell did not behave as predicted or an envelope check failed, else 0."""
    t = d["totals"]
    return 1 if (t.get("mismatches") or 0) or (t.get("envelope_bad") or 0) else 0
