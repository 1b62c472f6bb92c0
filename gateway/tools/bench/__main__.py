"""``python -m gateway.tools.bench``: the same as ``gateway bench``."""

from __future__ import annotations

import argparse

from gateway.tools.bench import configure_parser, run

parser = argparse.ArgumentParser(prog="gateway bench")
configure_parser(parser)
raise SystemExit(run(parser.parse_args()))
