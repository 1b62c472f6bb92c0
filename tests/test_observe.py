"""gateway.observe: /metrics, /healthz, /readyz over real HTTP on 127.0.0.1:0."""

from __future__ import annotations

import sys
import threading
import traceback
import urllib.error
import urllib.request

import pytest

from gateway.errors import ConfigError
from gateway.observe import ObserveServer, readiness_text

#: seconds an answer may take: a scrape is milliseconds, but the CI's four test workers share
#: two cores with the gateways they start (one 3.12 run timed out at 5 s once and never again)
ANSWER_WITHIN = 20.0


def _threads() -> str:
    """Every thread's stack, for a request that got no answer (where the server waits)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(f"--- {names.get(ident, ident)}\n{''.join(traceback.format_stack(frame))}"
                     for ident, frame in sys._current_frames().items())


def _get(address: str, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=ANSWER_WITHIN) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()
    except TimeoutError:
        pytest.fail(f"GET {path}: no answer within {ANSWER_WITHIN} s; threads:\n{_threads()}")


@pytest.fixture
def rows() -> list[tuple[str, int, int]]:
    return [("orders", 2, 0)]


def test_endpoints(rows: list[tuple[str, int, int]]) -> None:
    server = ObserveServer("127.0.0.1:0", lambda: rows)
    try:
        assert not server.address.endswith(":0")
        status, ctype, body = _get(server.address, "/metrics")
        assert status == 200 and ctype.startswith("text/plain")
        assert "# HELP gateway_build_info" in body
        assert _get(server.address, "/healthz")[:1] == (200,)
        status, _, body = _get(server.address, "/readyz")
        assert status == 503 and body == "orders waiting front=2 back=0\n"
        rows[0] = ("orders", 2, 1)
        status, _, body = _get(server.address, "/readyz")
        assert status == 200 and body == "orders ready front=2 back=1\n"
        assert _get(server.address, "/")[0] == 404
        assert _get(server.address, "/metricsx")[0] == 404
    finally:
        server.close()


def test_readiness_rules() -> None:
    assert readiness_text([])[0]  # no bridge: nothing to wait for
    # the backend cannot tell: not ready, unless configured so (unknown_peers = "ready")
    ready, text = readiness_text([("a", 0, -1)])
    assert not ready and text == "a waiting front=0 back=-1 (the back end cannot tell its peers)\n"
    assert readiness_text([("a", 0, -1)], "ready")[0]
    assert not readiness_text([("a", 0, -1), ("b", 1, 0)], "ready")[0]
    assert not readiness_text([("a", 1, 1), ("b", 1, 0)])[0]


def test_port_in_use_is_a_config_error() -> None:
    first = ObserveServer("127.0.0.1:0", list)
    try:
        with pytest.raises(ConfigError, match="cannot serve metrics"):
            ObserveServer(first.address, list)
    finally:
        first.close()
