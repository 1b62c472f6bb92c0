"""ZeroMQ CURVE and PLAIN through the real ``gateway bridge`` with real peers (issue 11).

libzmq CURVE/PLAIN client -> gateway (CURVE/PLAIN front) -> nng REP, and nng REQ -> gateway
-> libzmq CURVE/PLAIN REP server, with the native engine and with ``?backend=pyzmq`` on the
ZeroMQ side. Certificates are made by the test with pyzmq's ``zmq.auth.create_certificates``
(libzmq's own format); the gateway reads them through ``curve_cert=PATH`` and friends. On the
front, a client with an unknown key or a wrong password is refused (log line with the reason,
``gateway_auth_failures_total``) while a good client keeps working. SP stays plain TCP here
(SP over TLS is the other helper's; the lead combines them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import zmq
import zmq.auth

from gateway.tools.harness.gateway import Gateway, bridge_args
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, nng_req, zmq_client
from gateway.tools.harness.procs import ANY, LOCAL, lib_url
from interop_tests.helpers import auth_files

pytestmark = pytest.mark.timeout(60)
BACKENDS = ["native", "pyzmq"]


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Any]:
    certs = {}
    for name in ("server", "client", "stranger"):
        pub, sec = zmq.auth.create_certificates(str(tmp_path), name)
        os.chmod(sec, 0o600)
        certs[name] = {"pub": pub, "sec": sec, "keys": zmq.auth.load_certificate(sec)}
    return {"certs": certs, **auth_files(tmp_path, certs["client"]["pub"], "alice=wonderland\n")}


def _q(**settings: str) -> str:
    return "&".join(f"{k}={quote(v, safe='/')}" for k, v in settings.items())


def _front_security(mechanism: str, pki: dict[str, Any]) -> str:
    if mechanism == "CURVE":
        return _q(curve_server="1", curve_cert=pki["certs"]["server"]["sec"],
                  curve_allow=pki["allow"])
    return _q(plain_server="1", plain_passwords=pki["passwords"])


def _client_options(mechanism: str, pki: dict[str, Any], good: bool) -> dict[str, Any]:
    if mechanism == "CURVE":
        public, secret = pki["certs"]["client" if good else "stranger"]["keys"]
        return {"curve_publickey": public, "curve_secretkey": secret,
                "curve_serverkey": pki["certs"]["server"]["keys"][0]}
    return {"plain_username": b"alice",
            "plain_password": b"wonderland" if good else b"looking-glass"}


def _auth_failures(gw: Gateway, mechanism: str, reason: str) -> float:
    return sum(v for (name, labels), v in gw.metrics().items()
               if name == "gateway_auth_failures_total"
               and ("mechanism", mechanism) in labels and ("reason", reason) in labels)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mechanism", ["CURVE", "PLAIN"])
def test_secure_zmq_client_to_nng_rep_and_refusals(pki: dict[str, Any], mechanism: str,
                                                   backend: str) -> None:
    front = f"@zmq+tcp://{ANY}?backend={backend}&{_front_security(mechanism, pki)}"
    reason = "unknown-key" if mechanism == "CURVE" else "bad-password"
    with NngServer() as server, Gateway(
            *bridge_args(front, f"sp+tcp://{LOCAL}:{server.port}?backend=native"),
            metrics=True) as gw:
        url = lib_url(gw.front)
        with zmq_client("REQ", url, 1000, **_client_options(mechanism, pki, False)) as bad, \
                zmq_client("REQ", url, **_client_options(mechanism, pki, True)) as good:
            try:
                bad.send(b"let me in")
                sent = True
            except zmq.Again:  # refused before it could queue it (its pipe ends with the
                sent = False  # failed handshake, and a REQ with no pipe waits to send)
            for i in range(3):
                good.send(b"hello %d" % i)
                assert good.recv() == b"re:hello %d" % i
            if sent:  # (a REQ whose send failed has nothing to receive: EFSM, not EAGAIN)
                with pytest.raises(zmq.Again):  # the refused client is never served
                    bad.recv()
        event = gw.wait_event("auth.denied", timeout=10, reason=reason)
        assert event["mechanism"] == mechanism
        assert "wonderland" not in gw.stderr and "looking-glass" not in gw.stderr
        assert _auth_failures(gw, mechanism, reason) >= 1
        assert server.received == [b"hello 0", b"hello 1", b"hello 2"]
        # one warning per refused client: auth.denied, not a handshake.failed as well (the
        # handshake failure is still counted, reason "auth")
        if backend == "native":  # (pyzmq's asyncio front has no monitor to count it)
            gw.wait_metric("gateway_handshake_failures_total", 1, reason="auth")
        warnings = [e for e in gw.events() if e.get("level") == "warning"
                    and e["event"] in ("auth.denied", "handshake.failed")]
        assert [e["event"] for e in warnings] == ["auth.denied"], warnings


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mechanism", ["CURVE", "PLAIN"])
def test_nng_req_to_secure_zmq_rep_server(pki: dict[str, Any], mechanism: str,
                                          backend: str) -> None:
    if mechanism == "CURVE":
        public, secret = pki["certs"]["server"]["keys"]
        server_opts: dict[str, Any] = {"curve_server": 1, "curve_publickey": public,
                                       "curve_secretkey": secret}
        passwords = None
        client = _q(curve_cert=pki["certs"]["client"]["sec"],
                    curve_server_cert=pki["certs"]["server"]["pub"])
    else:
        server_opts = {"plain_server": 1}  # libzmq's PLAIN server needs a ZAP handler
        passwords = {"alice": "wonderland"}
        client = _q(plain_username="alice", plain_password_file=pki["alice_pw"])
    with ZmqServer("REP", options=server_opts, plain_passwords=passwords) as server, Gateway(
            *bridge_args(f"@sp+tcp://{ANY}?backend=native",
                         f"zmq+tcp://{LOCAL}:{server.port}?backend={backend}&{client}")) as gw:
        with nng_req(lib_url(gw.front)) as req:
            for i in range(3):
                req.send(b"ask %d" % i)
                assert req.recv() == b"re:ask %d" % i
        assert [f[-1] for f in server.received] == [b"ask 0", b"ask 1", b"ask 2"]


def test_inline_secret_and_bad_cert_are_config_errors(pki: dict[str, Any], tmp_path: Path) -> None:
    """Every mistake at once, naming the file; an inline secret is refused, never echoed."""
    from gateway.tools.harness.procs import run_cli

    loose = tmp_path / "loose.key_secret"
    loose.write_text(Path(pki["certs"]["server"]["sec"]).read_text())
    os.chmod(loose, 0o644)
    secret_z85 = pki["certs"]["server"]["keys"][1].decode()
    config = tmp_path / "gw.toml"
    config.write_text(
        '[[bridge]]\nname = "secure"\nfront = "@zmq+tcp://127.0.0.1:0"\n'
        'back = ">sp+tcp://127.0.0.1:1"\n'
        f'front_options = {{ curve_server = true, curve_cert = "{loose}", '
        f'curve_secretkey = {json.dumps(secret_z85)} }}\n')
    done = run_cli("check", str(config))
    assert done.returncode == 2
    assert "too open" in done.stderr and str(loose) in done.stderr
    assert "curve_secretkey" in done.stderr and "secure" in done.stderr
    assert secret_z85 not in done.stderr + done.stdout


# -- issue 20 ----------------------------------------------------------------------------------
def _answering(answer: object) -> object:
    """A gateway_authenticate plugin that answers ``answer`` whatever it is asked (an instance
    of a class, as pluggy's plugins are: hashable, so the registry can be collected with it)."""
    from gateway.hookspecs import hookimpl

    class Answering:
        @hookimpl
        def gateway_authenticate(self, mechanism: str, address: str, socket: str,
                                 credentials: dict[str, str], policy: object) -> object:
            return answer

    return Answering()


class _BrokenLog:
    """A logger whose every line fails (stderr gone)."""

    def __getattr__(self, name: str) -> object:
        def fail(*args: object, **kwargs: object) -> None:
            raise OSError("stderr is gone")
        return fail


@pytest.mark.parametrize("fault", ["plugin-answers-garbage", "log-line-fails"])
def test_pyzmq_zap_handler_survives_and_fails_closed(pki: dict[str, Any], fault: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 1 (high): on 49db3ab the first denied client killed the pyzmq backend's ZAP
    thread (a plugin answering something that is not an AuthResult, or the auth.denied line
    failing), and libzmq's CURVE server then let every client in. Now the thread answers 500
    and goes on, and ZAP_ENFORCE_DOMAIN refuses everyone should it ever be gone: a stranger's
    request never reaches the server, a good client keeps working."""
    import asyncio

    import zmq.asyncio
    from gateway_plugins.pyzmq_adapter import zap

    from gateway import security
    from gateway.device import Bridge
    from gateway.plugins import manager

    pm = manager()
    if fault == "plugin-answers-garbage":
        pm.register(_answering("allowed!"), name="garbage-auth")
    else:
        monkeypatch.setattr(security, "log", _BrokenLog())
        monkeypatch.setattr(security, "_DENIED", security.Throttle(10.0, 64))
        monkeypatch.setattr(zap, "log", _BrokenLog())
    front = (f"@zmq+tcp://{LOCAL}:0?backend=pyzmq&"
             + _front_security("CURVE", pki))

    async def ask(ctx: zmq.asyncio.Context, url: str, good: bool, body: bytes) -> bytes | None:
        sock = ctx.socket(zmq.REQ)
        sock.linger = 0
        for name, value in _client_options("CURVE", pki, good).items():
            sock.setsockopt(getattr(zmq, name.upper()), value)
        sock.connect(url)
        try:  # a refused client's send may never return: once its handshake has failed,
            # libzmq ends the connection's pipe, and a REQ with no pipe waits to send
            await asyncio.wait_for(sock.send(body), 2.0)
            return bytes(await asyncio.wait_for(sock.recv(), 2.0))
        except TimeoutError:
            return None
        finally:
            sock.close(0)

    async def main(server: NngServer) -> None:
        ready = asyncio.Event()
        stop = asyncio.Event()
        bridge = Bridge(front, f">sp+tcp://{LOCAL}:{server.port}", name="zap-test",
                        on_ready=lambda b: ready.set())
        task = asyncio.create_task(bridge.run(stop))
        ctx = zmq.asyncio.Context()
        try:
            await asyncio.wait_for(ready.wait(), 10)
            url = lib_url(bridge.front_url)
            assert await ask(ctx, url, False, b"stranger 1") is None  # the first refusal
            if fault == "plugin-answers-garbage":
                pm.unregister(name="garbage-auth")  # the built-in answers from now on
            assert await ask(ctx, url, False, b"stranger 2") is None  # 49db3ab: served
            if fault == "log-line-fails":
                monkeypatch.undo()
            assert await ask(ctx, url, True, b"friend") == b"re:friend"
            assert all(t.is_alive() for t in zap._handlers.values())
        finally:
            stop.set()
            await asyncio.gather(asyncio.wait_for(task, 10), return_exceptions=True)
            ctx.term()

    try:
        with NngServer() as server:
            asyncio.run(main(server))
            assert server.received == [b"friend"]
    finally:
        if pm.has_plugin("garbage-auth"):
            pm.unregister(name="garbage-auth")


def test_router_handover_is_off_on_a_front_so_no_client_takes_anothers_replies() -> None:
    """Finding 7: bridge fronts turned ROUTER_HANDOVER on; a later client presenting a
    connected client's routing id took it and received the reply to the victim's request in
    flight. Off by default now (libzmq's default): the impostor is refused
    (duplicate-identity), the victim gets its reply."""
    import threading

    answered = threading.Event()

    def slow(body: bytes) -> bytes:
        answered.wait(5)
        return b"re:" + body

    with NngServer(slow) as server, Gateway(
            *bridge_args(f"@zmq+tcp://{ANY}", f"sp+tcp://{LOCAL}:{server.port}"),
            metrics=True) as gw:
        url = lib_url(gw.front)
        with zmq_client("DEALER", url, 5000, routing_id=b"victim") as victim:
            victim.send_multipart([b"", b"secret question"])
            server.wait_received(1)
            with zmq_client("DEALER", url, 800, routing_id=b"victim") as impostor:
                impostor.send_multipart([b"", b"me too"])
                gw.wait_event("handshake.failed", timeout=10, reason="duplicate-identity")
                answered.set()
                assert victim.recv_multipart() == [b"", b"re:secret question"]
                with pytest.raises(zmq.Again):
                    impostor.recv_multipart()
        assert gw.metric("gateway_handshake_failures_total", reason="duplicate-identity") >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_plain_server_without_a_user_list(pki: dict[str, Any], backend: str) -> None:
    """Finding 2: ``plain_server=1`` without ``plain_passwords`` let any user in on both
    backends; now the CLI refuses it (exit 2, saying what to add), and ``plain_allow_any=1``
    takes any user and password when that is what is wanted."""
    from gateway.tools.harness.procs import run_cli

    done = run_cli("bridge", f"@zmq+tcp://{LOCAL}:0?backend={backend}&plain_server=1",
                   f">sp+tcp://{LOCAL}:1")
    assert done.returncode == 2 and "plain_passwords=FILE" in done.stderr
    assert "plain_allow_any=1" in done.stderr and "Traceback" not in done.stderr
    with NngServer() as server, Gateway(*bridge_args(
            f"@zmq+tcp://{ANY}?backend={backend}&plain_server=1&plain_allow_any=1",
            f"sp+tcp://{LOCAL}:{server.port}")) as gw:
        with zmq_client("REQ", lib_url(gw.front), plain_username=b"anyone",
                        plain_password=b"anything") as req:
            req.send(b"hi")
            assert req.recv() == b"re:hi"
