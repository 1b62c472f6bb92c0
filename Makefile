# The two set-up commands of the README: `make demo` and `make test`. Both build .venv from nothing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: env system-deps demo test test-fast lint docs bench matrix soak clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench,matrix,docs]'
	$(PY) -m pip install -q -e examples/plugin-skeleton
	touch $(STAMP)

system-deps:
	bash .ci/system-deps.sh

env: system-deps $(STAMP)

## make test: unit tests, interop tests against libzmq/nng/nanomsg, a small Spark matrix
test: env
	$(PY) -m ruff check gateway plugins tests interop_tests examples docs
	$(PY) -m mypy gateway plugins
	$(PY) -m pytest -q -m "not slow" -p no:cacheprovider

test-fast: env
	$(PY) -m pytest -q -m "not slow and not spark" -x tests

lint: env
	$(PY) -m ruff check gateway plugins tests interop_tests examples docs
	$(PY) -m mypy gateway plugins

## make docs: the documentation site into site/ (open site/index.html); any warning fails, as
## in CI (tests/test_docs_site.py builds it the same way and checks it in Chromium)
docs: env
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

## make demo: live bridges between real ZeroMQ and nng peers, then a small matrix and its report
demo: env
	$(PY) examples/demo.py

## make bench: latency/throughput side by side with libzmq, nng and zmq.proxy
bench: env
	$(PY) -m gateway bench --memory --json out/bench.json --png out/bench.png

## the full matrix (Spark, local[*] unless MASTER=spark://host:7077)
matrix: env
	$(PY) -m gateway matrix run --out out/matrix $(if $(MASTER),--master $(MASTER)); st=$$?; \
	$(PY) -m gateway matrix report out/matrix --format html --output out/matrix.html; \
	$(PY) -m gateway matrix report out/matrix --format markdown; exit $$st

## make soak DURATION=30m: one `gateway run` under mixed traffic with churn, back-end restarts and
## reloads; then RSS, descriptors, tasks and metric cells (flat?) and the books (not in CI)
soak: env
	$(PY) -m gateway.tools.soak --duration $(or $(DURATION),5m) --out out/soak

clean:
	rm -rf $(VENV) out build site *.egg-info
