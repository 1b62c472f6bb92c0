"""gateway.tools.bench.instructions: instructions per request in the bridge, under valgrind."""

from __future__ import annotations

import shutil

import pytest

from gateway.tools.bench import instructions

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None,
                                    reason="valgrind is not installed (.ci/system-deps.sh)")


def test_bad_arguments_are_all_reported_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert instructions.main(["--routes", "zz,qq", "--requests", "5,2", "--window", "0",
                              "--size", "-1"]) == 2
    err = capsys.readouterr().err
    assert "unknown route 'qq'" in err and "0 < SMALL < LARGE" in err
    assert "--window: 1 to 4096" in err and "--size: 0 to 1 GiB" in err
    with pytest.raises(ValueError, match="route 'xx'"):
        instructions.count("xx", 1)
    with pytest.raises(ValueError, match="small < large"):
        instructions.per_request("zz", 10, 10)


@needs_valgrind
@pytest.mark.timeout(240)
def test_a_route_costs_what_a_python_middle_costs() -> None:
    """A few hundred requests through the pure path: more requests cost more instructions,
    and each costs what CPython's per-message work does (tens of thousands), not zero and not
    the start-up's hundreds of millions."""
    small, large = instructions.count("zs", 100), instructions.count("zs", 600)
    assert small > 10_000_000  # the interpreter's start-up alone
    assert 10_000 < (large - small) / 500 < 300_000


@needs_valgrind
@pytest.mark.timeout(240)
def test_one_request_in_flight_pays_a_read_each() -> None:
    """With one request in flight every request is a read of its own: the per-read work is
    not shared out, so a request costs more than with 64 in flight. The two runs differ by
    1,000 requests: what varies between runs of one count (timers, the loop's idle wake-ups,
    a few hundred thousand instructions in all) is then a few hundred a request, against a
    gap of thousands (100 requests apart, the noise once exceeded the gap: 33.5k against
    29.8k)."""
    one = instructions.per_request("sz", 200, 1200, kernel=True, window=1)
    many = instructions.per_request("sz", 200, 1200, kernel=True)
    assert 0 < many < one
