"""The security cells' material (gateway.tools.harness.security): keys and certificates made once,
settings per role, the wrong credentials for a bad client."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import zmq

from gateway.tools.harness import security


@pytest.fixture(scope="module")
def m() -> security.Material:
    return security.material()


def test_material_is_made_once_with_private_secrets(m: security.Material) -> None:
    assert security.material() is m
    for name in ("server", "client", "stranger"):
        secret = m.curve_secret(name)
        assert secret.exists() and not stat.S_IMODE(secret.stat().st_mode) & 0o077
    assert [p.name for p in m.curve_allowed.iterdir()] == ["client.key"]
    assert (m.tls / "server.pem").exists() and (m.tls / "other-ca.pem").exists()


@pytest.mark.parametrize(("mechanism", "sp", "wire", "role", "bad", "keys"), [
    ("CURVE", "", "zmq", "server", False, ["curve_server", "curve_cert", "curve_allow"]),
    ("CURVE", "", "zmq", "client", False, ["curve_cert", "curve_server_cert"]),
    ("PLAIN", "", "zmq", "server", False, ["plain_server", "plain_passwords"]),
    ("PLAIN", "", "zmq", "client", True, ["plain_username", "plain_password_file"]),
    ("", "tls+tcp", "sp", "server", False, ["tls_cert", "tls_key"]),
    ("", "wss", "sp", "client", True, ["tls_ca", "tls_server_name"]),
    ("", "ws", "sp", "client", False, []),
    ("CURVE", "tls+tcp", "sp", "client", False, ["tls_ca", "tls_server_name"]),
])
def test_settings_by_role(mechanism: str, sp: str, wire: str, role: str, bad: bool,
                          keys: list[str]) -> None:
    pairs = security.settings(mechanism, sp, wire, role, bad)
    assert [k for k, _ in pairs] == keys
    options = security.native_options(pairs)  # every value passes the gateway's own checks
    assert bool(options) == bool(pairs)


def test_a_bad_client_gets_the_wrong_credentials(m: security.Material) -> None:
    good = dict(security.settings("CURVE", "", "zmq", "client"))
    bad = dict(security.settings("CURVE", "", "zmq", "client", bad=True))
    assert Path(good["curve_cert"]).name == "client.key_secret"
    assert Path(bad["curve_cert"]).name == "stranger.key_secret"
    wrong = dict(security.settings("", "tls+tcp", "sp", "client", bad=True))
    assert Path(wrong["tls_ca"]).name == "other-ca.pem"
    assert m.password_file(True).read_text() != m.password_file(False).read_text()


def test_configure_libzmq_sets_the_mechanism() -> None:
    ctx = zmq.Context()
    try:
        server, client = ctx.socket(zmq.REP), ctx.socket(zmq.REQ)
        auth = security.configure_libzmq(server, ctx, "CURVE", "server", False)
        try:
            assert server.curve_server == 1 and auth is not None
            assert security.configure_libzmq(client, ctx, "PLAIN", "client", True) is None
            assert client.plain_username == security.USER.encode()
        finally:
            assert auth is not None
            auth.stop()
        server.close(0)
        client.close(0)
    finally:
        ctx.term()


def test_sp_urls() -> None:
    assert security.sp_url("tls+tcp") == "tls+tcp://127.0.0.1:0"
    assert security.sp_url("wss", port=5) == f"wss://127.0.0.1:5{security.WS_PATH}"
