"""``python -m fuzz``: run the harnesses, replay the corpus, capture the seeds.

    python -m fuzz run [NAME ...] [--seconds 60] [--engine auto|atheris|hypothesis] [--merge]
    python -m fuzz replay [NAME ...] [--strict]
    python -m fuzz merge [NAME ...]
    python -m fuzz one NAME FILE [--strict] [--sanitized]
    python -m fuzz seeds [--kernel]

``run`` gives each harness ``--seconds`` (atheris when it imports, else hypothesis), one after
the other, in processes of their own under atheris; the working corpus is ``out/fuzz/corpus/
NAME`` (new inputs go there) on top of ``fuzz/corpus/NAME`` (read), a crash is written to
``fuzz/corpus/NAME/crash-<sha1>`` (so the replay test sees it); ``--merge`` then adds to
``fuzz/corpus/NAME`` the inputs of the working corpus that cover something the kept ones do not
(libFuzzer ``-merge=1``). It prints, per harness: executions, executions per second, inputs
with new coverage, known findings seen, crashes; exit status 1 when any harness crashed. The
kernel harnesses (``fuzz.SANITIZED``) run under atheris on the kernel's sanitizer build
(``fuzz/_asan.py``, built in the background from the start of the run), and the run also fails
when the sanitizer's canary is not reported or one of them did not prove that build.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from fuzz import HARNESSES, SANITIZED, _asan

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fuzz" / "corpus"
DICTS = ROOT / "fuzz" / "dicts"
WORK = ROOT / "out" / "fuzz"


@dataclass
class Result:
    name: str
    engine: str
    seconds: float = 0.0
    execs: int = 0
    new_inputs: int = 0
    coverage: int = 0  # libFuzzer's "cov" (atheris only)
    known: dict[str, int] = field(default_factory=dict)
    crashes: list[str] = field(default_factory=list)
    kept: int = 0  # inputs --merge added to fuzz/corpus
    sanitizer: str = ""  # the kernel harnesses: the build they ran (fuzz/_asan.py verify)


def corpus_files(name: str) -> list[Path]:
    d = CORPUS / name
    return sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []


def harness(name: str) -> ModuleType:
    return importlib.import_module(HARNESSES[name][0])


def has_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


# -- atheris -----------------------------------------------------------------------------------
def _launcher(name: str) -> dict[str, str]:
    """The environment of an atheris process: ``FUZZ_ARGV0`` names a script that starts the
    harness again (libFuzzer's ``-merge=1`` runs its argv[0] in a child process)."""
    WORK.mkdir(parents=True, exist_ok=True)
    script = WORK / f"run-{name}.sh"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m fuzz._atheris {name} "$@"\n')
    script.chmod(0o755)
    return {**os.environ, "PYTHONPATH": str(ROOT), "FUZZ_ARGV0": str(script)}


def merge(name: str, env: dict[str, str] | None = None) -> int:
    """Add to ``fuzz/corpus/NAME`` the inputs of the working corpus that cover something the
    kept ones do not (libFuzzer ``-merge=1``); how many were added."""
    keep, work = CORPUS / name, WORK / "corpus" / name
    if not work.is_dir():
        return 0
    before = len(list(keep.iterdir()))
    # a kernel harness: inputs with new edges only (not new hit counts): it runs some 50-100
    # inputs a second under the sanitizers, and CI's 10 s start by running its kept corpus
    edges_only = ["-use_counters=0"] if name in SANITIZED else []
    with open(WORK / f"{name}.merge.log", "w") as out:
        subprocess.run([sys.executable, "-m", "fuzz._atheris", name, "-merge=1", *edges_only,
                        f"-max_len={HARNESSES[name][1]}", f"-artifact_prefix={WORK}/merge-",
                        str(keep), str(work)],
                       cwd=ROOT if env is None else _asan.OUT,
                       env={**_launcher(name), **(env or {})}, stdout=out,
                       stderr=subprocess.STDOUT,
                       check=False)
    return len(list(keep.iterdir())) - before


def run_atheris(name: str, seconds: int, merge_after: bool,
                sanitized: dict[str, str] | None = None) -> Result:
    work = WORK / "corpus" / name
    work.mkdir(parents=True, exist_ok=True)
    keep = CORPUS / name
    keep.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in keep.iterdir()}
    seen_file = WORK / f"{name}.known.json"
    seen_file.unlink(missing_ok=True)
    log = WORK / f"{name}.log"
    flags = [f"-max_total_time={seconds}", f"-max_len={HARNESSES[name][1]}",
             f"-artifact_prefix={keep}/", "-timeout=10", "-rss_limit_mb=2048",
             "-print_final_stats=1"]
    if (DICTS / f"{name}.dict").exists():
        flags.append(f"-dict={DICTS / f'{name}.dict'}")
    env = {**_launcher(name), "FUZZ_SEEN_FILE": str(seen_file)}
    if sanitized is not None:  # a kernel harness: the sanitizer build, its runtime preloaded
        env = {**env, **sanitized}
    cmd = [sys.executable, "-m", "fuzz._atheris", name, *flags, str(work), str(keep)]
    start = time.monotonic()
    with open(log, "w") as out:
        # (the sanitizer build's directory first: ``-m`` puts the working directory first on the
        # path, before PYTHONPATH)
        subprocess.run(cmd, cwd=ROOT if sanitized is None else _asan.OUT, env=env, stdout=out,
                       stderr=subprocess.STDOUT, check=False)
    result = Result(name, "atheris", round(time.monotonic() - start, 1))
    text = log.read_text(errors="replace")
    stats = dict(re.findall(r"stat::(\w+):\s*(\d+)", text))
    result.execs = int(stats.get("number_of_executed_units", 0))
    result.new_inputs = int(stats.get("new_units_added", 0))
    if not result.execs:  # a crash: no final stats, the last status line has the count
        counts = re.findall(r"^#(\d+)\s", text, re.M)
        result.execs = int(counts[-1]) if counts else 0
    if sanitized is not None:  # the process's own check (fuzz/_asan.py verify), and the
        # kernel's coverage counters libFuzzer found (its only ones: no Python is instrumented)
        checked = re.findall(r"^sanitizer: .*$", text, re.M)
        edges = re.findall(r"Loaded \d+ modules\s+\((\d+) inline 8-bit counters\)", text)
        if checked and edges and int(edges[0]):
            result.sanitizer = f"{checked[0]}; libFuzzer follows {edges[0]} edges of the kernel"
    covs = re.findall(r"\bcov: (\d+)", text)
    result.coverage = int(covs[-1]) if covs else 0
    if seen_file.exists():
        result.known = json.loads(seen_file.read_text())
    result.crashes = sorted(p for p in {p.name for p in keep.iterdir()} - before
                            if p.startswith(("crash-", "timeout-", "oom-", "leak-")))
    if merge_after:
        result.kept = merge(name, sanitized)
    return result


# -- hypothesis (where atheris is not installed) -------------------------------------------------
def _mutations(seed: bytes) -> Any:
    """Byte edits of a corpus input, as hypothesis draws them (it shrinks them too)."""
    from hypothesis import strategies as st

    edit = st.tuples(st.sampled_from(("set", "insert", "delete")),
                     st.integers(0, max(len(seed), 1)), st.binary(min_size=1, max_size=8))

    def apply(edits: list[tuple[str, int, bytes]]) -> bytes:
        out = bytearray(seed)
        for what, at, data in edits:
            at = min(at, len(out))
            if what == "set":
                out[at:at + len(data)] = data
            elif what == "insert":
                out[at:at] = data
            else:
                del out[at:at + len(data)]
        return bytes(out)

    return st.lists(edit, max_size=6).map(apply)


def run_hypothesis(name: str, seconds: int) -> Result:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from fuzz import _data

    module = harness(name)
    seeds = [p.read_bytes() for p in corpus_files(name)]
    strategy = st.binary(max_size=HARNESSES[name][1])
    if seeds:
        strategy = st.one_of(strategy, st.sampled_from(seeds).flatmap(_mutations))
    result = Result(name, "hypothesis")
    if name in SANITIZED:
        from gateway import kernel

        result.sanitizer = (f"none: the hypothesis engine (no atheris) runs the kernel as built "
                            f"({kernel.why()})")
    failing: list[bytes] = []
    _data.SEEN.clear()

    @settings(max_examples=200, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink])
    @given(strategy)
    def once(buf: bytes) -> None:
        result.execs += 1
        try:
            module.one_input(buf)
        except Exception:
            failing.append(buf)
            raise

    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            once()
        except Exception:
            crash = failing[-1]  # hypothesis ran the shrunk input last
            path = CORPUS / name / f"crash-{hashlib.sha1(crash).hexdigest()}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(crash)
            result.crashes.append(path.name)
            traceback.print_exc()
            break
    result.seconds = round(time.monotonic() - start, 1)
    result.known = dict(_data.SEEN)
    return result


def one_sanitized(name: str, file: Path, strict: bool) -> int:
    """``one`` again in a process of its own, on the sanitizer build (its report, if any)."""
    _asan.build()
    cmd = [sys.executable, "-m", "fuzz", "one", name, str(file.resolve())]
    done = subprocess.run(cmd + ["--strict"] * strict, cwd=_asan.OUT,
                          env={**os.environ, **_asan.environ()}, check=False)
    return done.returncode


# -- replay ------------------------------------------------------------------------------------
def replay(name: str, strict: bool = False) -> list[tuple[str, str]]:
    """Every kept input of ``name`` once (``known-*`` inputs only when ``strict`` is False:
    they show a known finding); the failures as (file, traceback)."""
    module = harness(name)
    failures = []
    for path in corpus_files(name):
        if strict and path.name.startswith("known-"):
            continue
        try:
            module.one_input(path.read_bytes(), strict=strict)
        except Exception:
            failures.append((path.name, traceback.format_exc()))
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="fuzz each harness for a time budget")
    run.add_argument("names", nargs="*", metavar="NAME")
    run.add_argument("--seconds", type=int, default=60)
    run.add_argument("--engine", choices=("auto", "atheris", "hypothesis"), default="auto")
    run.add_argument("--merge", action="store_true",
                     help="add inputs with new coverage to fuzz/corpus (atheris)")
    rep = sub.add_parser("replay", help="run every kept input once")
    rep.add_argument("names", nargs="*", metavar="NAME")
    rep.add_argument("--strict", action="store_true", help="known findings fail too")
    one = sub.add_parser("one", help="run one input, with the traceback")
    one.add_argument("name", choices=list(HARNESSES))
    one.add_argument("file")
    one.add_argument("--strict", action="store_true")
    one.add_argument("--sanitized", action="store_true",
                     help="a kernel harness on the sanitizer build, as a run fuzzes it")
    mer = sub.add_parser("merge", help="keep the inputs of out/fuzz/corpus with new coverage")
    mer.add_argument("names", nargs="*", metavar="NAME")
    see = sub.add_parser("seeds", help="capture real peers' bytes into fuzz/corpus/*/seed-*")
    see.add_argument("--kernel", action="store_true",
                     help="only the kernel harnesses' (from the kept captures: no peers)")
    args = parser.parse_args(argv)

    if args.command == "seeds":
        from fuzz import seeds

        if args.kernel:
            seeds.kernel()
        else:
            seeds.main()
        return 0
    if args.command == "one":
        if args.sanitized and args.name in SANITIZED:
            return one_sanitized(args.name, Path(args.file), args.strict)
        if args.name in SANITIZED and os.environ.get("FUZZ_SANITIZED"):
            print(_asan.verify())
        harness(args.name).one_input(Path(args.file).read_bytes(), strict=args.strict)
        print("no finding")
        return 0
    names = args.names or list(HARNESSES)
    unknown = sorted(set(names) - set(HARNESSES))
    if unknown:
        parser.error(f"no harness {', '.join(unknown)} (there are: {', '.join(HARNESSES)})")
    if args.command == "merge":
        for name in names:
            env = None
            if name in SANITIZED:  # a kernel harness's coverage is its sanitizer build's
                _asan.build()
                env = _asan.environ()
            print(f"{name}: {merge(name, env)} inputs kept")
        return 0
    if args.command == "replay":
        bad = 0
        for name in names:
            failures = replay(name, args.strict)
            bad += len(failures)
            print(f"{name}: {len(corpus_files(name))} inputs, {len(failures)} failed")
            for file, tb in failures:
                print(f"--- {name}/{file}\n{tb}")
        return 1 if bad else 0
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if has_atheris() else "hypothesis"
    WORK.mkdir(parents=True, exist_ok=True)
    results = []
    from gateway.logging import configure

    configure(level="critical")  # (the hypothesis engine's: a line for every pipe closed)
    prepared = (_asan.Prepared() if engine == "atheris" and SANITIZED & set(names) else None)
    unsanitized = []
    for name in names:
        print(f"fuzzing {name} with {engine} for {args.seconds} s ...", flush=True)
        if engine == "atheris":
            env = None
            if name in SANITIZED and prepared is not None:
                try:
                    env = prepared.environment()
                except RuntimeError as exc:
                    print(f"{name}: not run: {exc}", file=sys.stderr)
                    unsanitized.append(name)
                    continue
            results.append(run_atheris(name, args.seconds, args.merge, env))
        else:
            results.append(run_hypothesis(name, args.seconds))
    print(f"\n{'harness':<12} {'engine':<10} {'seconds':>7} {'execs':>10} {'execs/s':>8} "
          f"{'new':>5} {'cov':>6}  known findings / crashes")
    for r in results:
        rate = r.execs / r.seconds if r.seconds else 0
        notes = ", ".join(f"{k} x{v}" for k, v in sorted(r.known.items()))
        notes += (" " if notes else "") + " ".join(f"CRASH {c}" for c in r.crashes)
        print(f"{r.name:<12} {r.engine:<10} {r.seconds:>7} {r.execs:>10} {rate:>8.0f} "
              f"{r.new_inputs:>5} {r.coverage:>6}  {notes or '-'}")
    for note in prepared.notes if prepared is not None else []:
        print(note)
    for r in results:
        if r.name in SANITIZED:
            print(f"{r.name}: {r.sanitizer or 'NOT SANITIZED'}")
            if r.engine == "atheris" and not r.sanitizer:
                unsanitized.append(r.name)
    (WORK / "summary.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    if unsanitized:  # a kernel harness that did not run on the sanitizer build
        print(f"\nnot run on the sanitizer build: {', '.join(unsanitized)} (see {WORK}/"
              "<harness>.log)", file=sys.stderr)
    if any(r.crashes for r in results):
        print(f"\ncrashes are kept in {CORPUS}/<harness>/ (replay: python -m fuzz one NAME "
              "FILE; a kernel harness's under its sanitizers: one --sanitized NAME FILE)",
              file=sys.stderr)
        return 1
    if unsanitized:
        return 1
    idle = [r.name for r in results if not r.execs]
    if idle:  # a harness that did not run at all (an import error, a broken engine)
        print(f"\nno executions for {', '.join(idle)}: see {WORK}/<harness>.log",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
