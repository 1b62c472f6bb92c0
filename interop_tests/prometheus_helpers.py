"""A real Prometheus (Debian's ``prometheus``) for the tests: started on 127.0.0.1 from the
shipped ``examples/prometheus/prometheus.yml`` with the test's targets and short intervals,
queried through its HTTP API, always stopped.

* :class:`Prometheus` writes its configuration (the example's, targets and intervals replaced,
  the example's rule files with absolute paths), starts ``prometheus`` with a temporary TSDB,
  waits for ``/-/ready`` and answers :meth:`~Prometheus.query`, :meth:`~Prometheus.wait`,
  :meth:`~Prometheus.alerts` and :meth:`~Prometheus.targets`.
* :func:`dashboard_queries` lists every PromQL query of the shipped Grafana dashboard (panel
  targets and template variables), with Grafana's variables replaced as Grafana would ("All").

Every wait is bounded; the process is killed if SIGTERM does not stop it.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gateway.tools.harness.procs import Started, free_port

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "prometheus"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
MISSING = ("the prometheus binary is not installed (Debian's `prometheus` package; "
           ".ci/system-deps.sh installs it)")

Sample = dict[str, Any]  # {"metric": {labels}, "value": [t, "v"]}


class PrometheusError(AssertionError):
    pass


class Prometheus(Started):
    """``prometheus`` scraping ``jobs`` ({job name: [HOST:PORT, ...]}) every ``interval``."""

    def __init__(self, workdir: Path, jobs: dict[str, list[str]], interval: str = "1s",
                 timeouts: dict[str, str] | None = None, start_timeout: float = 30.0) -> None:
        assert PROMETHEUS, MISSING
        self.workdir = workdir
        self.jobs = jobs
        self.interval = interval
        self.timeouts = timeouts or {}
        self.start_timeout = start_timeout
        self.address = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "prometheus.log"

    def config(self) -> dict[str, Any]:
        """The example configuration with this test's targets, intervals and rule paths."""
        cfg = yaml.safe_load((EXAMPLES / "prometheus.yml").read_text())
        cfg["global"] = {"scrape_interval": self.interval, "evaluation_interval": self.interval}
        cfg["rule_files"] = [str(EXAMPLES / name) for name in cfg["rule_files"]]
        by_name = {job["job_name"]: job for job in cfg["scrape_configs"]}
        jobs = []
        for name, targets in self.jobs.items():
            job = dict(by_name.get(name, {"job_name": name}))
            job["static_configs"] = [{"targets": list(targets)}]
            job.pop("scrape_timeout", None)
            if name in self.timeouts:  # at most the job's interval
                job["scrape_interval"] = job["scrape_timeout"] = self.timeouts[name]
            jobs.append(job)
        cfg["scrape_configs"] = jobs
        return cfg

    def start(self) -> Prometheus:
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        last = ""
        for _ in range(3):  # the free port may be taken before prometheus binds it
            self.address = f"127.0.0.1:{free_port()}"
            with self.log.open("wb") as log:
                self.proc = subprocess.Popen(
                    [str(PROMETHEUS), f"--config.file={path}",
                     f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                     f"--web.listen-address={self.address}", "--log.level=warn"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                with contextlib.suppress(OSError):
                    with urllib.request.urlopen(f"http://{self.address}/-/ready", timeout=2) as r:
                        if r.status == 200:
                            return self
                time.sleep(0.1)
            last = self.log.read_text(errors="replace")
            self.stop()
            if "address already in use" not in last:
                break
        raise PrometheusError(f"prometheus did not become ready:\n{last}")

    def stop(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    end = stop  # what leaving ``with`` does

    # -- the HTTP API ------------------------------------------------------------------------
    def api(self, path: str, **params: str) -> Any:
        url = f"http://{self.address}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                answer = json.loads(r.read())
        except urllib.error.HTTPError as exc:  # a bad query: 400 with the reason
            answer = json.loads(exc.read() or b"{}")
        if answer.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {answer.get('errorType')}: "
                                  f"{answer.get('error')}")
        return answer["data"]

    def query(self, expr: str) -> list[Sample]:
        """The instant vector ``expr`` evaluates to now (a scalar becomes one sample)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "vector":
            return list(data["result"])
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        raise PrometheusError(f"{expr}: a {data['resultType']}, not a vector")

    def values(self, expr: str, by: str) -> dict[str, float]:
        """``{sample's label ``by``: value}`` of ``expr``."""
        return {s["metric"].get(by, ""): float(s["value"][1]) for s in self.query(expr)}

    def value(self, expr: str) -> float | None:
        """The one sample's value of ``expr``, None when the result is empty."""
        result = self.query(expr)
        if not result:
            return None
        assert len(result) == 1, f"{expr}: {len(result)} samples: {result}"
        return float(result[0]["value"][1])

    def wait(self, expr: str, check: Callable[[list[Sample]], bool], timeout: float = 20.0,
             what: str = "") -> list[Sample]:
        """Query ``expr`` until ``check(result)`` holds; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if check(result):
                return result
            if time.monotonic() > deadline:
                raise PrometheusError(f"{what or expr}: still {result} after {timeout} s\n"
                                      f"targets: {self.targets()}")
            time.sleep(0.25)

    def wait_value(self, expr: str, check: Callable[[float], bool], timeout: float = 20.0,
                   what: str = "") -> float:
        result = self.wait(expr, lambda r: len(r) == 1 and check(float(r[0]["value"][1])),
                           timeout, what)
        return float(result[0]["value"][1])

    def alerts(self, name: str | None = None) -> list[dict[str, Any]]:
        """Active alerts (pending or firing), of ``name`` only if given."""
        found = self.api("alerts")["alerts"]
        return [a for a in found if name is None or a["labels"].get("alertname") == name]

    def targets(self) -> list[dict[str, Any]]:
        """The active targets: job, instance, health, last error."""
        return [{"job": t["labels"].get("job"), "instance": t["labels"].get("instance"),
                 "health": t["health"], "error": t.get("lastError", "")}
                for t in self.api("targets")["activeTargets"]]

    def rules(self) -> list[dict[str, Any]]:
        """The loaded rules, each with its health and last evaluation error."""
        return [r for g in self.api("rules")["groups"] for r in g["rules"]]


# -- the Grafana dashboard ------------------------------------------------------------------------
_LABEL_VALUES = re.compile(r"^label_values\((?:(.*),\s*)?(\w+)\)$")


def dashboard_queries(dashboard: dict[str, Any], rate_interval: str) -> list[tuple[str, str]]:
    """``[(where, PromQL)]`` for every panel target and query variable of ``dashboard``, with
    ``$__rate_interval`` = ``rate_interval`` and every template variable at "All" (``.*``).
    Grafana's ``label_values(SELECTOR, LABEL)`` becomes ``count by (LABEL) (SELECTOR)``, what
    it asks Prometheus for."""
    names = [v["name"] for v in dashboard["templating"]["list"]]

    def resolve(expr: str) -> str:
        expr = expr.replace("$__rate_interval", rate_interval)
        for name in names:
            expr = expr.replace(f"${{{name}}}", ".*").replace(f"${name}", ".*")
        return expr

    out = []
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        m = _LABEL_VALUES.match(query.strip())
        assert m, f"variable {var['name']}: not label_values(...): {query}"
        out.append((f"variable {var['name']}", resolve(f"count by ({m[2]}) ({m[1]})")))

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            walk(panel.get("panels", []))
            for target in panel.get("targets", []):
                out.append((f"panel {panel['title']!r} {target['refId']}",
                            resolve(target["expr"])))

    walk(dashboard["panels"])
    return out


def promtool(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL, MISSING
    return subprocess.run([PROMTOOL, *args], cwd=EXAMPLES, capture_output=True, text=True,
                          timeout=timeout)
