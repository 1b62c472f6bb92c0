"""The native engine's PLAIN and CURVE against libzmq (pyzmq) on 127.0.0.1, both roles.

Keys and certificates are made by the tests (pyzmq's ``zmq.auth.create_certificates`` and
``zmq.curve_keypair``, so libzmq's own files and key text are what the gateway reads). Each
case: a request and its reply cross; then the refusals: an unknown CURVE key and a wrong PLAIN
password are refused by the native server (libzmq's monitor sees the "400" ERROR as an
authentication failure; our side logs and counts the reason) while a good client on the same
socket keeps working; the native client refused by a libzmq server with ZAP counts the ERROR.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio
import zmq.auth
from zmq.auth.asyncio import AsyncioAuthenticator
from zmq.utils.monitor import recv_monitor_message

import gateway
from gateway.metrics import METRICS
from gateway.security import Security
from gateway.settings.files import load_cert
from interop_tests.helpers import auth_files, run


def _certs(tmp: Path, *names: str) -> dict[str, tuple[str, str]]:
    """name -> (public .key path, .key_secret path), secret files chmod 600."""
    out = {}
    for name in names:
        pub, sec = zmq.auth.create_certificates(str(tmp), name)
        os.chmod(sec, 0o600)
        out[name] = (pub, sec)
    return out


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Any]:
    certs = _certs(tmp_path, "server", "client", "stranger")
    return {"certs": certs, **auth_files(tmp_path, certs["client"][0],
                                         "alice=wonderland\n# comment\nbob=builder\n")}


def _curve_client(sock: zmq.Socket[Any], cert_secret: str, server_public: str) -> None:
    public, secret = zmq.auth.load_certificate(cert_secret)
    assert secret is not None
    server_key, _ = zmq.auth.load_certificate(server_public)
    sock.curve_publickey, sock.curve_secretkey, sock.curve_serverkey = public, secret, server_key


def _auth_failures(reason: str, mechanism: str) -> int:
    return sum(v for k, v in METRICS.counters.items()
               if k[0] == "gateway_auth_failures_total"
               and ("reason", reason) in k[1] and ("mechanism", mechanism) in k[1])


async def _expect_refused(monitor: zmq.asyncio.Socket, timeout: float = 5.0) -> tuple[int, int]:
    """libzmq's monitor: the handshake failed (never succeeded). Returns the event."""
    async with asyncio.timeout(timeout):
        while True:
            event = await recv_monitor_message(monitor)
            assert event["event"] != zmq.EVENT_HANDSHAKE_SUCCEEDED
            if event["event"] in (zmq.EVENT_HANDSHAKE_FAILED_AUTH,
                                  zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
                return int(event["event"]), int(event["value"])


def _native_server(kind: str, pki: dict[str, Any], mechanism: str) -> gateway.Socket:
    if mechanism == "CURVE":
        cert = load_cert(pki["certs"]["server"][1], secret=True)
        assert cert.secret is not None
        sec = Security("CURVE", True, cert.public, cert.secret, curve_allow=pki["allow"])
    else:
        sec = Security("PLAIN", True, plain_passwords=pki["passwords"])
    return gateway.Socket(kind, security=sec, linger=0, name=f"{mechanism.lower()}-server")


@pytest.mark.parametrize("mechanism", ["CURVE", "PLAIN"])
def test_libzmq_client_to_native_server_and_refusals(pki: dict[str, Any], mechanism: str) -> None:
    async def main() -> None:
        ctx = zmq.asyncio.Context()
        rep = _native_server("REP", pki, mechanism)
        try:
            url = gateway.url.parse(rep.bind("zmq+tcp://127.0.0.1:0")).lib_url
            good = ctx.socket(zmq.REQ)
            bad = ctx.socket(zmq.REQ)
            for s in (good, bad):
                s.linger = 0
            if mechanism == "CURVE":
                _curve_client(good, pki["certs"]["client"][1], pki["certs"]["server"][0])
                _curve_client(bad, pki["certs"]["stranger"][1], pki["certs"]["server"][0])
                reason = "unknown-key"
            else:
                good.plain_username, good.plain_password = b"alice", b"wonderland"
                bad.plain_username, bad.plain_password = b"alice", b"rabbit-hole"
                reason = "bad-password"
            before = _auth_failures(reason, mechanism)
            monitor = bad.get_monitor_socket()
            bad.connect(url)
            good.connect(url)

            async def serve(n: int) -> None:
                for _ in range(n):
                    await rep.send(b"re:" + await rep.recv())

            server = asyncio.create_task(serve(3))
            event, value = await _expect_refused(monitor)
            if mechanism == "CURVE":  # our ERROR "400" is libzmq's ZAP code: an auth failure
                assert (event, value) == (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)
            # libzmq 4.3.5's PLAIN client reports our (RFC 24) ERROR as an unexpected
            # command, a protocol failure; it is refused either way
            for i in range(3):  # the good client is served while the bad one is refused
                await good.send(b"q%d" % i)
                assert await asyncio.wait_for(good.recv(), 5) == b"re:q%d" % i
            await asyncio.wait_for(server, 5)
            assert _auth_failures(reason, mechanism) >= before + 1
            assert await bad.poll(300) == 0  # nothing ever reaches the refused client
            bad.disable_monitor()
            monitor.close()
            for s in (good, bad):
                s.close()
        finally:
            rep.close(0)
            ctx.term()

    run(main())


@pytest.mark.parametrize("mechanism", ["CURVE", "PLAIN"])
def test_native_client_to_libzmq_server_with_zap(pki: dict[str, Any], mechanism: str) -> None:
    """libzmq REP with its own ZAP (pyzmq's authenticator) serves the native REQ client; a
    native client with bad credentials is refused (ERROR from libzmq: peer-error)."""

    async def main() -> None:
        ctx = zmq.asyncio.Context()
        auth = AsyncioAuthenticator(ctx)
        auth.start()
        clients: list[gateway.Socket] = []
        try:
            rep = ctx.socket(zmq.REP)
            rep.linger = 0
            if mechanism == "CURVE":
                auth.configure_curve(domain="*", location=pki["allow"])
                public, secret = zmq.auth.load_certificate(pki["certs"]["server"][1])
                assert secret is not None
                rep.curve_publickey, rep.curve_secretkey, rep.curve_server = public, secret, True
            else:
                auth.configure_plain(domain="*", passwords={"alice": "wonderland"})
                rep.plain_server = True
            port = rep.bind_to_random_port("tcp://127.0.0.1")

            def client(good: bool) -> gateway.Socket:
                if mechanism == "CURVE":
                    who = "client" if good else "stranger"
                    cert = load_cert(pki["certs"][who][1], secret=True)
                    assert cert.secret is not None
                    sec = Security("CURVE", False, cert.public, cert.secret,
                                   load_cert(pki["certs"]["server"][0]).public)
                else:
                    sec = Security("PLAIN", False, username="alice",
                                   password="wonderland" if good else "nope")
                s = gateway.Socket("REQ", security=sec, linger=0, reconnect_ivl=5.0,
                                   reconnect_ivl_max=5.0)
                clients.append(s)
                s.connect(f"zmq+tcp://127.0.0.1:{port}")
                return s

            def closed() -> int:  # libzmq 4.3.5's ERROR after a ZAP denial is malformed
                return sum(METRICS.get("gateway_pipes_closed_total", reason=r)  # (see report)
                           for r in ("peer-error", "protocol-error"))

            refused = closed()
            bad = client(False)
            good = client(True)
            async with asyncio.timeout(10):
                while closed() == refused:
                    await asyncio.sleep(0.02)
            assert bad.peers == 0
            for i in range(3):
                await good.send(b"q%d" % i)
                assert await rep.recv() == b"q%d" % i
                await rep.send(b"re:q%d" % i)
                assert await asyncio.wait_for(good.recv(), 5) == b"re:q%d" % i
            rep.close()
        finally:
            for c in clients:
                c.close(0)
            auth.stop()
            ctx.term()

    run(main())


@pytest.mark.parametrize("mechanism", ["CURVE", "PLAIN"])
def test_native_server_to_native_client(pki: dict[str, Any], mechanism: str) -> None:
    """Both ends native: the mechanisms round-trip over TCP, multipart and large frames."""

    async def main() -> None:
        srv = _native_server("ROUTER", pki, mechanism)
        if mechanism == "CURVE":
            cert = load_cert(pki["certs"]["client"][1], secret=True)
            assert cert.secret is not None
            sec = Security("CURVE", False, cert.public, cert.secret,
                           load_cert(pki["certs"]["server"][0]).public)
        else:
            sec = Security("PLAIN", False, username="bob", password="builder")
        cli = gateway.Socket("DEALER", security=sec, linger=0)
        try:
            cli.connect(srv.bind("zmq+tcp://127.0.0.1:0"))
            big = os.urandom(300_000)
            await cli.send_multipart([b"a", b"", big])
            frames = await srv.recv_multipart()
            assert frames[1:] == [b"a", b"", big]
            await srv.send_multipart(frames)
            assert await cli.recv_multipart() == [b"a", b"", big]
        finally:
            cli.close(0)
            srv.close(0)

    run(main())
