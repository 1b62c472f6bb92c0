#!/usr/bin/env python3
"""Run every example command that README.md, examples/README.md and the documentation site's
getting-started and task pages document, as a newcomer would.

Each fenced block is one terminal session, run from the repository root in the environment the
README's set-up builds (``make env``, then ``. .venv/bin/activate``, as the docs say):

* ```` ```sh ```` blocks run in ``bash -eo pipefail``; a command ending in ``&`` is a server or a
  bridge left running: when the block ends, each such job gets SIGINT (Ctrl-C) and must exit by
  itself within ``GRACE`` seconds;
* ```` ```python ```` blocks run with the environment's python;
* ```` ```text ````, ```` ```toml ````, ```` ```yaml ```` (and ini, json) blocks are synopses and
  listings, not commands.

A block whose first line is ``# docs: skip <reason>`` is listed with its reason and not run
(``make test``: it is the command that runs this script). Exit 1 when any block fails, with
its file, line, and output.

    python3 .ci/doc_examples.py [--list] [FILE...]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "examples/README.md", "docs/getting-started.md", "docs/tasks/zmq-to-nng.md",
        "docs/tasks/curve.md", "docs/tasks/systemd.md", "docs/tasks/metrics.md")
RUN = {"sh": "bash", "python": "python"}
SHOWN = {"text", "toml", "ini", "console", "yaml", "json", ""}
TIMEOUT = 240.0  # seconds a block may take
GRACE = 10.0  # seconds a background job may take to exit after Ctrl-C
FENCE = re.compile(r"^```(\w*)\s*$")

# Background jobs get Ctrl-C when the block ends; a job still there after GRACE fails the block.
EPILOGUE = f"""
__docs_status=0
for __pid in $(jobs -p); do kill -INT "$__pid" 2>/dev/null || true; done
__end=$((SECONDS + {int(GRACE)}))
while [ -n "$(jobs -pr)" ] && [ "$SECONDS" -lt "$__end" ]; do sleep 0.2; done
if [ -n "$(jobs -pr)" ]; then
  echo "docs: background job(s) still running {int(GRACE)} s after Ctrl-C:" >&2; jobs -l >&2
  kill -KILL $(jobs -pr) 2>/dev/null || true; __docs_status=1
fi
exit $__docs_status
"""


@dataclass
class Block:
    path: str
    line: int
    lang: str
    text: str

    @property
    def skip(self) -> str | None:
        """The reason given by a first line ``# docs: skip <reason>``, else None."""
        first = (self.text.strip().splitlines() or [""])[0]
        if not first.startswith("# docs: skip"):
            return None
        return first.removeprefix("# docs: skip").strip(" :") or "no reason given"


def blocks(path: str) -> list[Block]:
    out: list[Block] = []
    lang: str | None = None
    start, body = 0, []
    for number, line in enumerate((REPO / path).read_text().splitlines(), 1):
        match = FENCE.match(line)
        if lang is None and match:
            lang, start, body = match.group(1), number, []
        elif lang is not None and line.startswith("```"):
            out.append(Block(path, start, lang, "\n".join(body) + "\n"))
            lang = None
        elif lang is not None:
            body.append(line)
    if lang is not None:
        raise SystemExit(f"{path}:{start}: unclosed code block")
    return out


def environment() -> dict[str, str]:
    """What ``. .venv/bin/activate`` gives: the venv's bin first on PATH."""
    env = dict(os.environ)
    venv = REPO / ".venv"
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONHOME", None)
    return env


def run(block: Block) -> tuple[bool, str, float]:
    if block.lang == "sh":
        # set -m: job control, as in a terminal (without it bash starts `&` jobs with SIGINT
        # ignored, and Ctrl-C could not reach them)
        argv = ["bash", "-eo", "pipefail", "-c", "set -m\n" + block.text + EPILOGUE]
    else:
        argv = ["python", "-c", block.text]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=REPO, env=environment(), capture_output=True, text=True,
                              timeout=TIMEOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        output = f"{exc.stdout or ''}{exc.stderr or ''}"
        return False, f"timed out after {TIMEOUT:.0f} s\n{output}", time.monotonic() - started
    return done.returncode == 0, done.stdout + done.stderr, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(DOCS))
    parser.add_argument("--list", action="store_true", help="show the blocks, run nothing")
    args = parser.parse_args(argv)
    # Ctrl-C as in a terminal, however this script was started: a run launched as a background
    # job of a non-interactive shell inherits SIGINT ignored, and so would every example server,
    # which then never sees the Ctrl-C the epilogue sends (a handler, unlike SIG_IGN, is reset
    # to the default by exec)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    found = [b for path in args.files for b in blocks(path)]
    unknown = [b for b in found if b.lang not in RUN and b.lang not in SHOWN]
    for b in unknown:
        print(f"{b.path}:{b.line}: code block language {b.lang!r}: say sh, python or text",
              file=sys.stderr)
    if unknown:
        return 1
    failed = ran = 0
    for b in found:
        where = f"{b.path}:{b.line}"
        if b.lang not in RUN:
            continue
        if b.skip is not None:
            print(f"skip  {where} ({b.skip})")
            continue
        if args.list:
            print(f"run   {where} ({b.lang}, {len(b.text.splitlines())} lines)")
            continue
        ok, output, took = run(b)
        ran += 1
        print(f"{'ok   ' if ok else 'FAIL '} {where} ({took:.1f} s)", flush=True)
        if not ok:
            failed += 1
            print("  " + "\n  ".join(b.text.rstrip().splitlines()), file=sys.stderr)
            print("  output:\n    " + "\n    ".join(output.rstrip().splitlines()[-40:]),
                  file=sys.stderr)
    if not args.list:
        print(f"docs: {ran} block(s) run, {failed} failing")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
