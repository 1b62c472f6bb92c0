"""The compiled forwarding kernel (``gateway._kernel``, from ``gateway/_kernel.pyx``).

Everything else is in pyproject.toml. As aiohttp, msgpack and websockets do it: the extension
is optional. Without a compiler (or with ``GATEWAY_NO_EXTENSIONS`` set to anything but "" or "0") the package installs pure
Python, with one warning, and runs the reference engine. The sdist carries the generated C, so
installing from it needs no Cython. ``GATEWAY_SANITIZE=1`` builds with AddressSanitizer and
UndefinedBehaviorSanitizer and Cython's bounds checks (CI's sanitizer job).
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist

HERE = Path(__file__).parent
PYX, C = "gateway/_kernel.pyx", "gateway/_kernel.c"
NO_EXTENSIONS = os.environ.get("GATEWAY_NO_EXTENSIONS", "") not in ("", "0")  # as gateway/kernel.py
SANITIZE = bool(os.environ.get("GATEWAY_SANITIZE"))


def _cythonized(force: bool = False) -> list[Extension]:
    # Cython's checks of list/tuple indexes: off for speed, on in the sanitizer build. Given
    # here only: a directive in the .pyx header would beat these (tests/test_kernel_findings.py)
    checks = SANITIZE
    directives = {"language_level": 3, "boundscheck": checks, "wraparound": checks,
                  "initializedcheck": checks}
    args: list[str] = ["-O3"]
    link: list[str] = []
    if SANITIZE:
        args = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                "-fno-sanitize-recover=undefined"]
        link = ["-fsanitize=address,undefined"]
    # libsodium: the kernel seals and opens CURVE MESSAGE boxes itself (Debian libsodium-dev)
    ext = Extension("gateway._kernel", [PYX], extra_compile_args=args, extra_link_args=link,
                    libraries=["sodium"])
    try:
        from Cython.Build import cythonize
    except ImportError:  # an sdist: its generated C
        if not (HERE / C).is_file():
            return []
        ext.sources = [C]
        return [ext]
    return list(cythonize([ext], compiler_directives=directives, force=force or SANITIZE,
                          quiet=True))


class OptionalBuildExt(build_ext):
    """A failed compile is a warning and a pure package, never a failed install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - no compiler, no headers: pure Python
            self._pure(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._pure(exc)

    def _pure(self, exc: Exception) -> None:
        self.warn(f"zmq-sp-gateway: the compiled kernel was not built ({exc}); the pure-Python "
                  "engine runs instead (install gcc and the Python headers to build it)")


class SdistWithC(sdist):
    """The sdist carries the generated C (msgpack's habit): no Cython needed to install."""

    def run(self) -> None:
        _cythonized(force=True)
        super().run()


setup(
    ext_modules=[] if NO_EXTENSIONS else _cythonized(),
    cmdclass={"build_ext": OptionalBuildExt, "sdist": SdistWithC},
)
