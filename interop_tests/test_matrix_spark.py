"""One real Spark run of the small matrix (``@small``) on ``local[2]``: executors run the cells,
the driver writes Parquet, the report reads it back with Spark SQL. Optionally (``-m slow``) the
same against a standalone ``spark://`` master and worker started here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway.tools.harness.procs import child_env
from gateway.tools.matrix.cells import RESULT_COLUMNS, small_selection
from gateway.tools.matrix.report import render_html, render_markdown

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.5)
    return False


@pytest.mark.slow
@pytest.mark.skipif(not _java(), reason="Spark needs Java")
@pytest.mark.timeout(900)
def test_standalone_spark_master(tmp_path: Path) -> None:
    """``--master spark://...``: a standalone master and one worker on 127.0.0.1."""
    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not spark_class.exists():
        pytest.skip("pyspark has no bin/spark-class")
    port = _free_port()
    env = child_env()
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_HOME=str(spark_class.parent.parent), SPARK_WORKER_DIR=str(tmp_path / "work"),
               SPARK_LOG_DIR=str(tmp_path / "logs"))
    log = open(tmp_path / "cluster.log", "wb")  # noqa: SIM115
    procs = [subprocess.Popen([str(spark_class), "org.apache.spark.deploy.master.Master",
                               "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"],
                              env=env, stdout=log, stderr=log, start_new_session=True)]
    try:
        assert _wait_port(port, 120), "standalone master did not come up"
        procs.append(subprocess.Popen([str(spark_class), "org.apache.spark.deploy.worker.Worker",
                                       f"spark://127.0.0.1:{port}", "--cores", "2", "--memory", "1g",
                                       "--webui-port", "0", "--host", "127.0.0.1"],
                                      env=env, stdout=log, stderr=log, start_new_session=True))
        out = tmp_path / "matrix"
        run = _matrix("run", "--out", str(out), "--select", "route=direct,@small",
                      "--master", f"spark://127.0.0.1:{port}", "--timeout", "1.5")
        assert run.returncode == 0, run.stderr[-3000:]
        assert _parquet_files(out)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(10)
        log.close()
