"""The HTML form of ``gateway matrix report`` (:mod:`gateway.tools.matrix.report`), from the
aggregates of :mod:`gateway.tools.matrix.report_data`: one page, its grids coloured by outcome
(hover for each cell's), every cell in a table filtered in the page by shape, route and outcome.
"""

from __future__ import annotations

import html
from collections import defaultdict
from typing import Any

from gateway.tools.matrix.report_data import (
    FAMILY_TITLES,
    _stamp_line,
    _us,
    grids,
    pairing_table,
    pattern_pairing_tables,
    summary_text,
)

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
