"""The security and transport cells' material and settings (issue 11): CURVE and PLAIN on
ZeroMQ hops, TLS (``tls+tcp``) and WebSocket (``ws``, ``wss``) on SP hops.

A cell's shape names what its hops use (:data:`gateway.tools.matrix.cells.SECURITY`); this module
makes the keys and certificates once per process (CURVE certificates in pyzmq's ZPL format,
a ``user=password`` file, TLS certificates from :func:`gateway.tools.harness.certs.make_certs`) and
gives each peer its settings, by role:

* ``server``: a CURVE server that admits the known client key only (libzmq through pyzmq's
  ZAP authenticator, the native engine with ``curve_allow``), a PLAIN server with one user,
  a TLS server with its certificate;
* ``client``: the right credentials, or with ``bad`` the wrong ones: a CURVE key the server
  does not know, a wrong PLAIN password, a CA that did not sign the server's certificate.

The gateway gets the same as URL settings (``?curve_server=1&curve_cert=...``).
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.tools.harness.certs import make_certs

USER, PASSWORD = "matrix", "s3cret"
WS_PATH = "/matrix"


@dataclass(frozen=True)
class Material:
    root: Path

    @property
    def curve(self) -> Path:
        return self.root / "curve"

    def curve_secret(self, name: str) -> Path:
        return self.curve / f"{name}.key_secret"

    def curve_public(self, name: str) -> Path:
        return self.curve / f"{name}.key"

    @property
    def curve_allowed(self) -> Path:
        """A directory holding the one client public key the servers admit."""
        return self.root / "allowed"

    @property
    def passwords(self) -> Path:
        return self.root / "passwords"

    def password_file(self, bad: bool) -> Path:
        return self.root / ("wrong-password" if bad else "password")

    @property
    def tls(self) -> Path:
        return self.root / "tls"


_LOCK = threading.Lock()
_MATERIAL: list[Material] = []


def material() -> Material:
    """This process's keys and certificates (made on first use, in a private directory)."""
    with _LOCK:
        if not _MATERIAL:
            _MATERIAL.append(_make(Path(tempfile.mkdtemp(prefix="gwm-keys-", dir="/tmp"))))
        return _MATERIAL[0]


def _make(root: Path) -> Material:
    import zmq.auth

    m = Material(root)
    m.curve.mkdir()
    for name in ("server", "client", "stranger"):
        zmq.auth.create_certificates(str(m.curve), name)
    for secret in m.curve.glob("*.key_secret"):
        secret.chmod(0o600)  # the gateway refuses secrets others can read
    m.curve_allowed.mkdir()
    (m.curve_allowed / "client.key").write_bytes(m.curve_public("client").read_bytes())
    m.passwords.write_text(f"{USER}={PASSWORD}\n")
    m.passwords.chmod(0o600)
    for bad, text in ((False, PASSWORD), (True, "not-" + PASSWORD)):
        m.password_file(bad).write_text(text + "\n")
        m.password_file(bad).chmod(0o600)
    make_certs(m.tls)
    return m


def settings(mechanism: str, sp: str, wire: str, role: str, bad: bool = False) -> list[tuple[str, str]]:
    """The endpoint settings (``gateway.settings.schema`` names) of a ``role`` on a ``wire`` hop."""
    m = material()
    out: list[tuple[str, str]] = []
    if wire == "zmq" and mechanism == "CURVE":
        if role == "server":
            out += [("curve_server", "1"), ("curve_cert", str(m.curve_secret("server"))),
                    ("curve_allow", str(m.curve_allowed))]
        else:
            out += [("curve_cert", str(m.curve_secret("stranger" if bad else "client"))),
                    ("curve_server_cert", str(m.curve_public("server")))]
    elif wire == "zmq" and mechanism == "PLAIN":
        if role == "server":
            out += [("plain_server", "1"), ("plain_passwords", str(m.passwords))]
        else:
            out += [("plain_username", USER), ("plain_password_file", str(m.password_file(bad)))]
    elif wire == "sp" and sp in ("tls+tcp", "wss"):
        if role == "server":
            out += [("tls_cert", str(m.tls / "server.pem")), ("tls_key", str(m.tls / "server.key"))]
        else:
            out += [("tls_ca", str(m.tls / ("other-ca.pem" if bad else "ca.pem"))),
                    ("tls_server_name", "localhost")]
    return out


def query(pairs: list[tuple[str, str]]) -> str:
    return "".join(f"&{k}={v}" for k, v in pairs)


def native_options(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """``gateway.Socket`` keywords (``security=``, ``tls=``) for these settings."""
    from gateway.security import security_of
    from gateway.settings import schema as options
    from gateway.tls import tls_of

    if not pairs:
        return {}
    read = options.read(pairs, "matrix cell")
    family = "sp" if any(k.startswith("tls_") for k, _ in pairs) else "zmtp"
    if family == "sp":
        return {"tls": tls_of(read)}
    return {"security": security_of(read)}


def remote_options(mechanism: str, role: str, bad: bool,
                   m: Material | None = None) -> dict[str, Any]:
    """The ``open`` options of a peer process (``peers/peerd.py``) for CURVE or PLAIN, keys
    as Z85 text: a server admits the known client key (``zap_dir`` for a ZAP handler,
    ``allow`` for a library that admits by itself) or the one PLAIN user; a client presents its
    key or password (``bad``: a key the server does not know, a wrong password)."""
    import zmq.auth

    m = m or material()
    if mechanism == "CURVE":
        def pair(name: str) -> tuple[str, str]:
            public, secret = zmq.auth.load_certificate(str(m.curve_secret(name)))
            assert secret is not None
            return public.decode(), secret.decode()

        server_public, server_secret = pair("server")
        if role == "server":
            return {"curve": {"public": server_public, "secret": server_secret,
                              "allow": [pair("client")[0]]}, "zap_dir": str(m.curve_allowed)}
        public, secret = pair("stranger" if bad else "client")
        return {"curve": {"public": public, "secret": secret, "server": server_public}}
    if role == "server":
        return {"plain": {"users": {USER: PASSWORD}}}
    return {"plain": {"username": USER,
                      "password": m.password_file(bad).read_text().strip()}}


def configure_libzmq(sock: Any, ctx: Any, mechanism: str, role: str, bad: bool,
                     m: Material | None = None) -> Any:
    """Set CURVE or PLAIN on a pyzmq socket before it binds or connects; return the ZAP
    authenticator a server needs (stop it when done), or None. ``m``: the keys to use (default:
    this process's :func:`material`)."""
    import zmq
    import zmq.auth
    from zmq.auth.thread import ThreadAuthenticator

    m = m or material()
    if mechanism == "CURVE":
        if role == "server":
            public, secret = zmq.auth.load_certificate(str(m.curve_secret("server")))
            sock.curve_publickey, sock.curve_secretkey = public, secret
            sock.curve_server = True
        else:
            public, secret = zmq.auth.load_certificate(
                str(m.curve_secret("stranger" if bad else "client")))
            sock.curve_publickey, sock.curve_secretkey = public, secret
            sock.curve_serverkey = zmq.auth.load_certificate(str(m.curve_public("server")))[0]
    elif mechanism == "PLAIN":
        if role == "server":
            sock.plain_server = True
        else:
            sock.plain_username = USER.encode()
            sock.plain_password = m.password_file(bad).read_text().strip().encode()
    if role != "server":
        return None
    auth = ThreadAuthenticator(ctx)
    auth.start()
    if mechanism == "CURVE":
        auth.configure_curve(domain="*", location=str(m.curve_allowed))
    else:
        auth.configure_plain(domain="*", passwords={USER: PASSWORD})
    return auth


def nng_tls_config(role: str, bad: bool, m: Material | None = None) -> Any:
    """A pynng TLS configuration for a server or a client (``bad``: the wrong CA); ``m`` as for
    :func:`configure_libzmq`."""
    import pynng

    m = m or material()
    if role == "server":
        return pynng.TLSConfig(pynng.TLSConfig.MODE_SERVER,
                               own_cert_string=(m.tls / "server.pem").read_text(),
                               own_key_string=(m.tls / "server.key").read_text())
    ca = m.tls / ("other-ca.pem" if bad else "ca.pem")
    return pynng.TLSConfig(pynng.TLSConfig.MODE_CLIENT, ca_string=ca.read_text(),
                           server_name="localhost")


def sp_url(sp: str, host: str = "127.0.0.1", port: int = 0) -> str:
    """The library spelling of an SP hop's listening URL on ``sp`` (tls+tcp, ws, wss)."""
    if sp in ("ws", "wss"):
        return f"{sp}://{host}:{port}{WS_PATH}"
    return f"{sp}://{host}:{port}"


__all__ = ["Material", "configure_libzmq", "material", "native_options", "nng_tls_config",
           "query", "remote_options", "settings", "sp_url"]
