"""The kernel harnesses (fuzz/kernel_*.py: the compiled kernel against the reference) can fail:
a difference planted in what the harness compares (the kernel untouched), a compiled run that
never reached the kernel and an exception out of the engine are findings; the sanitizer check
of a fuzzing process refuses a kernel that is not the sanitizer build, and its canary needs a
live sanitizer; the seeds are what fuzz/kernel_seeds.py writes, and the seeds' layout reads
back what it wrote. (tests/test_fuzz_corpus.py replays every kept input.)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # fuzz/ is not installed: it runs from the repository
    sys.path.insert(0, str(ROOT))

from fuzz import (  # noqa: E402
    _asan,
    _bridge,
    _twins,
    kernel_curve,
    kernel_seeds,
    kernel_sp,
    kernel_zmtp,
)
from fuzz.__main__ import CORPUS  # noqa: E402
from fuzz._data import Data, Finding  # noqa: E402
from gateway import kernel  # noqa: E402

needs_kernel = pytest.mark.skipif(kernel.compiled is None,
                                  reason="the compiled kernel is not built (or not chosen)")
HARNESSES = {"kernel_zmtp": kernel_zmtp, "kernel_sp": kernel_sp, "kernel_curve": kernel_curve}
#: an honest request-reply session of each harness (its first route)
HELLO = {"kernel_zmtp": "seed-hello-0", "kernel_sp": "seed-hello-0",
         "kernel_curve": "seed-hello-0"}


def hello(name: str) -> bytes:
    return (CORPUS / name / HELLO[name]).read_bytes()


@needs_kernel
@pytest.mark.parametrize("name", list(HARNESSES))
def test_a_difference_in_what_the_runs_did_is_a_finding(name: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled run's state, as the harness sees it, loses the last byte (or event) the
    server received: the differential oracle reports it (the kernel is untouched)."""
    HARNESSES[name].one_input(hello(name))  # the honest run passes
    observe = _bridge.observe

    def planted(bridge: _bridge.Bridge) -> dict[str, Any]:
        state = observe(bridge)
        if _bridge.kernel_engaged(bridge):
            state["received"][-1] = state["received"][-1][:-1]
        return state

    monkeypatch.setattr(_bridge, "observe", planted)
    with pytest.raises(Finding, match=r"\[differs-received\] the compiled kernel and the "
                       r"reference differ .*received: .*first difference at"):
        HARNESSES[name].one_input(hello(name))


@needs_kernel
def test_a_compiled_run_that_never_reached_the_kernel_is_a_finding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bridge, "kernel_engaged", lambda bridge: False)
    with pytest.raises(Finding, match="did not forward with the kernel"):
        kernel_zmtp.one_input(hello("kernel_zmtp"))


def test_an_exception_out_of_the_engine_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe that raises out of ``data_received`` once it is up (here: the reference's
    ``Pipe.process``, planted) is the engine's failure, not the harness's."""
    from gateway.engine.pipe import Pipe

    process = Pipe.process

    def broken(self: Pipe, done: int = 0) -> None:
        if self.ready:
            raise RuntimeError("planted")
        process(self, done)

    monkeypatch.setattr(Pipe, "process", broken)
    with pytest.raises(Finding, match="the reference engine raised.*planted"):
        kernel_sp.one_input(hello("kernel_sp"))


def test_a_pure_build_runs_the_reference_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no kernel is built (GATEWAY_NO_EXTENSIONS) the harnesses still run every input on
    the reference (its own oracle: nothing raised), with nothing to compare."""
    monkeypatch.setattr(kernel, "compiled", None)
    run, engines = _bridge.run, []

    def recorded(setup: _bridge.Setup, compiled: bool, steps: Any) -> Any:
        engines.append(compiled)
        return run(setup, compiled, steps)

    monkeypatch.setattr(_bridge, "run", recorded)
    for name, harness in HARNESSES.items():
        harness.one_input(hello(name))
    assert engines == [False] * len(HARNESSES)


def test_the_sanitizer_check_refuses_a_kernel_that_is_not_the_sanitizer_build() -> None:
    """A fuzzing process of a kernel harness runs this before its first input: in this test
    process the kernel is the checkout's (or none), and no sanitizer runtime is loaded."""
    with pytest.raises(SystemExit, match="sanitizer check failed: the kernel imported is"):
        _asan.verify()


def test_the_canary_fails_without_a_sanitizer() -> None:
    with pytest.raises(RuntimeError, match="the sanitizer did not report an overflow"):
        _asan.canary({"LD_PRELOAD": "", "PYTHONMALLOC": "malloc"})


@pytest.mark.skipif(_asan.runtime() is None, reason="atheris (with its ASan runtime) is missing")
def test_the_canary_is_reported_under_the_fuzzing_runtime() -> None:
    assert "was reported" in _asan.canary(_asan.environ())


def test_the_seeds_are_what_kernel_seeds_writes() -> None:
    """``python -m fuzz seeds --kernel`` wrote them; a change of the layout or of the cases
    means writing them again."""
    written = list(kernel_seeds.inputs())
    assert len(written) > 150
    for harness, name, data in written:
        assert (CORPUS / harness / name).read_bytes() == data, f"{harness}/{name}"


def test_the_layout_reads_back_what_the_seeds_write() -> None:
    frames = (b"", bytes(700), b"x" * 256, b"abc")
    steps = (_twins.StepWriter().msg(1, *frames).many(0, 3, b"m").split(2, (5, 9), b"s")
             .flip(0, 300, 4, b"f").ping(1, 7, b"ctx").sub(0, b"A").echo(1, 9)
             .op(_twins.DRAIN, 2).op(_twins.TICK, 0, 3).op(_twins.LEAVE, 1)
             .raw_read(0, b"r" * 300))
    data = Data(_twins.encode_input(pattern=2, route=1, ipc=True, clients=2, servers=2, size=3,
                                    hwm=1, steps=steps.bytes()))
    setup = _twins.setup_of(data, kernel_sp.ROUTES, curve=False)
    assert setup == _bridge.Setup("pubsub", "sp", "sp", ipc=True, clients=2, servers=2,
                                  max_size=65536, hwm=2)
    assert _twins.steps_of(data) == [
        (_twins.MSG, 1, frames), (_twins.MANY, 0, (b"m",), 7),
        (_twins.SPLIT, 2, (b"s",), [5, 9]), (_twins.FLIP, 0, (b"f",), 300, 4),
        (_twins.PING, 1, 7, b"ctx"), (_twins.SUB, 0, b"A"), (_twins.ECHO, 1, 9),
        (_twins.DRAIN, 2), (_twins.TICK, 0, 3), (_twins.LEAVE, 1),
        (_twins.RAW, 0, b"r" * 255), (_twins.RAW, 0, b"r" * 45)]
