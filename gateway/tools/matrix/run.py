"""``gateway matrix run --out DIR [--master URL] [--select EXPR] [--timeout S]``.

The selected cells become a Spark DataFrame (one row per cell), repartitioned to exactly one
cell per partition, so one Spark task runs one cell on an executor; the rows that come back
are written as Parquet to DIR (columns: ``gateway.tools.matrix.cells.RESULT_COLUMNS``). Progress
(cells done / total, mismatches so far) goes to stderr as cells finish. Exit code: 0 when
every observed outcome equals the expected one and every envelope check passed, 1 otherwise,
2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any

from gateway.tools.matrix.catalog import all_cells, select
from gateway.tools.matrix.cells import DEFAULT_TIMEOUT, RESULT_COLUMNS, SKIPPED, Cell
from gateway.tools.matrix.outcomes import expected, known_issue


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="DIR",
                   help="Parquet output directory (required unless --list): new, empty, or an "
                        "earlier matrix output (which is replaced); anything else is refused "
                        "unless --force")
    p.add_argument("--force", action="store_true",
                   help="replace --out even when it holds files that are not a matrix output")
    p.add_argument("--master", default=None, metavar="URL",
                   help=f"Spark master: local[N], spark://host:7077, ... (default "
                        f"{default_master()}: the cells mostly wait, so more task slots "
                        "than cores)")
    p.add_argument("--select", default=None, metavar="EXPR",
                   help="filter cells: 'key=value,key!=value,substring,@ci,@small' "
                        "(keys: client_impl server_impl client_type server_type impl type transport "
                        "net wire route shape expected cell_id; values are globs, a|b alternatives)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds to wait for a reply or a handshake in a cell (default {DEFAULT_TIMEOUT})")
    p.add_argument("--list", action="store_true",
                   help="print the selected cell ids and exit (no Spark); counts per "
                        "implementation, shape, transport, mechanism and route on stderr")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting for the run (repeatable), e.g. spark.cores.max=8 on "
                        "a cluster")


def default_master() -> str:
    """``local[3 x cores]``: a cell mostly waits (handshakes, refusals, peers starting), so
    three cells a core keep the cores busy without starving the cells' own deadlines."""
    return f"local[{3 * (os.cpu_count() or 1)}]"


def out_dir_problem(path: str, force: bool = False) -> str | None:
    """Why ``--out`` must not be written (None: go ahead). Spark replaces the whole directory,
    so only a new or empty one, or one holding nothing but an earlier Parquet output
    (``part-*``, ``_SUCCESS`` and their ``.crc`` files), is taken without ``--force``."""
    if not os.path.exists(path):
        return None
    if not os.path.isdir(path):
        return f"--out {path} is a file, not a directory"
    if force:
        return None
    foreign = sorted(n for n in os.listdir(path)
                     if not (n.lstrip(".").startswith(("part-", "_SUCCESS"))))
    if foreign:
        shown = ", ".join(foreign[:3]) + (" ..." if len(foreign) > 3 else "")
        return (f"--out {path} holds files that are not a matrix output ({shown}); "
                f"choose another directory, or --force to replace it")
    return None


def counts(cells: list[Cell]) -> list[str]:
    """How many cells per implementation (either side), shape, transport, mechanism and
    route: the lines ``--list`` ends with (on stderr)."""
    from collections import Counter

    from gateway.tools.matrix.cells import SECURITY

    def mechanism(c: Cell) -> str:
        sec = SECURITY.get(c.shape)
        zmq = "zmq" in (c.client_wire, c.server_wire)
        return (sec.zmtp if sec is not None and sec.zmtp else "NULL") if zmq else "(SP only)"

    def transport(c: Cell) -> str:
        sec = SECURITY.get(c.shape)
        nets = {f"{w}+{sec.sp if sec is not None and sec.sp and w == 'sp' else c.net}"
                for w in (c.client_wire, c.server_wire)}
        if sec is not None and sec.zws:
            nets.add(f"zmq+{sec.zws}")
        return ",".join(sorted(nets))

    tables = {
        "implementation": Counter(i for c in cells for i in {c.client_impl, c.server_impl}),
        "shape": Counter(c.shape for c in cells),
        "transport": Counter(transport(c) for c in cells),
        "mechanism": Counter(mechanism(c) for c in cells),
        "route": Counter(c.route.partition(":")[0] if c.direct else
                         f"{c.wire} {c.route}" for c in cells),
        "expected": Counter(expected(c) for c in cells),
    }
    return [f"by {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(t.items()))
            for name, t in tables.items()]


def estimated_cost(cell: Cell, timeout: float) -> float:
    """Seconds a cell is likely to take: refusals wait for their timeout, the gateway starts a
    process. Used to start the long cells first (longest-processing-time-first packing)."""
    cost = 0.15
    if expected(cell) != "exchanged":
        cost += timeout
    if not cell.direct:
        cost += 0.6
    return cost


#: a second attempt is made for at most this share of the cells (more is no load flake)
RETRY_SHARE = 0.05


def _bad(row: tuple[Any, ...], cells_by_id: dict[str, Cell]) -> bool:
    obs, exp = row[RESULT_COLUMNS.index("observed")], row[RESULT_COLUMNS.index("expected")]
    if obs == SKIPPED or known_issue(cells_by_id[row[RESULT_COLUMNS.index("cell_id")]]):
        return False
    return bool(obs != exp or not row[RESULT_COLUMNS.index("envelope_ok")])


def _retry_mismatches(spark: Any, rows: list[Any], cells: list[Cell],
                      run_partition: Any) -> tuple[list[Any], tuple[int, int] | None]:
    """Run the cells that did not end as expected once more, one task at a time (a cell's
    deadline is in seconds, and a machine shared with other work can miss one); the second
    row replaces the first, whose outcome and detail it keeps in its own detail. Nothing is
    retried when more than ``RETRY_SHARE`` of the cells failed: that is not a flake."""
    by_id = {c.cell_id: c for c in cells}
    ci = RESULT_COLUMNS.index("cell_id")
    bad = [i for i, r in enumerate(rows) if _bad(r, by_id)]
    if not bad or len(bad) > RETRY_SHARE * len(rows):
        return rows, None
    from pyspark.sql import Row

    again_df = spark.createDataFrame(
        [Row(cell_index=i, **by_id[rows[i][ci]].as_dict()) for i in bad])
    again = (again_df.rdd.map(lambda r: (0, r)).partitionBy(1, lambda k: 0).values()
             .mapPartitions(run_partition).collect())
    detail, obs = RESULT_COLUMNS.index("detail"), RESULT_COLUMNS.index("observed")
    second = {r[ci]: r for r in again}
    out = list(rows)
    for i in bad:
        first = rows[i]
        row = list(second.get(first[ci], first))
        row[detail] = (f"{row[detail] or ''}; first attempt: {first[obs]}: "
                       f"{first[detail] or ''}")[:2000]
        out[i] = tuple(row)
    return out, (len(bad), sum(not _bad(out[i], by_id) for i in bad))


def result_schema() -> Any:
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        StringType,
        StructField,
        StructType,
    )

    types = {"envelope_ok": BooleanType(), "rtt_us": DoubleType(), "duration_s": DoubleType()}
    return StructType([StructField(c, types.get(c, StringType()), c not in ("cell_id",))
                       for c in RESULT_COLUMNS])


def _row_tuple(row: dict[str, Any]) -> tuple[Any, ...]:
    out = []
    for c in RESULT_COLUMNS:
        v = row.get(c)
        if c in ("rtt_us", "duration_s") and v is not None:
            v = float(v)
        if c == "envelope_ok":
            v = bool(v)
        out.append(v)
    return tuple(out)


class Progress(threading.Thread):
    """Prints ``cells done/total`` from the accumulators while the Spark job runs."""

    def __init__(self, total: int, done: Any, bad: Any, every: float = 5.0) -> None:
        super().__init__(daemon=True, name="matrix-progress")
        self.total, self.done, self.bad, self.every = total, done, bad, every
        self.stopped = threading.Event()
        self.t0 = time.monotonic()

    def line(self) -> str:
        done = int(self.done.value)
        el = time.monotonic() - self.t0
        return (f"[matrix] {done}/{self.total} cells done, {int(self.bad.value)} mismatch(es), "
                f"{el:.0f}s elapsed")

    def run(self) -> None:
        last = -1
        last_t = 0.0
        while not self.stopped.wait(1.0):
            done = int(self.done.value)
            if done != last or time.monotonic() - last_t > 30:
                print(self.line(), file=sys.stderr, flush=True)
                last, last_t = done, time.monotonic()


def run(args: argparse.Namespace) -> int:
    try:
        cells = select(all_cells(), args.select)
    except ValueError as exc:
        print(f"gateway matrix run: {exc}", file=sys.stderr)
        return 2
    if not cells:
        print(f"gateway matrix run: no cell matches --select {args.select!r}", file=sys.stderr)
        return 2
    timeout = float(args.timeout)
    if getattr(args, "list", False):
        for c in cells:
            print(c.cell_id, expected(c))
        print(f"{len(cells)} cells", file=sys.stderr)
        for line in counts(cells):
            print(line, file=sys.stderr)
        return 0
    if not args.out:
        print("gateway matrix run: --out DIR is required (or --list to see the cells)",
              file=sys.stderr)
        return 2
    problem = out_dir_problem(args.out, getattr(args, "force", False))
    if problem:
        print(f"gateway matrix run: {problem}", file=sys.stderr)
        return 2
    cells.sort(key=lambda c: -estimated_cost(c, timeout))
    t0 = time.monotonic()
    args.master = args.master or default_master()
    print(f"[matrix] {len(cells)} cells, master {args.master}, timeout {timeout}s; "
          "starting Spark", file=sys.stderr, flush=True)

    from pyspark.sql import Row

    from gateway.tools.matrix import spark_session

    conf = dict(kv.split("=", 1) for kv in getattr(args, "conf", []) if "=" in kv)
    spark = spark_session(args.master, "gateway-matrix-run", conf)
    try:
        sc = spark.sparkContext
        n = len(cells)
        cells_df = spark.createDataFrame([Row(cell_index=i, **c.as_dict()) for i, c in enumerate(cells)])
        done_acc = sc.accumulator(0)
        bad_acc = sc.accumulator(0)

        def run_partition(rows: Any) -> Any:
            from gateway.tools.matrix.cells import Cell
            from gateway.tools.matrix.host import run_cell

            for r in rows:
                d = r.asDict()
                d.pop("cell_index", None)
                res = run_cell(Cell.from_dict(d), timeout)
                done_acc.add(1)
                if res.get("observed") not in (res.get("expected"), SKIPPED):
                    bad_acc.add(1)
                yield _row_tuple(res)

        one_per_partition = (cells_df.rdd.map(lambda r: (r.cell_index, r))
                             .partitionBy(n, lambda k: k).values())
        progress = Progress(n, done_acc, bad_acc)
        print(f"[matrix] Spark {spark.version} up in {time.monotonic() - t0:.0f}s, "
              f"{sc.defaultParallelism} task slot(s); running {n} tasks", file=sys.stderr, flush=True)
        progress.start()
        try:
            rows = one_per_partition.mapPartitions(run_partition).collect()
        finally:
            progress.stopped.set()
        print(progress.line(), file=sys.stderr, flush=True)
        rows, retried = _retry_mismatches(spark, rows, cells, run_partition)
        if retried:
            print(f"[matrix] {retried[0]} cell(s) not as expected, run again one by one: "
                  f"{retried[1]} as expected the second time (their first attempt is in "
                  "their detail)", file=sys.stderr, flush=True)
        results = spark.createDataFrame(rows, result_schema())
        results.coalesce(1).write.mode("overwrite").parquet(args.out)
        obs, exp = RESULT_COLUMNS.index("observed"), RESULT_COLUMNS.index("expected")
        skipped = [r for r in rows if r[obs] == SKIPPED]
        by_id = {c.cell_id: c for c in cells}
        ci = RESULT_COLUMNS.index("cell_id")
        env = RESULT_COLUMNS.index("envelope_ok")
        known = [r for r in rows if (r[obs] not in (r[exp], SKIPPED) or not r[env])
                 and r[obs] != SKIPPED and known_issue(by_id[r[ci]])]
        mism = [r for r in rows if r[obs] not in (r[exp], SKIPPED) and r not in known]
        env_bad = [r for r in rows if not r[RESULT_COLUMNS.index("envelope_ok")]
                   and r[obs] != SKIPPED and r not in known]
        for r in known:
            print(f"KNOWN {r[ci]}: {known_issue(by_id[r[ci]])}", file=sys.stderr)
        for r in mism[:60]:
            print(f"MISMATCH {r[ci]}: expected {r[RESULT_COLUMNS.index('expected')]}, observed "
                  f"{r[RESULT_COLUMNS.index('observed')]}: {r[RESULT_COLUMNS.index('detail')][:300]}",
                  file=sys.stderr)
        for r in env_bad[:20]:
            if r not in mism:
                print(f"ENVELOPE {r[ci]}: {r[RESULT_COLUMNS.index('detail')][:300]}", file=sys.stderr)
        why: dict[str, int] = {}
        for r in skipped:
            reason = str(r[RESULT_COLUMNS.index("detail")]).partition("skipped: ")[2][:200]
            why[reason] = why.get(reason, 0) + 1
        for reason, k in sorted(why.items()):
            print(f"SKIPPED {k} cell(s): {reason}", file=sys.stderr)
        where: dict[str, int] = {}
        for r in rows:
            e = str(r[RESULT_COLUMNS.index("executor")])
            where[e] = where.get(e, 0) + 1
        for e, k in sorted(where.items()):
            print(f"[matrix] executor {e}: {k} cell(s)", file=sys.stderr)
        print(f"[matrix] {n} cells in {time.monotonic() - t0:.0f}s: "
              f"{n - len(mism) - len(skipped) - len(known)} as expected, {len(mism)} "
              f"mismatch(es), {len(known)} known issue(s), {len(skipped)} skipped, "
              f"{len(env_bad)} envelope problem(s); Parquet: {args.out}",
              file=sys.stderr, flush=True)
        return 1 if (mism or env_bad) else 0
    finally:
        spark.stop()
