"""``gateway matrix run|report``: the interop matrix as a Spark data pipeline.

* ``run``: the selected cells (``gateway.tools.matrix.cells``) become a Spark DataFrame, one cell per
  partition; executors run the cells (each isolated in its own forked process group with a hard
  timeout) and the driver writes the results as Parquet. ``--master`` is any Spark master URL:
  ``local[N]`` (default three task slots a core, embedded), ``spark://host:7077`` (a standalone cluster:
  every worker needs this repo importable with its dependencies, nanocat/nngcat on PATH, and the
  same Python path as the driver — see ``spark_session``).
* ``report``: Spark SQL over the Parquet: a client x server grid per wire and route, totals, the
  slowest cells, the pairing tables as observed against libzmq and nng/nanomsg.

Both work as ``gateway matrix ...`` and as ``python -m gateway.tools.matrix ...``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from gateway.tools.harness.procs import child_env

HERE = Path(__file__).resolve().parent


def python_path() -> str:
    return child_env()["PYTHONPATH"]


def spark_session(master: str | None, app: str, conf: dict[str, str] | None = None) -> Any:
    """A quiet SparkSession whose executors run this interpreter with this repo importable.

    ``PYSPARK_PYTHON``/``spark.pyspark.python`` = the running interpreter (or the executors
    would not see the venv), ``spark.executorEnv.PYTHONPATH`` = this repo (plus ours), log4j at
    ERROR, no UI, no console progress bar (the runner prints its own).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = python_path()
    from pyspark.sql import SparkSession

    log4j = f"-Dlog4j2.configurationFile=file:{HERE / 'log4j2.properties'} -Dlog4j.configurationFile=file:{HERE / 'log4j2.properties'}"
    builder = (
        SparkSession.builder.master(master or "local[*]")
        .appName(app)
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", python_path())
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.driver.extraJavaOptions", log4j)
        .config("spark.executor.extraJavaOptions", log4j)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.python.worker.reuse", "true")
        .config("spark.task.maxFailures", "1")
        .config("spark.sql.execution.arrow.pyspark.enabled", "false")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
