# The two set-up commands of the README: `make demo` and `make test`. Both build .venv from nothing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

KERNEL := $(VENV)/.kernel

.PHONY: env system-deps node-deps kernel demo test test-pure test-sanitize test-fast lint docs bench \
	bench-real bench-instructions matrix \
	soak fuzz fuzz-ci clean

# the editable install also compiles the kernel (gateway/_kernel.pyx: setup.py)
$(STAMP): pyproject.toml setup.py gateway/tools/harness/peers/remote.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench,matrix,docs,fuzz,capture]'
	# (not the plugin skeleton: its tests install it for themselves, interop_tests/test_gateway_plugins.py)
	# the matrix's peers of other generations and runtimes, each in its own environment under
	# .venv/peers (one missing here makes its cells "skipped", with the reason)
	$(PY) -m gateway.tools.harness.peers.remote install
	touch $(STAMP)

## make kernel: rebuild the compiled kernel in place after a change to gateway/_kernel*.pyx/pxi
$(KERNEL): $(STAMP) gateway/_kernel.pyx $(wildcard gateway/_kernel_*.pxi) setup.py
	$(PY) setup.py -q build_ext --inplace 2>&1 | grep -v "is ignored\|Beta\|warnings.warn" || true
	$(PY) -c "import gateway._kernel"
	touch $(KERNEL)

kernel: $(KERNEL)

system-deps:
	bash .ci/system-deps.sh

## the npm packages of the tests (jszmq under Node, its browser bundle): .ci/npm-deps.sh, from
## the committed lock into .node/ (git-ignored); a no-op when they are there
node-deps:
	bash .ci/npm-deps.sh

env: system-deps $(STAMP) node-deps

## make test: lint and types, then every unit and interop test once, with the compiled kernel,
## and the hot path's (engine, wires, device, tables) once more on the pure-Python reference in
## the same run (ids [compiled] and [pure]: tests/conftest.py), and a small Spark matrix; on
## TEST_JOBS workers (pytest-xdist: more than the cores, as most tests wait on peers and
## timers), then the tests marked serial alone (network faults timed against TCP). The 25 slowest
## are listed at the end (PYTEST_ARGS="--durations=0": all of them). CI
## adds test-pure, test-sanitize and the other Pythons (.ci/run).
TEST_JOBS ?= 4
PYTEST_ARGS ?=
PYTEST := $(PY) -m pytest -p no:cacheprovider -n $(TEST_JOBS) --dist worksteal
test: env kernel
	$(PY) -m ruff check gateway plugins tests interop_tests examples docs fuzz
	$(PY) -m mypy gateway plugins fuzz
	$(PYTEST) -q -m "not slow and not serial" --durations=25 $(PYTEST_ARGS)
	$(PY) -m pytest -p no:cacheprovider -q -m "serial" $(PYTEST_ARGS)

## CI (.ci/run): every test once more in processes that import the pure-Python engine from the
## start (GATEWAY_NO_EXTENSIONS=1), the gateways they start included
test-pure: env
	GATEWAY_NO_EXTENSIONS=1 $(PYTEST) -q -m "not slow and not serial" $(PYTEST_ARGS) tests interop_tests
	GATEWAY_NO_EXTENSIONS=1 $(PY) -m pytest -p no:cacheprovider -q -m "serial" $(PYTEST_ARGS) tests interop_tests

## CI (.ci/run): the kernel built with ASan, UBSan and bounds checks, under its differential tests
test-sanitize: env
	bash .ci/sanitize.sh

test-fast: env kernel
	$(PYTEST) -q -m "not slow and not spark" -x tests

lint: env
	$(PY) -m ruff check gateway plugins tests interop_tests examples docs fuzz
	$(PY) -m mypy gateway plugins fuzz

## make docs: the documentation site into site/ (open site/index.html); any warning fails, as
## in CI (tests/test_docs_site.py builds it the same way and checks it in Chromium)
docs: env
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

## make demo: live bridges between real ZeroMQ and nng peers, then a small matrix and its report
demo: env kernel
	$(PY) examples/demo.py

## make bench: latency/throughput side by side with libzmq, nng and zmq.proxy
bench: env kernel
	$(PY) -m gateway bench --memory --json out/bench.json --png out/bench.png

## make bench-real: issue 36's table, C peers shaped as applications write them (a libzmq DEALER
## and ROUTER echo, 64 nng req0 sockets, an nng rep0 server with 64 contexts) through zmq.proxy,
## nng_device and the gateway, beside each server's direct ceiling; BENCH_SIZE=65536 (or 1048576)
## for large bodies
BENCH_SIZE ?= 100
bench-real: env kernel
	$(PY) -m gateway bench --routes real --windows 64 --tput-requests 64000 --rounds 3 \
		--requests 3000 --sweep '' --size $(BENCH_SIZE) --json out/bench-real-$(BENCH_SIZE).json

## make bench-instructions: instructions per request on the pure path (callgrind; docs/design.md)
bench-instructions: env
	$(PY) -m gateway.tools.bench.instructions

## make fuzz: every fuzzing harness (fuzz/README.md) for FUZZ_SECONDS each, one after the other:
## atheris where it installs, hypothesis elsewhere; a crash is kept in fuzz/corpus/<harness>/
## and fails the run. 60 s each, 9 minutes in all on 2 cores: a harness starts from the kept
## corpus, where 8-minute runs ended (from the seeds alone the ZMTP codec found its last new
## edge after 5 minutes, the SP codec within seconds); FUZZ_SECONDS=600 for a deeper look.
FUZZ_SECONDS ?= 60
fuzz: env
	$(PY) -m fuzz run --seconds $(FUZZ_SECONDS) $(FUZZ_ARGS)

## the short pass CI runs (.ci/run): 10 s a harness, about 2 minutes in all (12 s each took
## 109 s on the shared 2 cores); each harness starts from the kept corpus, at the long runs' coverage;
## the kernel's three on its sanitizer build (out/fuzz/asan, made meanwhile: fuzz/README.md)
fuzz-ci: env
	$(PY) -m fuzz run --seconds 10

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
	rm -rf $(VENV) .venv-* out build site *.egg-info
