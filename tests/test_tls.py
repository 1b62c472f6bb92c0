"""gateway.tls: settings, their checks and the ssl contexts (certificates made by openssl)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from gateway.config import from_dict
from gateway.device import check
from gateway.errors import ConfigError
from gateway.tls import TlsSettings, tls_of
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


def test_tls_of_reads_a_mapping_or_side_options(certs: Path) -> None:
    assert tls_of({}) is None
    ca = str(certs / "ca.pem")
    assert tls_of({"tls_ca": ca, "hwm": 3}) == TlsSettings(ca=ca)
    with pytest.raises(ConfigError, match="tls_ca: a readable file"):
        tls_of({"tls_ca": str(certs / "nowhere.pem")})


def test_a_context_is_made_once_per_side(certs: Path) -> None:
    tls = TlsSettings(str(certs / "server.pem"), str(certs / "server.key"))
    assert tls.context(True) is tls.context(True)
    assert tls.context(False) is not tls.context(True)


def test_key_files_must_be_private(certs: Path, tmp_path: Path) -> None:
    """Issue 20, finding 11: tls_key (or a tls_cert holding the key) is a secret file."""
    import shutil

    key = tmp_path / "open.key"
    shutil.copy(certs / "server.key", key)
    key.chmod(0o644)
    with pytest.raises(ConfigError, match="tls_key: .*too open"):
        tls_of({"tls_cert": str(certs / "server.pem"), "tls_key": str(key)})
    both = tmp_path / "both.pem"
    both.write_text((certs / "server.pem").read_text() + key.read_text())
    both.chmod(0o644)
    with pytest.raises(ConfigError, match="tls_cert: .*too open"):
        tls_of({"tls_cert": str(both)})


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
    data["bridge"][0]["front_options"].pop("tls_verify")
    lines = check(from_dict(data, source="g.toml").bridges, "g.toml")
    assert "g.toml: bridge 'secure' back: tls_ca: TLS settings need an sp+tls+tcp://, " \
           "sp+wss:// or zmq+wss:// endpoint" in lines
    assert "g.toml: bridge 'secure' front: tls_key without tls_cert" in lines


def test_config_accepts_a_tls_front(certs: Path) -> None:
    cfg = from_dict({"bridge": [{
        "name": "secure", "front": "@sp+tls+tcp://127.0.0.1:6443",
        "back": ">zmq+tcp://127.0.0.1:7000",
        "front_options": {"tls_cert": str(certs / "server.pem"),
                          "tls_key": str(certs / "server.key")}}]})
    assert dict(cfg.bridges[0].front_options)["tls_cert"].endswith("server.pem")
    assert check(cfg.bridges) == []


def test_missing_file_is_named() -> None:
    """Parsing reads no file; the check that plans the bridge reads it (once) and names it."""
    cfg = from_dict({"bridge": [{"front": "@sp+tls+tcp://127.0.0.1:1?tls_cert=/nonexistent/x.pem",
                                 "back": ">zmq+tcp://127.0.0.1:2"}]})
    [line] = check(cfg.bridges)
    assert "tls_cert: a readable file ('/nonexistent/x.pem' is not one)" in line


# -- issue 20, finding 5: a listener's limits come before the TLS handshake ---------------------
def _client_hello() -> bytes:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_side=False)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


async def _answer_to_hello(port: int) -> bytes:
    """What a listener sends back to a ClientHello before it closes (b"": nothing at all)."""
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_client_hello())
    got = b""
    try:
        async with asyncio.timeout(5):
            while chunk := await reader.read(65536):
                got += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    writer.close()
    return got


@pytest.mark.parametrize("scheme", ["sp+tls+tcp", "sp+wss"])
def test_a_refused_network_never_gets_the_certificate(certs: Path, scheme: str) -> None:
    """49db3ab checked ``allow=`` after the TLS handshake: a refused client still got the
    server's certificate. Now it gets nothing, and the refusal is counted."""
    import asyncio

    import gateway
    from gateway.metrics import METRICS

    tls = TlsSettings(str(certs / "server.pem"), str(certs / "server.key"))

    async def main() -> None:
        async with gateway.Socket("REP", name=f"fenced-{scheme}", tls=tls,
                                  allow=("10.9.9.0/24",)) as rep:
            port = int(rep.bind(f"{scheme}://127.0.0.1:0").rsplit(":", 1)[1].split("/")[0])
            before = METRICS.get("gateway_refused_connections_total", socket=f"fenced-{scheme}",
                                 reason="not-allowed")
            assert await _answer_to_hello(port) == b""
            assert METRICS.get("gateway_refused_connections_total", socket=f"fenced-{scheme}",
                               reason="not-allowed") == before + 1
        async with gateway.Socket("REP", tls=tls, allow=("127.0.0.0/8",)) as rep:
            port = int(rep.bind(f"{scheme}://127.0.0.1:0").rsplit(":", 1)[1].split("/")[0])
            assert (await _answer_to_hello(port))[:1] == b"\x16"  # a TLS handshake record

    asyncio.run(main())


def test_max_connections_holds_before_the_tls_handshake(certs: Path) -> None:
    """49db3ab: with max_connections=1, 30 of 30 TLS connections stayed open (counted only
    once their handshake completed). Now the 29 beyond the first are closed at once."""
    import asyncio

    from _aio import until

    import gateway
    from gateway.metrics import METRICS

    def refused() -> int:
        return METRICS.total_where("gateway_refused_connections_total", reason="max-connections")

    tls = TlsSettings(str(certs / "server.pem"), str(certs / "server.key"))

    async def main() -> None:
        async with gateway.Socket("REP", tls=tls, max_connections=1,
                                  handshake_timeout=30) as rep:
            port = int(rep.bind("sp+tls+tcp://127.0.0.1:0").rsplit(":", 1)[1])
            before = refused()
            conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(30)]
            # the listener has refused the 29 (a loaded machine takes its time: no fixed sleep)
            await until(lambda: refused() - before >= 29, 20)
            open_ = 0
            for reader, writer in conns:
                try:
                    data = await asyncio.wait_for(reader.read(1), 0.2)
                    open_ += data != b""
                except TimeoutError:
                    open_ += 1  # still open, silent: the one admitted, waiting for our hello
                except ConnectionResetError:
                    pass
                writer.close()
            assert open_ == 1

    asyncio.run(main())


def test_a_dialer_with_optional_verification_checks_the_name(certs: Path) -> None:
    """Finding 12: ``tls_verify=optional`` on a dialer turned the host-name check off, so a
    certificate for another host from the trusted CA was accepted."""
    ctx = TlsSettings(ca=str(certs / "ca.pem"), verify="optional").context(False)
    assert ctx.check_hostname and ctx.verify_mode != ssl.CERT_NONE
