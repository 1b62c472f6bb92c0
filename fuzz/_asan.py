"""The compiled kernel the kernel harnesses fuzz: built with AddressSanitizer,
UndefinedBehaviorSanitizer, Cython's bounds checks and libFuzzer's coverage counters, in a copy
of the package under ``out/fuzz/asan`` (the checkout's own kernel stays as it is, for the tests
that run after), and the environment that runs it: atheris's ASan runtime with libFuzzer linked
in, preloaded (atheris's "native extension fuzzing": ``asan_with_fuzzer.so``).

The extension is compiled by clang (``-fsanitize=fuzzer-no-link``: libFuzzer sees the kernel's
own branches, not only the Python the harness runs), with setup.py's ``GATEWAY_SANITIZE=1``
flags (``-fsanitize=address,undefined``, bounds checks); it links no sanitizer runtime of its
own, so the preloaded one is the only one in the process. ``make test-sanitize``
(``.ci/sanitize.sh``) builds with gcc and preloads gcc's runtimes instead: a gcc build cannot
share a process with atheris's clang runtime (two ASan runtimes abort at start).

:func:`verify` runs in each fuzzing process before the first input and fails it unless the
kernel it imported is this build and the sanitizer is live; :func:`canary` shows, once a run,
that the preloaded runtime reports a heap overflow.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "out" / "fuzz" / "asan"
STAMP = OUT / "built-from"
#: the compile: clang, with Python's flags as for the kernel's own build (-fwrapv among them:
#: the semantics the kernel ships with), setup.py's sanitizer flags (GATEWAY_SANITIZE) and
#: libFuzzer's counters
BUILD_ENV = {"CC": "clang", "LDSHARED": "clang -shared",
             "CFLAGS": f"{sysconfig.get_config_var('CFLAGS') or ''} -fsanitize=fuzzer-no-link",
             "GATEWAY_SANITIZE": "1"}
#: what a build imports from the sanitizer runtimes (names in its dynamic symbol table)
INSTRUMENTED = (b"__asan_init", b"__asan_report_load", b"__ubsan_handle_",
                b"__sanitizer_cov_8bit_counters_init")
RUNTIME = "asan_with_fuzzer.so"


def _sources() -> list[Path]:
    gateway = ROOT / "gateway"
    return [ROOT / "setup.py", *sorted(gateway.glob("_kernel*.pyx")),
            *sorted(gateway.glob("_kernel*.pxi"))]


def _fingerprint() -> str:
    h = hashlib.sha256(repr(sorted(BUILD_ENV.items())).encode())
    h.update(sys.version.encode())
    for path in _sources():
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def kernel_file() -> Path | None:
    found = sorted((OUT / "gateway").glob("_kernel*.so"))
    return found[0] if found else None


def build() -> Path:
    """The sanitized kernel, built when its sources (or the flags) changed since the last
    build; the package's Python copied afresh each time. Its path, or RuntimeError with the
    compiler's output."""
    fingerprint = _fingerprint()
    built = kernel_file()
    kept = {}
    if built is not None and STAMP.exists() and STAMP.read_text() == fingerprint:
        kept = {p: p.read_bytes() for p in (built, OUT / "gateway" / "_kernel.c") if p.exists()}
    shutil.rmtree(OUT / "gateway", ignore_errors=True)
    shutil.copytree(ROOT / "gateway", OUT / "gateway",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__", "_kernel.c"))
    if built is not None and built in kept:  # (the C too: the sanitizer's reports name its lines)
        for path, data in kept.items():
            path.write_bytes(data)
        return built
    if shutil.which("clang") is None:
        raise RuntimeError("the sanitized kernel needs clang and compiler-rt (Debian: clang "
                           "libclang-rt-dev; `make system-deps` installs them)")
    STAMP.unlink(missing_ok=True)
    env = {**os.environ, **BUILD_ENV}
    env.pop("GATEWAY_NO_EXTENSIONS", None)
    done = subprocess.run([sys.executable, str(ROOT / "setup.py"), "build_ext", "--inplace",
                           "--build-temp", str(OUT / "tmp")],
                          cwd=OUT, env=env, capture_output=True, text=True, check=False)
    built = kernel_file()
    if done.returncode or built is None:  # (setup.py turns a failed compile into a warning)
        raise RuntimeError(f"building the sanitized kernel failed:\n{done.stdout}{done.stderr}")
    STAMP.write_text(fingerprint)
    return built


def runtime() -> Path | None:
    """atheris's ASan runtime with libFuzzer in it, or None (no atheris, or a build of it
    without the runtime)."""
    try:
        import atheris
    except ImportError:
        return None
    path = Path(atheris.path()) / RUNTIME
    return path if path.is_file() else None


def environ() -> dict[str, str]:
    """What runs the sanitized kernel under atheris, over a process's environment: the
    runtime preloaded, the build first on the path, every allocation through malloc (so that
    ASan knows the bounds of each bytes object), leaks not reported (CPython's own at exit)."""
    lib = runtime()
    if lib is None:
        raise RuntimeError(f"atheris has no {RUNTIME} (see atheris's native extension fuzzing)")
    return {"LD_PRELOAD": str(lib), "PYTHONMALLOC": "malloc",
            "ASAN_OPTIONS": "detect_leaks=0",
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
            "PYTHONPATH": os.pathsep.join([str(OUT), str(ROOT)]),
            "GATEWAY_SANITIZE": "1", "FUZZ_SANITIZED": "1"}


def verify() -> str:
    """In a fuzzing process: the kernel imported is this build, instrumented, with the
    runtime loaded; a line that says so, or SystemExit."""
    from gateway import kernel

    problems = []
    compiled = kernel.compiled
    path = Path(getattr(compiled, "__file__", "") or "")
    if compiled is None or not path.is_relative_to(OUT):
        problems.append(f"the kernel imported is {kernel.why()} at {path or '-'}, not {OUT}")
    else:
        symbols = path.read_bytes()
        problems += [f"{path.name} does not import {name.decode()}" for name in INSTRUMENTED
                     if name not in symbols]
        probe = getattr(compiled, "_index_probe", None)  # (tests/test_kernel_findings.py's)
        if probe is not None and not _raises_index_error(probe):
            problems.append(f"{path.name} does not check its indexes (Cython's boundscheck)")
    maps = Path("/proc/self/maps").read_text()
    if RUNTIME not in maps:
        problems.append(f"{RUNTIME} is not loaded (LD_PRELOAD={os.environ.get('LD_PRELOAD')})")
    if problems:
        raise SystemExit("sanitizer check failed: " + "; ".join(problems))
    return (f"sanitizer: {kernel.why()} {path} (clang, ASan + UBSan + bounds checks + "
            f"libFuzzer counters), runtime {RUNTIME} loaded, PYTHONMALLOC="
            f"{os.environ.get('PYTHONMALLOC')}")


def _raises_index_error(probe: Any) -> bool:
    """``probe([0], 1)`` raises IndexError (an unchecked build reads past the list instead:
    ASan's report then ends the process, as loud a failure)."""
    try:
        probe([0], 1)
    except IndexError:
        return True
    return False


CANARY = ("import ctypes; src = bytes(32); dst = ctypes.create_string_buffer(256); "
          "ctypes.memmove(dst, src, 200); print('no report')")


def canary(env: dict[str, str]) -> str:
    """A read 168 bytes past a bytes object, in a process with ``env`` (over this one's): the
    runtime must report it (AddressSanitizer: heap-buffer-overflow) and end the process. What
    happened, or RuntimeError."""
    done = subprocess.run([sys.executable, "-c", CANARY], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60, check=False)
    if done.returncode == 0 or "AddressSanitizer: heap-buffer-overflow" not in done.stderr:
        raise RuntimeError(f"the sanitizer did not report an overflow (exit {done.returncode})"
                           f":\n{done.stdout}{done.stderr[-2000:]}")
    return f"sanitizer canary: a read past a bytes object was reported (exit {done.returncode})"


class Prepared:
    """The sanitizer build of one ``python -m fuzz run``: compiled in the background from the
    start (while the other harnesses run), waited for by the first kernel harness, which also
    gets the canary's word; :meth:`environment` then gives each kernel harness its
    environment, or RuntimeError."""

    def __init__(self) -> None:
        self._error: BaseException | None = None
        self._env: dict[str, str] | None = None
        self.notes: list[str] = []
        self._thread = threading.Thread(target=self._build, name="fuzz-asan-build",
                                        daemon=True)
        self._thread.start()

    def _build(self) -> None:
        try:
            started = time.monotonic()
            path = build()
            self.notes.append(f"sanitizer build: {path} ({time.monotonic() - started:.0f} s)")
        except BaseException as exc:  # noqa: BLE001 - reported by environment()
            self._error = exc

    def environment(self) -> dict[str, str]:
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(str(self._error))
        if self._env is None:
            env = environ()
            self.notes.append(canary(env))
            self._env = env
        return self._env
