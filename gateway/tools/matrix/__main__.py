"""``python -m gateway.tools.matrix run|report ...`` — the same as ``gateway matrix run|report``."""

from __future__ import annotations

import argparse
import sys

from gateway.tools.matrix import report, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.tools.matrix", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    run.configure_parser(sub.add_parser("run", help="run the matrix as Spark tasks, write Parquet"))
    report.configure_parser(sub.add_parser("report", help="render a run as markdown or HTML"))
    args = parser.parse_args(argv)
    return int((run if args.action == "run" else report).run(args))


if __name__ == "__main__":
    sys.exit(main())
