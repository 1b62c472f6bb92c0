"""The tools' subcommands of the ``gateway`` CLI: ``gateway bench`` and ``gateway matrix``.

``gateway.cli`` knows no tool: it reads the ``gateway.commands`` entry-point group (see
``pyproject.toml``) and, for each entry, adds a subcommand with the entry's name and the
loaded object's ``help``; only the subcommand being run is configured (``configure(parser)``)
and then run (``run(args)``, the exit status). A mistake is a
:class:`~gateway.errors.ConfigError` (one line per mistake on stderr, exit 2). This module stays
cheap to import: the heavy modules load inside ``configure`` and ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from gateway.errors import ConfigError

MATRIX_EXTRA = ("the matrix runs on Spark, which is not installed: "
                "pip install 'zmq-sp-gateway[matrix]'")


class Bench:
    """``gateway bench``: :mod:`gateway.tools.bench`."""

    help = "latency/throughput side by side with libzmq, nng, zmq.proxy"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        try:
            from gateway.tools import bench
        except ImportError as exc:  # a missing library: said when the command runs
            parser.set_defaults(bench_missing=str(exc))
            return
        bench.configure_parser(parser)

    def run(self, args: argparse.Namespace) -> int:
        if getattr(args, "bench_missing", None):
            raise ConfigError(f"bench unavailable: {args.bench_missing}")
        from gateway.tools import bench

        return int(bench.run(args))


class Matrix:
    """``gateway matrix run|report``: :mod:`gateway.tools.matrix` (its cell library loads only
    when this command runs; Spark only when a run or a report starts)."""

    help = "the interop matrix on Spark (the [matrix] extra)"
    actions = (("run", "run the matrix as Spark tasks, write Parquet"),
               ("report", "render a run as markdown or HTML"))

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.set_defaults(matrix_parser=parser)
        sub = parser.add_subparsers(dest="matrix_command", metavar="ACTION",
                                    parser_class=type(parser))
        for action, text in self.actions:
            p = sub.add_parser(action, help=text)
            p.set_defaults(matrix_action=action)
            importlib.import_module(f"gateway.tools.matrix.{action}").configure_parser(p)

    def run(self, args: argparse.Namespace) -> int:
        action = getattr(args, "matrix_action", None)
        if not action:  # like a bare `gateway`: the help, exit 2
            args.matrix_parser.print_help(sys.stderr)
            return 2
        if not getattr(args, "list", False) and importlib.util.find_spec("pyspark") is None:
            raise ConfigError(MATRIX_EXTRA)
        return int(importlib.import_module(f"gateway.tools.matrix.{action}").run(args))


BENCH = Bench()
MATRIX = Matrix()
