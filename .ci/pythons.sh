#!/usr/bin/env bash
# Every Python the package claims beyond the one `make test` runs (pyproject's classifiers:
# 3.11, 3.12, 3.13): for each of PYTHONS, a virtual environment of its own (.venv-3.12, ...),
# the package installed from this checkout with its kernel compiled for that Python, then the
# unit tests (tests/, on the compiled path: the version-bound part; the kernel's differential
# tests, which run the reference beside it, among them) and live bridges through the compiled
# kernel between libzmq and nng peers (interop_tests/test_gateway_routes.py). The interpreters are found on PATH (python3.12) or under pyenv's versions (the machine
# image has them there); a claimed Python that is missing fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHONS=${PYTHONS:-"3.12 3.13"}
find_python() {  # the first candidate that runs (pyenv's shims answer for the global version only)
  local v=$1 p
  for p in "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/"$v".*/bin/python"$v" \
           "$(command -v "python$v" 2>/dev/null || true)"; do
    if [ -n "$p" ] && [ -x "$p" ] && "$p" -c pass 2>/dev/null; then echo "$p"; return 0; fi
  done
  echo "pythons: Python $v not found (pyenv's versions, PATH): the package claims it" >&2
  return 1
}
for v in $PYTHONS; do
  base=$(find_python "$v")
  venv=.venv-$v
  echo "pythons: $v from $base"
  [ -x "$venv/bin/python" ] || "$base" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -e '.[test,bench,docs,fuzz,matrix]'
  "$venv/bin/python" -c "import sys, gateway.kernel as k; assert k.IMPLEMENTATION == 'compiled', 'no kernel'; print('pythons:', sys.version.split()[0], 'kernel', k.compiled.__file__)"
  GATEWAY_TEST_PATHS=compiled "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    -n "${TEST_JOBS:-4}" --dist worksteal \
    -m "not slow and not spark" tests interop_tests/test_gateway_routes.py
done
