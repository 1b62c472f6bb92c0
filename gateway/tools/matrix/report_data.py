"""What ``gateway matrix report`` (:mod:`gateway.tools.matrix.report`) says, before any format:
the aggregates Spark SQL computes over the Parquet of a run (:func:`gather`), and what both
renderers derive from them (pairing tables as observed, grids, per-group summaries, totals per
implementation pair).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations_with_replacement
from typing import Any

ABBR = {"exchanged": "ex", "refused-handshake": "hs", "refused-limit": "lim",
        "refused-auth": "auth", "timeout": "to", "connected": "conn", "error": "err",
        "bad-reply": "bad"}
ZMTP_ORDER = ("REQ", "REP", "DEALER", "ROUTER")
LIB_SP = ("nng", "nng-raw", "nanomsg", "nng-1.5")


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
    """One table per pattern family: each pairing the libraries were run with (direct cells), its
    verdict against :mod:`gateway.tools.matrix.pattern_rules`' pattern tables; then each gateway
    route of the family (``gateway-<pattern>:...``) with how many of its cells behaved as
    expected."""
    from gateway.tools.matrix.pattern_rules import FAMILY_OF, pattern_legal

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


def _stamp_line(d: dict[str, Any]) -> str:
    st = d.get("stamp") or {}
    return "; ".join(f"{k} {v}" for k, v in st.items())


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
