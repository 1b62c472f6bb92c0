"""gateway.tools.matrix.run: what --out may replace (Spark overwrites the whole directory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main
from gateway.tools.matrix.run import out_dir_problem


def test_new_empty_and_earlier_outputs_are_taken(tmp_path: Path) -> None:
    assert out_dir_problem(str(tmp_path / "new")) is None
    assert out_dir_problem(str(tmp_path)) is None  # empty
    for name in ("_SUCCESS", "._SUCCESS.crc", "part-00000-x.snappy.parquet",
                 ".part-00000-x.snappy.parquet.crc"):
        (tmp_path / name).write_bytes(b"")
    assert out_dir_problem(str(tmp_path)) is None


def test_a_foreign_file_is_refused_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("mine")
    problem = out_dir_problem(str(tmp_path))
    assert problem is not None and "notes.txt" in problem and "--force" in problem
    assert out_dir_problem(str(tmp_path), force=True) is None
    (tmp_path / "file").write_text("x")
    assert "is a file" in (out_dir_problem(str(tmp_path / "file"), force=True) or "")


def test_the_cli_refuses_before_starting_spark(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    keep = tmp_path / "keep.txt"
    keep.write_text("precious")
    assert main(["matrix", "run", "--out", str(tmp_path), "--select", "@small"]) == 2
    err = capsys.readouterr().err
    assert "keep.txt" in err and len(err.strip().splitlines()) == 1
    assert keep.read_text() == "precious"


def test_list_needs_no_out_and_a_run_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "run", "--list", "--select", "route=gateway:any->*"]) == 0
    out = capsys.readouterr()
    assert "gateway:any->native" in out.out and "76 cells" in out.err
    assert main(["matrix", "run", "--select", "@small"]) == 2
    assert "--out DIR is required" in capsys.readouterr().err


def test_report_exit_code_says_whether_everything_matched() -> None:
    from gateway.tools.matrix.report import exit_code

    assert exit_code({"totals": {"cells": 3, "mismatches": 0, "envelope_bad": 0}}) == 0
    assert exit_code({"totals": {"cells": 3, "mismatches": 1, "envelope_bad": 0}}) == 1
    assert exit_code({"totals": {"cells": 3, "mismatches": 0, "envelope_bad": 2}}) == 1


def _report(problems: list[dict[str, object]]) -> dict[str, object]:
    return {"totals": {"cells": 2, "as_expected": 2 - len(problems), "mismatches": len(problems),
                       "envelope_bad": 0, "cell_seconds": 1.0},
            "confusion": [], "by_wire": [], "limits": [], "longest": [], "slowest": [],
            "pairs": [], "grid": [], "problems": problems, "columns": [],
            "stamp": {"date": "2026-11-23 01:00 UTC", "libzmq": "4.3.5"}}


def test_report_lists_failures_first_and_is_stamped() -> None:
    from gateway.tools.matrix.report_html import render_html
    from gateway.tools.matrix.report_markdown import render_markdown

    bad = {"cell_id": "libzmq:REQ>nng:REP@x", "expected": "exchanged", "observed": "timeout",
           "envelope_ok": True, "detail": "no reply"}
    md = render_markdown(_report([bad]), "/out")
    assert "libzmq 4.3.5" in md.splitlines()[2] and "2026-11-23" in md
    assert md.index("## Mismatches") < md.index("Legend") < md.index("## Expected vs observed")
    page = render_html(_report([bad]), "/out")
    assert page.index("Mismatches") < page.index("Expected vs observed")
    ok = render_markdown(_report([]), "/out")
    assert ok.rstrip().endswith("None: every cell behaved as the pairing tables and limits predict.")


def test_report_has_a_section_per_pattern_family() -> None:
    from gateway.tools.matrix.report_data import pattern_pairing_tables
    from gateway.tools.matrix.report_html import render_html
    from gateway.tools.matrix.report_markdown import render_markdown

    d = _report([])
    d["pairs"] = [
        {"wire": "zmq", "a": "PUB", "b": "SUB", "who": "lib", "n": 4, "talked": 4, "refused": 0},
        {"wire": "sp", "a": "PAIR0", "b": "PAIR1", "who": "lib", "n": 1, "talked": 0,
         "refused": 1},
        {"wire": "sp", "a": "PULL", "b": "PUSH", "who": "lib", "n": 2, "talked": 1, "refused": 1},
        {"wire": "zmq", "a": "REP", "b": "REQ", "who": "lib", "n": 1, "talked": 1, "refused": 0},
    ]
    d["by_wire"] = [{"wire": "zmq->sp", "route": "gateway-pair1:pyzmq->pynng", "n": 2, "ok": 2,
                     "exchanged": 2, "refused_handshake": 0, "refused_limit": 0,
                     "p50_small_us": None}]
    tables = pattern_pairing_tables(d)
    assert set(tables) == {"pubsub", "pipeline", "pair"}
    assert tables["pubsub"][0]["agrees"] == "yes"
    assert tables["pair"][0]["observed"] == "illegal" and tables["pair"][0]["agrees"] == "yes"
    assert tables["pipeline"][0]["agrees"] == "NO"  # mixed where the table says legal
    assert "through the gateway (gateway-pair1:pyzmq->pynng)" in tables["pair"][1]["pairing"]
    md = render_markdown(d, "/out")
    assert "## Publish-subscribe: pairings" in md and "## Pair: pairings" in md
    assert "Pipeline (push-pull)" in render_html(d, "/out")


def test_forked_cell_keeps_the_result_when_the_process_dies_closing_its_peers(monkeypatch) -> None:
    """nng's wss dialer can panic (abort) while a cell closes its peers: the row handed over
    once the exchange was over is kept, with a note; with no row at all the cell is an error."""
    import os

    import gateway.tools.matrix.runner as runner
    from gateway.tools.matrix.cells import Cell
    from gateway.tools.matrix.host import _run_forked
    from gateway.tools.matrix.outcomes import error_row

    cell = Cell("nng", "REQ", "nng", "REP", "sp+tcp", "direct", "wss")

    def dies_closing(c, timeout, on_played=None):
        row = error_row(c, "")
        row["observed"] = "exchanged"
        on_played(row)
        os._exit(134)

    monkeypatch.setattr(runner, "run_cell_inline", dies_closing)
    row = _run_forked(cell, 2.0)
    assert row["observed"] == "exchanged"
    assert "died closing its peers" in row["detail"]

    monkeypatch.setattr(runner, "run_cell_inline", lambda c, t, on_played=None: os._exit(134))
    row = _run_forked(cell, 2.0)
    assert row["observed"] == "error" and "died without a result" in row["detail"]

    def crashes(c, timeout, on_played=None):
        raise RuntimeError("boom")  # the final row only: no 'died closing' note

    monkeypatch.setattr(runner, "run_cell_inline", crashes)
    row = _run_forked(cell, 2.0)
    assert "cell crashed" in row["detail"] and "died closing" not in row["detail"]
    assert "_early" not in row


def test_a_cell_whose_client_is_unavailable_is_skipped_and_leaves_no_gateway(
        tmp_path: Path) -> None:
    """A client implementation missing on this machine (its peers' environment not installed)
    raises after the cell's gateway started: the cell is skipped at once, with the reason, and
    its gateway is stopped (it outlived the cell and held the result pipe open: a 39 s hard
    timeout reported as an error). The cell host forks, as the matrix's executors do, from a
    fresh process (nng's threads do not survive a fork: not from this one)."""
    import json
    import os
    import subprocess
    import sys
    import time

    code = (
        "import json, os\n"
        "from gateway.tools.matrix.cells import Cell\n"
        "from gateway.tools.matrix.host import _run_forked\n"
        "cell = Cell(client_impl='libzmq-4.1', client_type='REQ', server_impl='nng',\n"
        "            server_type='REP', transport='zmq+tcp->sp+tcp',\n"
        "            route='gateway:native->native', shape='small')\n"
        "row = _run_forked(cell, 1.5)\n"
        "print(json.dumps({'row': row, 'pid': os.getpid()}))\n")
    env = {**os.environ, "GATEWAY_PEERS": str(tmp_path / "none")}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    assert time.monotonic() - t0 < 30
    out = json.loads(done.stdout.strip().splitlines()[-1])
    row = out["row"]
    assert row["observed"] == "skipped", row["detail"]
    assert "not installed" in row["detail"]
    left = []  # the cell's processes (its gateway) are children of that process, now orphans
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if "State:\tZ" not in status and code.encode() in cmd:
            left.append(pid)
    assert left == []
