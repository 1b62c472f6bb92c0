#!/usr/bin/env bash
# The compiled kernel built with AddressSanitizer, UndefinedBehaviorSanitizer and Cython's
# bounds checks (GATEWAY_SANITIZE=1: setup.py switches boundscheck, wraparound and
# initializedcheck on), in a copy of the package under build/asan, then the differential tests
# (tests/test_kernel.py: the kernel against the reference on random streams; test_kernel_reads.py:
# the same read into the pipes' own buffers) and the security
# review's cases (tests/test_kernel_findings.py) and the kernel fuzzing harnesses' kept inputs
# (tests/test_fuzz_corpus.py) run against that build. Any out-of-bounds access or undefined
# behaviour aborts the run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv/bin/python}
OUT=$ROOT/build/asan
rm -rf "$OUT"
mkdir -p "$OUT"
tar --exclude='*.so' --exclude=__pycache__ --exclude='_kernel.c' -cf - gateway | tar -xf - -C "$OUT"
(cd "$OUT" && GATEWAY_SANITIZE=1 "$PY" "$ROOT/setup.py" -q build_ext --inplace 2>&1 \
    | grep -v "is ignored\|Beta\|warnings.warn" || true)
ls "$OUT"/gateway/_kernel*.so >/dev/null
ASAN_LIB=$(gcc -print-file-name=libasan.so)
UBSAN_LIB=$(gcc -print-file-name=libubsan.so)
export LD_PRELOAD="$ASAN_LIB $UBSAN_LIB"
# Python's own allocations are not instrumented; leaks at exit are CPython's, not ours
# every allocation through malloc, so that ASan sees the bounds of every bytes object
export PYTHONMALLOC=malloc
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$OUT"
"$PY" -c "import gateway._kernel as k, sys; assert k.__file__.startswith('$OUT'), k.__file__; print('sanitized kernel:', k.__file__)"
# --capture=sys: a sanitizer report (written to fd 2 from C) reaches the log before the abort;
# GATEWAY_SANITIZE: the tests that ask this build whether it checks its indexes
# (tests/test_kernel_findings.py) know it is the one
# ...and every kept input of the kernel fuzzing harnesses (fuzz/corpus/kernel_*: the seeds, what
# runs kept), the compiled kernel against the reference (make fuzz-ci fuzzes them on clang's
# build, fuzz/_asan.py)
GATEWAY_SANITIZE=1 "$PY" -m pytest -q -p no:cacheprovider --capture=sys --rootdir "$ROOT" \
    "$ROOT/tests/test_kernel.py" "$ROOT/tests/test_kernel_findings.py" \
    "$ROOT/tests/test_kernel_seam.py" "$ROOT/tests/test_kernel_reads.py" \
    "$ROOT/tests/test_engine_read_buffer.py" \
    "$ROOT"/tests/test_fuzz_corpus.py::test_every_kept_input_replays\[kernel_{zmtp,sp,curve}\] \
    -o addopts="" "$@"
