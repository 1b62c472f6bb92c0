"""gateway.settings.checks: every "goes with" rule of the endpoint settings, once."""

from __future__ import annotations

import pytest

from gateway.plugins import registry
from gateway.settings import checks


def test_sp_refuses_heartbeats_and_handover_but_keeps_keepalive() -> None:
    settings = {"heartbeat_ivl": 1.0, "router_handover": True, "tcp_keepalive_idle": 30.0}
    [line] = checks.family_rules(settings, "sp")
    assert line.startswith("heartbeat_ivl, router_handover: not on SP")
    assert "SP has no heartbeat" in line
    assert checks.family_rules({"tcp_keepalive_idle": 30.0}, "sp") == []
    assert checks.family_rules(settings, "zmtp") == []


def test_mechanism_rules_every_mistake_at_once() -> None:
    assert checks.mechanism_rules({"curve_server": True, "plain_server": True})[0].startswith(
        "CURVE (curve_server) and PLAIN (plain_server)")
    errors = checks.mechanism_rules({"curve_cert": "x", "curve_allow": "d"})
    assert errors == ["curve_allow: only for a CURVE server (add curve_server=1)",
                      "a CURVE client needs one of curve_serverkey=Z85 or curve_server_cert=PATH"]
    assert checks.mechanism_rules({"plain_username": "u"}) == [
        "a PLAIN client needs plain_username and plain_password_file=PATH"]
    assert "SP endpoint" in checks.family_rules({"curve_server": True}, "sp")[0]


def test_plain_server_needs_a_user_list_or_allow_any() -> None:
    """Issue 20, finding 2: a PLAIN server without plain_passwords is refused at start with a
    clear message (it would refuse every client, as libzmq's); plain_allow_any=1 takes
    anyone."""
    errors = checks.mechanism_rules({"plain_server": True})
    assert len(errors) == 1 and "plain_passwords=FILE" in errors[0] \
        and "plain_allow_any=1" in errors[0]
    assert checks.mechanism_rules({"plain_server": True, "plain_allow_any": True}) == []
    assert "choose one" in checks.mechanism_rules(
        {"plain_server": True, "plain_allow_any": True, "plain_passwords": "pw"})[0]
    assert checks.mechanism_rules({"plain_allow_any": True, "plain_username": "u",
                                   "plain_password_file": "f"})[0].startswith(
        "plain_allow_any: only")


@pytest.mark.parametrize(("settings", "family", "scheme", "bound", "message"), [
    ({"tls_ca": "ca.pem"}, "sp", "tcp", False, "tls_ca: TLS settings need an sp+tls+tcp://"),
    ({}, "zmtp", "tls+tcp", False, "libzmq has no TLS transport"),
    ({"curve_server": True, "curve_cert": "c"}, "zmtp", "ws", True, "ZWS 2.0 (RFC 45) has NULL "
     "and PLAIN"),
    ({"origin": ("*",)}, "sp", "tcp", True, "origin: applies to WebSocket endpoints"),
    ({}, "sp", "tls+tcp", True, "a bound sp+tls+tcp:// endpoint needs tls_cert"),
    ({"tls_key": "k"}, "sp", "tls+tcp", False, "tls_key without tls_cert"),
    ({"tls_verify": "required", "tls_cert": "c"}, "sp", "tls+tcp", True,
     "tls_verify on a bound endpoint needs tls_ca"),
    ({"tls_server_name": "h", "tls_cert": "c"}, "sp", "tls+tcp", True,
     "tls_server_name: applies to a connecting endpoint"),
    ({"allow": ("10.0.0.0/8",)}, "zmtp", "tcp", False, "allow: applies to a bound endpoint"),
    ({"max_connections": 5}, "sp", "tcp", False, "max_connections: applies to a bound"),
    ({"plain_server": True}, "any", "tcp", True, "ZeroMQ security would not cover"),
    ({}, "any", "tls+tcp", True, "any+ takes tcp or ipc"),
])
def test_endpoint_rules(settings: dict[str, object], family: str, scheme: str, bound: bool,
                        message: str) -> None:
    transport = registry().transport(scheme)
    lines = checks.endpoint_rules(settings, family, transport, bound)
    assert any(message in line for line in lines), lines


def test_handover_applies_to_a_bridge_front() -> None:
    lines = checks.placement_rules({"router_handover": True}, bound=False, side="back")
    assert lines == ["router_handover applies to the front (the ROUTER side clients connect "
                     "to), not to the back"]
    assert checks.placement_rules({"router_handover": True}, bound=True, side="front") == []
