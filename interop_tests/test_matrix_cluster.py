"""The matrix on a real Spark cluster: a standalone master and two workers started from the
installed pyspark (its ``bin/spark-class``, Java from Debian; nothing downloaded), on
127.0.0.1, each worker with one core; ``gateway matrix run --master spark://...`` runs a
selection; the cells must come back from executors on both workers (the Parquet's
``executor`` column, and each worker's log says it launched an executor), then everything
stops. docs/matrix.md says how to run the matrix on a cluster of one's own.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.tools.harness.procs import SOURCE_ROOT, child_env, free_port, tcp_listening

pyspark = pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

#: eight quick cells of different kinds (direct on both wires, through the gateway both ways)
SELECTION = ("cell_id=libzmq:REQ>libzmq:REP@zmq+tcp/direct/small|"
             "libzmq:DEALER>libzmq:ROUTER@zmq+tcp/direct/64k|"
             "nng:REQ>native:REP@sp+tcp/direct/small|"
             "native:REQ>nng-raw:REP@sp+tcp/direct/small|"
             "nanomsg:REQ>nng:REP@sp+tcp/direct/small|"
             "libzmq:REQ>nng:REP@zmq+tcp->sp+tcp/gateway:pyzmq->pynng/small|"
             "nng:REQ>libzmq:REP@sp+tcp->zmq+tcp/gateway:pynng->pyzmq/small|"
             "libzmq:REQ>libzmq:REQ@zmq+tcp/direct/small")


class Daemon:
    """A Spark daemon (``spark-class CLASS ARGS``) in its own process group, its output in a
    file; killed with its group on exit."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.name, self.log = name, log
        spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([str(spark_class), *args], stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.text()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {pattern!r} within {timeout}s "
                                     f"(exit {self.proc.poll()}):\n{self.text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                    self.proc.wait(10)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, list[Daemon], list[Path]]]:
    if shutil.which("java") is None:
        pytest.skip("no java (Debian: default-jdk-headless)")
    env = child_env(SPARK_HOME=str(Path(pyspark.__file__).parent), SPARK_LOCAL_IP="127.0.0.1",
                    SPARK_LOG_DIR=str(tmp_path / "logs"), SPARK_NO_DAEMONIZE="1",
                    PYSPARK_PYTHON=sys.executable)
    port = free_port()
    daemons: list[Daemon] = []
    work = [tmp_path / "worker-1", tmp_path / "worker-2"]
    try:
        master = Daemon("master", ["org.apache.spark.deploy.master.Master", "--host",
                                   "127.0.0.1", "--port", str(port), "--webui-port",
                                   str(free_port())], tmp_path / "master.log", env)
        daemons.append(master)
        deadline = time.monotonic() + 120
        while not tcp_listening(port, master.proc.pid):
            assert master.proc.poll() is None and time.monotonic() < deadline, master.text()
            time.sleep(0.2)
        url = f"spark://127.0.0.1:{port}"
        for i, wdir in enumerate(work, 1):
            wdir.mkdir()
            daemons.append(Daemon(f"worker-{i}", [
                "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                "--work-dir", str(wdir)], tmp_path / f"worker-{i}.log", env))
        for d in daemons[1:]:
            d.wait_for(r"Successfully registered with master", 180)
        yield url, daemons, work
    finally:
        for d in reversed(daemons):
            d.stop()


def test_matrix_runs_on_a_standalone_cluster_with_two_workers(
        cluster: tuple[str, list[Daemon], list[Path]], tmp_path: Path) -> None:
    url, daemons, work = cluster
    out = tmp_path / "matrix"
    env = child_env(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                    SPARK_LOCAL_IP="127.0.0.1")
    run = subprocess.run(
        [sys.executable, "-m", "gateway", "matrix", "run", "--master", url, "--select",
         SELECTION, "--out", str(out), "--timeout", "2", "--conf", "spark.cores.max=2",
         "--conf", "spark.executor.cores=1", "--conf", "spark.executor.memory=1g"],
        cwd=SOURCE_ROOT, env=env, capture_output=True, text=True, timeout=780)
    print(run.stderr[-3000:])
    assert run.returncode == 0, run.stderr[-4000:]
    assert "8 cells" in run.stderr and "0 mismatch(es)" in run.stderr, run.stderr[-2000:]
    assert (out / "_SUCCESS").exists() and list(out.glob("part-*.parquet"))
    # the tasks ran in executors on both workers: each executor's directory is under its
    # worker's --work-dir (app-<id>/<executor id>); the run says how many cells each ran
    per_executor = dict(re.findall(r"\[matrix\] executor [^:\s]+:(\S+): (\d+) cell",
                                   run.stderr))
    ran = {str(w) for w in work for e in per_executor if e.startswith(str(w))}
    assert ran == {str(w) for w in work}, run.stderr[-2000:]
    assert sum(int(n) for n in per_executor.values()) == 8
    for d in daemons[1:]:  # and each worker's own log says it launched the run's executor
        launched = re.findall(r"Asked to launch executor app-\S+ for gateway-matrix-run",
                              d.text())
        assert launched, d.text()[-2000:]
        print(f"{d.name}: {'; '.join(launched)}")
