"""ZeroMQ security of one endpoint: what it uses (:class:`Security`, loaded once per start or
reload by :func:`security_of` from the files its settings name) and who may connect.

Who may connect is the pluggy hook ``gateway_authenticate`` (firstresult, ZAP's role, RFC 27);
the built-in answer (:func:`builtin_authenticate`) follows CZMQ zauth: ``curve_allow=DIR``
allows every public key found in a ``*.key`` file there (:class:`~gateway.settings.files.AllowList`:
loaded once, looked at again at most once a second and re-parsed only where a file changed, as
CZMQ's zcertstore reloads on a change; a directory other users may write to is refused),
``plain_passwords=FILE`` holds ``user=password`` lines (mode 600, like every secret file).
A CURVE server without ``curve_allow`` lets in any client key (libzmq's CURVE without ZAP);
a PLAIN server without ``plain_passwords`` refuses everyone, as libzmq's PLAIN server does
without a ZAP handler, unless ``plain_allow_any=1`` says to take any user and password.
Secrets never reach logs or metrics; settings name files, never secrets.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from gateway.errors import ConfigError
from gateway.logging import Throttle, get_logger
from gateway.metrics import METRICS
from gateway.settings import files
from gateway.settings.checks import family_rules, mechanism_rules
from gateway.wire import z85
from gateway.wire.zmtp_curve import CurveClient, CurveServer
from gateway.wire.zmtp_mechanism import Authenticate, AuthResult, Mechanism
from gateway.wire.zmtp_plain import PlainClient, PlainServer

T = TypeVar("T")

log = get_logger("gateway.security")

__all__ = ["Security", "builtin_authenticate", "hook_authenticator", "security_of"]


# -- one side's settings ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Security:
    """What one ZeroMQ side uses: ``mechanism`` PLAIN or CURVE, the role and the material.

    ``repr`` shows no secret."""

    mechanism: str
    as_server: bool
    public: bytes = b""
    secret: bytes = b""
    server_key: bytes = b""
    username: str = ""
    password: str = ""
    curve_allow: str | None = None
    plain_passwords: str | None = None
    #: a PLAIN server without ``plain_passwords`` takes any user (else it refuses everyone)
    plain_allow_any: bool = False

    def __repr__(self) -> str:
        role = "server" if self.as_server else "client"
        return f"Security({self.mechanism} {role})"

    def mechanism_for(self, authenticate: Authenticate) -> Mechanism:
        """A fresh mechanism for one connection."""
        if self.mechanism == "CURVE":
            if self.as_server:
                return CurveServer(self.public, self.secret, authenticate)
            return CurveClient(self.public, self.secret, self.server_key)
        if self.as_server:
            return PlainServer(authenticate)
        return PlainClient(self.username.encode(), self.password.encode())


def security_of(settings: Mapping[str, Any] | Any, family: str = "zmtp") -> Security | None:
    """The endpoint's :class:`Security` (None: NULL) from its settings (a mapping or a
    SideOptions), its files read now, once; :class:`ConfigError` with every mistake at once
    (the combination first, then what the files say, each naming its file)."""
    get = settings.get if isinstance(settings, Mapping) else (
        lambda name: getattr(settings, name, None))
    given = {name: get(name) for name in ("curve_server", "curve_cert", "curve_serverkey",
                                          "curve_server_cert", "curve_allow", "plain_server",
                                          "plain_passwords", "plain_allow_any",
                                          "plain_username", "plain_password_file")}
    errors = family_rules(given, family)
    if not errors and family == "zmtp":
        errors = mechanism_rules(given)
    if errors:
        raise ConfigError("\n".join(errors))
    def g(name: str) -> Any:
        return given.get(name)

    def read(name: str, load: Callable[[], T]) -> T | None:
        """What ``load`` reads from the file ``name`` names; its mistake kept, named."""
        try:
            return load()
        except ValueError as exc:  # (files' errors name the file; OSErrors are turned)
            text = str(exc)
            errors.append(text if text.startswith(f"{name}:") else f"{name}: {text}")
            return None

    made: Security | None = None
    if g("curve_cert"):
        cert = read("curve_cert", lambda: files.load_cert(g("curve_cert"), secret=True))
        if g("curve_server"):
            if g("curve_allow"):
                read("curve_allow", lambda: _allow_directory(g("curve_allow")))
            if cert is not None and cert.secret is not None:
                made = Security("CURVE", True, cert.public, cert.secret,
                                curve_allow=g("curve_allow"))
        else:
            server_key = (read("curve_serverkey", lambda: files.read_z85_key(
                              g("curve_serverkey"), "curve_serverkey"))
                          if g("curve_serverkey") else
                          read("curve_server_cert",
                               lambda: files.load_cert(g("curve_server_cert")).public))
            if cert is not None and cert.secret is not None and server_key is not None:
                made = Security("CURVE", False, cert.public, cert.secret, server_key)
    elif g("plain_server"):
        if g("plain_passwords"):
            read("plain_passwords", lambda: files.read_passwords(g("plain_passwords")))
        made = Security("PLAIN", True, plain_passwords=g("plain_passwords"),
                        plain_allow_any=bool(g("plain_allow_any")))
    elif g("plain_username") is not None:
        password = read("plain_password_file",
                        lambda: files.read_secret_file(g("plain_password_file")))
        if password is not None:
            made = Security("PLAIN", False, username=g("plain_username"), password=password)
    if errors:
        raise ConfigError("\n".join(errors))
    return made


def _allow_directory(path: str) -> None:
    """A ``curve_allow`` directory checked and its certificates loaded now (not at the first
    client); ValueError when it cannot be listed (it would allow nobody)."""
    files.check_allow_directory(path)
    allowed = files.allow_list(path)
    allowed.keys()
    if allowed.error:
        raise ValueError(allowed.error)


# -- authentication ---------------------------------------------------------------------------------
def builtin_authenticate(mechanism: str, credentials: Mapping[str, str],
                         policy: Security) -> AuthResult | None:
    """CZMQ zauth's habits: a directory of allowed client certificates, a password file.
    None when the side has no such policy: a CURVE server then takes any client key (libzmq
    without ZAP); a PLAIN server refuses everyone unless ``plain_allow_any`` (libzmq's PLAIN
    server without ZAP refuses, ``plain_server.cpp``)."""
    if mechanism == "CURVE" and policy.curve_allow:
        key = credentials.get("client_key", "")
        allowed = files.allow_list(policy.curve_allow)
        try:
            known = z85.decode(key) in allowed.keys()
        except z85.Z85Error:
            known = False
        if allowed.error:
            return AuthResult(False, "allow-dir-unreadable")
        if known:
            return AuthResult(True, "allowed", user_id=key)
        return AuthResult(False, "unknown-key")
    if mechanism == "PLAIN" and not policy.plain_passwords:
        if policy.plain_allow_any:
            return None
        return AuthResult(False, "no-user-list")
    if mechanism == "PLAIN" and policy.plain_passwords:
        try:
            users = files.read_passwords(policy.plain_passwords)
        except ValueError:
            return AuthResult(False, "password-file-unreadable")
        user = credentials.get("username", "")
        expected = users.get(user)
        if expected is None:
            hmac.compare_digest(b"x", b"y")  # about the same time either way
            return AuthResult(False, "unknown-user")
        if not hmac.compare_digest(expected.encode(), credentials.get("password", "").encode()):
            return AuthResult(False, "bad-password")
        return AuthResult(True, "allowed", user_id=user)
    return None


#: ``auth.denied`` lines: one per socket, mechanism and reason every 10 s (a refused client
#: that redials at once must not flood the log); the counter is exact
_DENIED = Throttle(10.0, 64)
_DENIED_LOCK = threading.Lock()  # the native loop and the pyzmq ZAP thread share it


def hook_authenticator(policy: Security, socket: str,
                       address: Callable[[], str]) -> Authenticate:
    """The ``authenticate`` callable a server mechanism gets: asks ``gateway_authenticate``
    (plugins first, the built-in last); counts and logs a refusal. It never raises and fails
    closed: a plugin that raises or answers something other than an ``AuthResult`` refuses the
    peer (``authenticator-error``), and a log line that cannot be written changes nothing."""

    def authenticate(mechanism: str, credentials: Mapping[str, str]) -> AuthResult:
        peer = ""
        try:
            from gateway.plugins import manager  # the registry loads the engine's plugins

            peer = address()
            verdict = manager().hook.gateway_authenticate(
                mechanism=mechanism, address=peer, socket=socket,
                credentials=dict(credentials), policy=policy)
            if verdict is None:
                verdict = AuthResult(True, "no-policy")
            elif not isinstance(verdict, AuthResult) or not isinstance(verdict.allowed, bool):
                raise TypeError(f"gateway_authenticate returned {type(verdict).__name__}, "
                                "not an AuthResult")
        except Exception as exc:  # a plugin's bug must not let a peer in
            verdict = AuthResult(False, "authenticator-error")
            _log_safely("error", "auth.hook_failed", socket=socket, mechanism=mechanism,
                        error=repr(exc)[:200])
        if not verdict.allowed:
            reason = verdict.reason or "denied"
            METRICS.inc("gateway_auth_failures_total", socket=socket, mechanism=mechanism,
                        reason=reason)
            with _DENIED_LOCK:
                held = _DENIED((socket, mechanism, reason))
            if held is not None:
                who = {"username": str(credentials.get("username", ""))[:64]} \
                    if mechanism == "PLAIN" else {"client_key": credentials.get("client_key")}
                _log_safely("warning", "auth.denied", socket=socket, mechanism=mechanism,
                            peer=peer, reason=reason, **who,
                            **({"suppressed": held} if held else {}))
        return verdict

    return authenticate


def _log_safely(level: str, event: str, **fields: Any) -> None:
    """A log line that must not change a verdict (stderr gone, a broken renderer)."""
    try:
        getattr(log, level)(event, **fields)
    except Exception:  # noqa: BLE001 - the verdict stands whatever the log does
        pass
