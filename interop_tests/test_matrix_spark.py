"""One real Spark run of the small matrix (``@small``) on ``local[2]``: executors run the cells,
the driver writes Parquet, the report reads it back with Spark SQL, and the HTML report is
opened in a real browser (Debian's headless Chromium): its filter script runs and a screenshot
is taken (into the test's temporary directory). The standalone cluster of two workers is
``test_matrix_cluster.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.tools.harness.procs import child_env
from gateway.tools.matrix.catalog import small_selection
from gateway.tools.matrix.cells import RESULT_COLUMNS
from gateway.tools.matrix.report_html import render_html
from gateway.tools.matrix.report_markdown import render_markdown

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")


def _java() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


def _matrix(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = child_env()
    env["PYSPARK_PYTHON"] = sys.executable
    return subprocess.run([sys.executable, "-m", "gateway.tools.matrix", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _parquet_files(out: Path) -> list[Path]:
    files = sorted(out.glob("*.parquet"))
    for f in files:
        data = f.read_bytes()
        assert data[:4] == b"PAR1" and data[-4:] == b"PAR1", f
    return files


@pytest.mark.skipif(not _java(), reason="Spark needs Java")
@pytest.mark.timeout(900)
def test_small_matrix_on_local_spark(tmp_path: Path) -> None:
    out = tmp_path / "matrix"
    run = _matrix("run", "--out", str(out), "--select", "@small", "--master", "local[2]",
                  "--timeout", "1.5")
    n = len(small_selection())
    assert f"{n}/{n} cells done" in run.stderr, run.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]
    assert (out / "_SUCCESS").exists()
    assert _parquet_files(out)

    data_file = tmp_path / "report.json"
    rep = _matrix("report", str(out), "--format", "json", "--output", str(data_file),
                  "--master", "local[2]")
    assert rep.returncode == 0, rep.stderr[-3000:]
    d = json.loads(data_file.read_text())
    assert d["columns"] == list(RESULT_COLUMNS)
    assert d["totals"]["cells"] == n
    assert d["totals"]["mismatches"] == 0
    assert d["totals"]["envelope_bad"] == 0
    verdicts = {(r["wire"], r["route"]) for r in d["by_wire"]}
    assert ("zmq->sp", "gateway:pyzmq->pynng") in verdicts and ("sp->zmq", "gateway:pynng->pyzmq") in verdicts

    md = render_markdown(d, str(out))
    assert f"**{n} cells: {n} as expected, 0 mismatch(es)" in md
    for pairing in ("| ZMTP | REQ-REQ | illegal", "| ZMTP | REQ-DEALER | illegal",
                    "| ZMTP | REP-REP | illegal", "| ZMTP | REP-ROUTER | illegal",
                    "| ZMTP | REQ-REP | legal", "| ZMTP | DEALER-ROUTER | legal",
                    "| SP | req-rep | legal", "| SP | req-req | illegal", "| SP | rep-rep | illegal"):
        assert pairing in md, pairing
    page = render_html(d, str(out))
    assert page.startswith("<!doctype html>") and 'class="ok"' in page and 'class="bad"' not in page
    assert "Pairing tables per implementation pair" in page and "id=cells-table" in page
    _open_in_chromium(page, tmp_path, n)


CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")


def _open_in_chromium(page: str, tmp_path: Path, n: int) -> None:
    """The report in headless Chromium (a fresh profile, no network): the DOM after its script
    ran says how many cells the filter shows, with the URL's filter applied; a screenshot is
    written next to it (not committed: the test's temporary directory)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (apt-get install chromium)")
    html_file = tmp_path / "report.html"
    html_file.write_text(page, encoding="utf-8")

    def browse(*args: str, url: str) -> subprocess.CompletedProcess[str]:
        profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
        return subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args,
                               url], capture_output=True, text=True, timeout=120)

    dom = browse("--dump-dom", url=html_file.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert f"{n} of {n} cells" in dom.stdout, dom.stdout[-2000:]
    direct = sum(1 for c in small_selection() if c.direct)
    filtered = browse("--dump-dom", url=html_file.as_uri() + "?route=direct")
    assert f"{direct} of {n} cells" in filtered.stdout, filtered.stdout[-2000:]
    shot = tmp_path / "report.png"
    done = browse(f"--screenshot={shot}", "--window-size=1400,2400", "--hide-scrollbars",
                  url=html_file.as_uri())
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    print(f"report screenshot: {shot}")
