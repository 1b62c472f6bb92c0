"""SP over TLS through the gateway (``sp+tls+tcp://``) with real nng peers (pynng's TLS):
certificates made by the test with openssl, everything on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pynng
import pytest

from gateway.tools.harness.certs import make_certs
from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, zmq_client
from gateway.tools.harness.procs import LOCAL, free_port, lib_url

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("tls"))


def _client_config(certs: Path, ca: str = "ca.pem", own: str = "") -> pynng.TLSConfig:
    """A client's TLS config trusting ``ca``; ``own``: with the certificate ``<own>.pem`` and
    its key ``<own>.key``."""
    mine = {} if not own else {"own_cert_string": (certs / f"{own}.pem").read_text(),
                               "own_key_string": (certs / f"{own}.key").read_text()}
    return pynng.TLSConfig(pynng.TLSConfig.MODE_CLIENT, ca_string=(certs / ca).read_text(),
                           server_name="localhost", **mine)


def _nng_req(url: str, config: pynng.TLSConfig) -> pynng.Req0:
    sock = pynng.Req0(recv_timeout=5000, send_timeout=5000)
    sock.tls_config = config
    sock.dial(url, block=False)  # nng redials until the handshake succeeds
    return sock


def _front(certs: Path) -> str:
    return (f"@sp+tls+tcp://{LOCAL}:0?tls_cert={certs / 'server.pem'}"
            f"&tls_key={certs / 'server.key'}")


def test_nng_req_over_tls_to_a_zeromq_rep(certs: Path) -> None:
    with ZmqServer("REP") as server, Gateway(
            "bridge", _front(certs), f">zmq+tcp://{LOCAL}:{server.port}", "--log-format", "json",
            metrics=True) as gw:
        url = "tls+tcp://" + lib_url(gw.front).partition("://")[2]
        with _nng_req(url, _client_config(certs)) as req:
            for i in range(5):
                req.send(b"hello %d" % i)
                assert req.recv() == b"re:hello %d" % i
        assert gw.metric("gateway_forwarded_messages_total", direction="request") == 5


@pytest.fixture
def nng_tls_rep(certs: Path) -> Iterator[int]:
    """An nng REP listening on tls+tcp, answering ``re:`` + body until the test ends."""
    port = free_port()
    config = pynng.TLSConfig(pynng.TLSConfig.MODE_SERVER,
                             own_cert_string=(certs / "server.pem").read_text(),
                             own_key_string=(certs / "server.key").read_text())
    with NngServer(address=f"tls+tcp://{LOCAL}:{port}", tls_config=config):
        yield port


def test_zeromq_req_to_an_nng_rep_listening_on_tls(certs: Path, nng_tls_rep: int) -> None:
    back = (f">sp+tls+tcp://{LOCAL}:{nng_tls_rep}?tls_ca={certs / 'ca.pem'}"
            "&tls_server_name=localhost")
    with Gateway("bridge", f"@zmq+tcp://{LOCAL}:0", back) as gw, \
            zmq_client("REQ", lib_url(gw.front)) as req:
        for i in range(5):
            req.send(b"x%d" % i)
            assert req.recv() == b"re:x%d" % i


def test_an_untrusted_client_is_refused_logged_counted_and_others_served(certs: Path) -> None:
    with ZmqServer("REP") as server, Gateway(
            "bridge", _front(certs) + f"&tls_ca={certs / 'ca.pem'}&tls_verify=required",
            f">zmq+tcp://{LOCAL}:{server.port}", "--log-format", "json", "--name", "secure",
            metrics=True) as gw:
        url = "tls+tcp://" + lib_url(gw.front).partition("://")[2]
        # a client whose certificate comes from a CA the gateway does not trust
        stranger = _client_config(certs, own="other")
        with _nng_req(url, stranger) as bad:
            failed = gw.wait_event("handshake.failed", timeout=10, socket="secure/front",
                                   reason="tls")
            assert "TLS handshake failed" in failed["detail"]
            assert gw.wait_metric("gateway_handshake_failures_total", 1, socket="secure/front",
                                  reason="tls") >= 1
            good = _client_config(certs, own="client")
            with _nng_req(url, good) as req:
                req.send(b"trusted")
                assert req.recv() == b"re:trusted"
            bad.send_timeout = 300
            with pytest.raises(pynng.Timeout):
                bad.send(b"never")  # no pipe ever completes for it


def test_a_gateway_client_with_the_wrong_ca_is_refused(certs: Path, nng_tls_rep: int) -> None:
    back = (f">sp+tls+tcp://{LOCAL}:{nng_tls_rep}?tls_ca={certs / 'other-ca.pem'}"
            "&tls_server_name=localhost")
    with Gateway("bridge", f"@zmq+tcp://{LOCAL}:0", back, "--log-format", "json",
                 "--name", "out", metrics=True) as gw:
        failed = gw.wait_event("handshake.failed", timeout=10, socket="out/back", reason="tls")
        assert "CERTIFICATE_VERIFY_FAILED" in failed["detail"]
        assert gw.metric("gateway_handshake_failures_total", socket="out/back", reason="tls") >= 1


# -- CURVE or PLAIN on the ZeroMQ side, TLS on the SP side: what no other bridge translates ----

from interop_tests.test_gateway_security import (  # noqa: E402
    BACKENDS,
    _client_options,
    _front_security,
    _q,
    pki,  # noqa: F401  (the fixture)
)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mechanism", ["CURVE", "PLAIN"])
def test_secure_zeromq_client_to_an_nng_rep_over_tls(certs: Path, nng_tls_rep: int,
                                                     pki: dict, mechanism: str,  # noqa: F811
                                                     backend: str) -> None:
    front = f"@zmq+tcp://{LOCAL}:0?backend={backend}&{_front_security(mechanism, pki)}"
    back = (f">sp+tls+tcp://{LOCAL}:{nng_tls_rep}?tls_ca={certs / 'ca.pem'}"
            "&tls_server_name=localhost")
    with Gateway("bridge", front, back) as gw, zmq_client(
            "REQ", lib_url(gw.front), **_client_options(mechanism, pki, True)) as req:
        for i in range(3):
            req.send(b"sealed %d" % i)
            assert req.recv() == b"re:sealed %d" % i


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mechanism", ["CURVE", "PLAIN"])
def test_nng_req_over_tls_to_a_secure_zeromq_rep(certs: Path, pki: dict,  # noqa: F811
                                                 mechanism: str, backend: str) -> None:
    if mechanism == "CURVE":
        public, secret = pki["certs"]["server"]["keys"]
        server_opts: dict = {"curve_server": 1, "curve_publickey": public,
                             "curve_secretkey": secret}
        passwords = None
        client = _q(curve_cert=pki["certs"]["client"]["sec"],
                    curve_server_cert=pki["certs"]["server"]["pub"])
    else:
        server_opts = {"plain_server": 1}
        passwords = {"alice": "wonderland"}
        client = _q(plain_username="alice", plain_password_file=pki["alice_pw"])
    with ZmqServer("REP", options=server_opts, plain_passwords=passwords) as server, Gateway(
            "bridge", _front(certs),
            f">zmq+tcp://{LOCAL}:{server.port}?backend={backend}&{client}") as gw:
        url = "tls+tcp://" + lib_url(gw.front).partition("://")[2]
        with _nng_req(url, _client_config(certs)) as req:
            for i in range(3):
                try:
                    req.send(b"ask %d" % i)
                    got = req.recv()
                except pynng.Timeout:
                    raise AssertionError(f"no reply to ask {i}:\n{gw.stderr}") from None
                assert got == b"re:ask %d" % i


def test_the_pynng_backend_speaks_tls_both_ways(certs: Path, nng_tls_rep: int) -> None:
    """``?backend=pynng`` takes the same tls_* settings, as nng's TLSConfig: an nng TLS client
    through a pynng TLS front, and a pynng TLS back end to an nng TLS server."""
    front = _front(certs) + "&backend=pynng"
    back = (f">sp+tls+tcp://{LOCAL}:{nng_tls_rep}?backend=pynng&tls_ca={certs / 'ca.pem'}"
            "&tls_server_name=localhost")
    with Gateway("bridge", front, back) as gw:
        url = "tls+tcp://" + lib_url(gw.front).partition("://")[2]
        with _nng_req(url, _client_config(certs)) as req:
            for i in range(3):
                req.send(b"lib %d" % i)
                assert req.recv() == b"re:lib %d" % i
