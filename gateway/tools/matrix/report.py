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
import sys
from typing import Any

from gateway.tools.matrix.report_data import gather
from gateway.tools.matrix.report_html import render_html
from gateway.tools.matrix.report_markdown import render_markdown


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="Parquet directory written by `gateway matrix run`")
    p.add_argument("--format", choices=("markdown", "html", "json"), default="markdown",
                   help="markdown (default), html, or json (the aggregates, for machines)")
    p.add_argument("--output", "-o", default=None, metavar="FILE", help="write here (default: stdout)")
    p.add_argument("--master", default=None, metavar="URL", help="Spark master (default local[*])")
    p.epilog = "Exit code: 0 when every cell behaved as predicted, 1 otherwise, 2 on bad input."


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
    """Each problem that is a known issue (``outcomes.KNOWN_ISSUES``) says so, and the totals
    count it apart: it is explained, not a mismatch."""
    from gateway.tools.matrix.cells import Cell
    from gateway.tools.matrix.outcomes import known_issue

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
