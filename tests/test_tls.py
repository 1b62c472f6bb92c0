"""gateway.tls: settings, their checks and the ssl contexts (certificates made by openssl)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from gateway.config import from_dict
from gateway.errors import ConfigError
from gateway.tls import TlsSettings, check_settings, tls_of
from gateway.tools.harness.certs import make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_contexts_follow_nng_defaults(certs: Path) -> None:
    server = TlsSettings(str(certs / "server.pem"), str(certs / "server.key")).context(True)
    assert server.verify_mode == ssl.CERT_NONE  # a server asks for no client certificate
    client = TlsSettings(ca=str(certs / "ca.pem")).context(False)
    assert client.verify_mode == ssl.CERT_REQUIRED and client.check_hostname
    lax = TlsSettings(verify="none").context(False)
    assert lax.verify_mode == ssl.CERT_NONE and not lax.check_hostname
    strict = TlsSettings(str(certs / "server.pem"), str(certs / "server.key"),
                         str(certs / "ca.pem"), "required").context(True)
    assert strict.verify_mode == ssl.CERT_REQUIRED


def test_a_key_that_does_not_match_names_the_files(certs: Path) -> None:
    bad = TlsSettings(str(certs / "server.pem"), str(certs / "other.key"))
    with pytest.raises(ConfigError, match="server.pem.*other.key"):
        bad.context(True)


def test_tls_of_reads_a_mapping_or_side_options() -> None:
    assert tls_of({}) is None
    assert tls_of({"tls_ca": "x", "hwm": 3}) == TlsSettings(ca="x")


@pytest.mark.parametrize(("settings", "family", "transport", "bound", "message"), [
    ({"tls_ca": "ca.pem"}, "sp", "tcp", False, "tls_ca: TLS settings need an sp+tls+tcp://"),
    ({}, "zmtp", "tls+tcp", False, "libzmq has no TLS transport"),
    ({}, "sp", "tls+tcp", True, "a bound sp+tls+tcp:// endpoint needs tls_cert"),
    ({"tls_key": "k"}, "sp", "tls+tcp", False, "tls_key without tls_cert"),
])
def test_mistakes(settings: dict[str, str], family: str, transport: str, bound: bool,
                  message: str) -> None:
    assert any(message in line for line in check_settings(settings, family, transport, bound))


def test_config_reports_tls_mistakes_with_bridge_and_side(certs: Path) -> None:
    data = {"bridge": [{
        "name": "secure", "front": "@sp+tls+tcp://127.0.0.1:6443",
        "back": f">zmq+tcp://127.0.0.1:7000?tls_ca={certs / 'ca.pem'}",
        "front_options": {"tls_key": str(certs / "server.key"),
                          "tls_verify": "sometimes"}}]}
    with pytest.raises(ConfigError) as info:
        from_dict(data, source="g.toml")
    text = str(info.value)
    assert "g.toml: bridge 'secure' front_options: bad value 'sometimes' for tls_verify" in text
    assert "g.toml: bridge 'secure' back: tls_ca: TLS settings need an sp+tls+tcp://" in text


def test_config_accepts_a_tls_front(certs: Path) -> None:
    cfg = from_dict({"bridge": [{
        "name": "secure", "front": "@sp+tls+tcp://127.0.0.1:6443",
        "back": ">zmq+tcp://127.0.0.1:7000",
        "front_options": {"tls_cert": str(certs / "server.pem"),
                          "tls_key": str(certs / "server.key")}}]})
    assert cfg.bridges[0].front_options["tls_cert"].endswith("server.pem")


def test_missing_file_is_named() -> None:
    with pytest.raises(ConfigError, match="tls_cert.*'/nonexistent/x.pem' is not one"):
        from_dict({"bridge": [{"front": "@sp+tls+tcp://127.0.0.1:1?tls_cert=/nonexistent/x.pem",
                               "back": ">zmq+tcp://127.0.0.1:2"}]})
