"""The CI-sized matrix: ``gateway.tools.matrix.cells.ci_cells()`` run directly (no Spark), each cell
in its own forked process group with a hard timeout, plus table tests of the cell library.

Every implementation pair, every ZMTP pairing against libzmq (so every illegal one), both SP
illegal pairings, each shape and transport, and every gateway route family with the library
and the native backends. The full matrix is ``gateway matrix run`` (and ``-m slow`` here).
"""

from __future__ import annotations

import shutil
from itertools import product

import pytest

from gateway.patterns.pairing import zmtp_legal
from gateway.tools.matrix.catalog import all_cells, ci_cells, select
from gateway.tools.matrix.cells import CLI_IMPLS, JEROMQ, OUTCOMES, SECURITY, SHAPES, SP_IMPLS, Cell
from gateway.tools.matrix.host import run_cell
from gateway.tools.matrix.outcomes import expected
from gateway.tools.matrix.pattern_rules import PATTERN_SHAPES
from gateway.tools.matrix.suites import jeromq_cells, oneport_cells, security_cells, zws_cells

CI_TIMEOUT = 1.5  # refused cells cost one timeout each; a legal exchange takes milliseconds
CLI_EXE = {"nanomsg": "nanocat", "nng-1.5": "nngcat"}


def _skip_missing_cli(cell: Cell) -> None:
    for impl in (cell.client_impl, cell.server_impl):
        if impl in CLI_IMPLS and shutil.which(CLI_EXE[impl]) is None:
            pytest.skip(f"{CLI_EXE[impl]} not installed (apt-get install nanomsg-utils nng-utils)")


def _check(cell: Cell, timeout: float) -> None:
    _skip_missing_cli(cell)
    if JEROMQ in (cell.client_impl, cell.server_impl):
        from gateway.tools.harness.peers import jeromq

        if jeromq.missing():
            pytest.skip(str(jeromq.missing()))
    if "jszmq" in (cell.client_impl, cell.server_impl):
        from gateway.tools.harness.peers import jszmq

        if jszmq.missing():
            pytest.skip(str(jszmq.missing()))
    row = run_cell(cell, timeout=timeout)
    if row["observed"] == "skipped":  # a runtime missing on this machine: said, not hidden
        pytest.skip(row["detail"])
    assert row["expected"] == expected(cell)
    assert row["observed"] == row["expected"], f"{cell.cell_id}: {row['detail']}"
    assert row["envelope_ok"], f"{cell.cell_id}: {row['detail']}"
    if row["observed"] == "exchanged" and cell.impl_of(cell.requester or "client") not in CLI_IMPLS:
        assert row["rtt_us"] is not None and row["rtt_us"] > 0


def _params(cells: list[Cell]) -> list[object]:
    """Each cell, a known issue (``outcomes.KNOWN_ISSUES``) marked xfail (strict) with its reason."""
    from gateway.tools.matrix.outcomes import known_issue, known_issue_strict

    return [pytest.param(c, id=c.cell_id, marks=[pytest.mark.xfail(
        reason=why, strict=known_issue_strict(c))] if (why := known_issue(c)) else [])
        for c in cells]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cell", _params(ci_cells()))
def test_ci_cell(cell: Cell) -> None:
    _check(cell, CI_TIMEOUT)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cell", _params([c for c in zws_cells() if c not in set(ci_cells())]))
def test_zws_cell(cell: Cell) -> None:
    """ZWS 2.0: the native engine and jszmq both ways, and jszmq through the gateway (the
    CI selection holds the first of them already)."""
    _check(cell, CI_TIMEOUT)


def _slow_cells() -> list[Cell]:
    ci = set(ci_cells())
    return [c for c in all_cells() if c not in ci]


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("cell", _params(_slow_cells()))
def test_matrix_cell(cell: Cell) -> None:
    _check(cell, 2.0)


# -- the cell library itself (no network) ---------------------------------------------------------
def test_ci_selection_covers_every_impl_pair_and_illegal_pairing() -> None:
    ci = ci_cells()
    direct = [c for c in ci if c.direct]
    for wire, impls in (("zmq", ("native", "libzmq")),
                        ("sp", SP_IMPLS)):
        for a, b in product(impls, repeat=2):
            assert any(c.client_wire == wire and (c.client_impl, c.server_impl) == (a, b)
                       for c in direct), (wire, a, b)
    for a, b in product(("REQ", "REP", "DEALER", "ROUTER"), repeat=2):  # all 16, libzmq both ends
        assert any(c.client_wire == "zmq" and (c.client_type, c.server_type) == (a, b)
                   and c.client_impl == c.server_impl == "libzmq" for c in direct)
    for a, b in (("REQ", "REQ"), ("REP", "REP")):
        assert any(c.client_wire == "sp" and (c.client_type, c.server_type) == (a, b) for c in direct)
    assert {c.wire for c in ci} >= {"zmq", "sp", "zmq->sp", "sp->zmq", "zmq->zmq", "sp->sp"}
    assert {c.shape for c in ci} == set(SHAPES) | set(PATTERN_SHAPES)
    assert {c.net for c in ci} == {"tcp", "ipc"}
    assert {expected(c) for c in ci} == set(OUTCOMES)
    assert 200 <= len(ci) <= 260  # about 6 minutes of CI
    # every pattern family direct and through the gateway both ways, with illegal peers
    pat = [c for c in ci if c.family != "reqrep"]
    for fam in ("pubsub", "pipeline", "pair"):
        assert {c.wire for c in pat if c.family == fam} >= {"zmq->sp", "sp->zmq"}, fam
    assert {c.client_wire for c in pat if c.direct} == {"zmq", "sp"}
    assert sum(expected(c) == "refused-handshake" for c in pat if c.direct) >= 2
    assert sum(expected(c) == "refused-handshake" for c in pat if not c.direct) >= 2
    assert {i for c in pat for i in (c.client_impl, c.server_impl)} >= {"nanomsg", "nng-1.5"}


def test_zws_cells_meet_jszmq_both_ways_and_through_the_gateway() -> None:
    cells = zws_cells()
    assert len(cells) == 21
    direct = [c for c in cells if c.direct]
    assert {(c.client_impl, c.server_impl) for c in direct} == {
        ("jszmq", "native"), ("native", "jszmq"), ("native", "native")}
    assert {c.server_impl for c in cells if not c.direct} == {"libzmq", "nng"}
    assert sum(expected(c) == "refused-handshake" for c in cells) == 1
    assert all(c.shape == "zws" for c in cells)


def test_jeromq_cells_cover_legal_and_illegal_pairings() -> None:
    """JeroMQ 0.3 (ZMTP 2.0) meets the native engine in every pairing it can play, libzmq, and
    the gateway both ways; legal and illegal ones (the 2.0 socket-type byte is checked)."""
    cells = jeromq_cells()
    direct = [c for c in cells if c.direct and "native" in (c.client_impl, c.server_impl)]
    for a, b in product(("REQ", "REP", "DEALER", "ROUTER"), repeat=2):
        assert any((c.client_type, c.server_type) == (a, b) for c in direct), (a, b)
    assert {expected(c) for c in cells} == {"exchanged", "refused-handshake", "refused-limit"}
    assert {c.wire for c in cells} >= {"zmq", "zmq->sp", "sp->zmq"}
    assert set(cells) <= set(all_cells())
    ci = [c for c in ci_cells() if JEROMQ in (c.client_impl, c.server_impl)]
    assert 0 < len(ci) <= 5  # a JVM per peer: the rest is slow
    assert {expected(c) for c in ci} == {"exchanged", "refused-handshake"}


def test_oneport_cells_cover_both_wires_both_ways() -> None:
    """One port, both wires: clients of each wire, legal and illegal, through an any+ front to
    servers of each wire on every back end; a few in CI."""
    cells = oneport_cells()
    assert {(c.client_wire, c.server_wire) for c in cells} == set(product(("zmq", "sp"), repeat=2))
    assert {c.backends for c in cells} == {("any", b) for b in ("native", "pyzmq", "pynng")}
    assert {expected(c) for c in cells} == {"exchanged", "refused-handshake", "refused-limit"}
    assert {c.client_type for c in cells if c.client_wire == "zmq"} >= {"REQ", "DEALER", "ROUTER"}
    assert {c.net for c in cells} == {"tcp", "ipc"}
    assert set(cells) <= set(all_cells())
    ci = [c for c in ci_cells() if c.backends[0] == "any"]
    assert {(c.client_wire, c.server_wire) for c in ci} == set(product(("zmq", "sp"), repeat=2))
    assert "refused-handshake" in {expected(c) for c in ci} and len(ci) <= 6


def test_security_cells_cover_every_mechanism_and_transport_right_and_wrong() -> None:
    """CURVE, PLAIN, TLS, ws and wss, directly against libzmq and nng and through the gateway
    both ways; the right credentials exchange, the wrong ones are refused-auth."""
    cells = security_cells()
    assert {c.shape for c in cells} == set(SECURITY) - {"zws"}  # (ZWS: zws_cells)
    for shape, sec in SECURITY.items():
        if sec.zws:
            continue
        outcomes = {expected(c) for c in cells if c.shape == shape}
        assert outcomes == {"refused-auth" if sec.bad else "exchanged"}, shape
    direct = {(c.client_impl, c.server_impl, c.shape) for c in cells if c.direct}
    for shape in ("curve", "curve-badkey", "plain", "plain-badpass"):
        assert {("libzmq", "native", shape), ("native", "libzmq", shape)} <= direct
    for shape in ("tls", "tls-untrusted", "ws", "wss", "wss-untrusted"):
        assert {("nng", "native", shape), ("native", "nng", shape)} <= direct
    routes = {(c.wire, c.shape) for c in cells if not c.direct}
    assert {("zmq->sp", "curve+tls"), ("sp->zmq", "curve+tls"), ("zmq->sp", "plain+tls"),
            ("sp->zmq", "ws"), ("zmq->sp", "wss")} <= routes
    assert {c.backends[0] for c in cells if not c.direct and c.client_wire == "zmq"} == {
        "pyzmq", "native"}
    assert set(cells) <= set(all_cells())
    ci = [c for c in ci_cells() if c.shape in SECURITY and c.shape != "zws"]
    assert {expected(c) for c in ci} == {"exchanged", "refused-auth"} and len(ci) <= 24


def test_ci_selection_covers_every_implementation_shape_route_and_outcome() -> None:
    """Every value of every column the matrix has (each implementation on each side, each
    socket type, transport, route, shape and expected outcome) is in at least one CI cell."""
    from gateway.tools.matrix.catalog import COVERED, _value
    from gateway.tools.matrix.impls import IMPLEMENTATIONS

    ci, everything = ci_cells(), all_cells()
    for key in COVERED:
        missing = {v for c in everything for v in _value(c, key)} - {
            v for c in ci for v in _value(c, key)}
        assert not missing, (key, missing)
    assert {i for c in ci for i in (c.client_impl, c.server_impl)} == set(IMPLEMENTATIONS)


def test_full_matrix_is_big_and_unique() -> None:
    cells = all_cells()
    assert len(cells) >= 2000
    assert len({c.cell_id for c in cells}) == len(cells)
    routes = {c.route for c in cells if not c.direct and c.family == "reqrep"}
    # pyzmq/native x pynng/native, plus same-family pairs; one port (any) to every back end
    assert len(routes) == 12


@pytest.mark.parametrize("a,b", list(product(("REQ", "REP", "DEALER", "ROUTER"), repeat=2)))
def test_zmtp_expectation_follows_the_table(a: str, b: str) -> None:
    cell = Cell("libzmq", a, "libzmq", b, "zmq+tcp", "direct", "small")
    assert expected(cell) == ("exchanged" if zmtp_legal(a, b) else "refused-handshake")


def test_seed_illegal_pairs_are_expected_refused() -> None:
    for a, b in (("REQ", "DEALER"), ("REQ", "REQ"), ("REP", "REP"), ("REP", "ROUTER")):
        assert expected(Cell("libzmq", a, "libzmq", b, "zmq+tcp", "direct", "small")) == "refused-handshake"
    for a, b in (("REQ", "REP"), ("REQ", "ROUTER"), ("DEALER", "REP"), ("DEALER", "ROUTER"),
                 ("DEALER", "DEALER"), ("ROUTER", "ROUTER")):
        assert expected(Cell("libzmq", a, "libzmq", b, "zmq+tcp", "direct", "small")) == "exchanged"


def test_sp_only_req_rep() -> None:
    for (a, b), want in {("REQ", "REP"): "exchanged", ("REP", "REQ"): "exchanged",
                         ("REQ", "REQ"): "refused-handshake", ("REP", "REP"): "refused-handshake"}.items():
        assert expected(Cell("nng", a, "nanomsg", b, "sp+tcp", "direct", "small")) == want


def test_gateway_checks_both_hops() -> None:
    g = "gateway:pyzmq->pynng"
    t = "zmq+tcp->sp+tcp"
    assert expected(Cell("libzmq", "REQ", "nng", "REP", t, g, "small")) == "exchanged"
    assert expected(Cell("libzmq", "DEALER", "nng", "REP", t, g, "small")) == "exchanged"
    assert expected(Cell("libzmq", "REP", "nng", "REP", t, g, "small")) == "refused-handshake"
    assert expected(Cell("libzmq", "REQ", "nng", "REQ", t, g, "small")) == "refused-handshake"
    zz = "zmq+tcp->zmq+tcp"
    assert expected(Cell("libzmq", "REQ", "libzmq", "REQ", zz, "gateway:pyzmq->pyzmq", "small")) == "refused-handshake"
    assert expected(Cell("libzmq", "REQ", "libzmq", "ROUTER", zz, "gateway:pyzmq->pyzmq", "small")) == "exchanged"


def test_oversize_limits() -> None:
    d = "direct"
    # libzmq has no default limit, nor has nng (1.11 and 1.5.2); nanomsg and native: 1 MiB
    assert expected(Cell("libzmq", "REQ", "libzmq", "REP", "zmq+tcp", d, "oversize")) == "exchanged"
    assert expected(Cell("nng", "REQ", "nng-1.5", "REP", "sp+tcp", d, "oversize")) == "exchanged"
    assert expected(Cell("nng", "REQ", "nanomsg", "REP", "sp+tcp", d, "oversize")) == "refused-limit"
    assert expected(Cell("libzmq", "REQ", "native", "REP", "zmq+tcp", d, "oversize")) == "refused-limit"
    # the reply is as large as the request: a limited client refuses it
    assert expected(Cell("native", "REQ", "libzmq", "REP", "zmq+tcp", d, "oversize")) == "refused-limit"
    # ... unless a CLI answers (a fixed short reply)
    assert expected(Cell("native", "REQ", "nng-1.5", "REP", "sp+tcp", d, "oversize")) == "exchanged"
    # the gateway enforces its limit on every backend
    assert expected(Cell("libzmq", "REQ", "libzmq", "REP", "zmq+tcp->zmq+tcp", "gateway:pyzmq->pyzmq",
                         "oversize")) == "refused-limit"


def test_select_expressions() -> None:
    cells = all_cells()
    assert all(c.server_impl == "nanomsg" for c in select(cells, "server_impl=nanomsg"))
    sp_gw = select(cells, "wire=sp->zmq,route=gateway:native->*,shape!=small")
    assert sp_gw and all(c.wire == "sp->zmq" and c.backends[0] == "native" and c.shape != "small"
                         for c in sp_gw)
    assert select(cells, "impl=nng-1.5|nanomsg,net=ipc") == [
        c for c in cells if {"nng-1.5", "nanomsg"} & {c.client_impl, c.server_impl} and c.net == "ipc"]
    assert set(select(cells, "@ci")) == set(ci_cells())
    assert all("gateway" in c.cell_id for c in select(cells, "gateway"))
    assert not any("gateway" in c.cell_id for c in select(cells, "!gateway"))
    with pytest.raises(ValueError):
        select(cells, "colour=blue")


def test_cell_id_round_trip() -> None:
    for c in ci_cells():
        assert Cell.from_dict(c.as_dict()) == c
        assert c.cell_id == Cell.from_dict(c.as_dict()).cell_id


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in fh)
    except OSError:
        return True


def test_hard_timeout_kills_the_whole_cell(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A cell that hangs is killed with everything it spawned (its process group)."""
    import subprocess
    import time

    import gateway.tools.matrix.host as host
    import gateway.tools.matrix.runner as runner

    marker = tmp_path / "pid"

    def hang(cell: Cell, timeout: float, on_played: object = None) -> dict:  # type: ignore[type-arg]
        proc = subprocess.Popen(["sleep", "60"])  # stands for a CLI peer or the gateway
        marker.write_text(str(proc.pid))
        time.sleep(60)
        return {}

    monkeypatch.setattr(runner, "run_cell_inline", hang)
    monkeypatch.setattr(host, "hard_timeout", lambda timeout: 1.0)
    cell = ci_cells()[0]
    t0 = time.monotonic()
    row = host._run_forked(cell, 0.1)
    assert time.monotonic() - t0 < 10
    assert row["observed"] == "error" and "hard timeout" in row["detail"]
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while not _dead(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _dead(pid)


@pytest.mark.parametrize("wire", ["zmq", "sp"])
def test_pattern_expectations_follow_the_tables(wire: str) -> None:
    from gateway.tools.matrix.pattern_rules import PATTERN_TYPES, pattern_legal
    from gateway.tools.matrix.suites import pattern_cells

    for c in pattern_cells():
        if c.direct and c.client_wire == wire:
            legal = pattern_legal(wire, c.client_type, c.server_type)
            assert expected(c) == ("exchanged" if legal else "refused-handshake"), c.cell_id
    assert pattern_legal("zmq", "XPUB", "SUB") and pattern_legal("zmq", "PUB", "XSUB")
    assert not pattern_legal("zmq", "PUB", "PULL") and not pattern_legal("sp", "PAIR0", "PAIR1")
    assert set(PATTERN_TYPES["sp"]) >= {"PAIR0", "PAIR1"}
