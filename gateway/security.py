"""ZeroMQ security settings: CURVE certificates, PLAIN passwords, and who may connect.

Keys are Z85 text (rfc.zeromq.org spec 32, 40 characters for 32 bytes) or CZMQ certificate
files (``zcert``: ``NAME.key`` holds the public key, ``NAME.key_secret`` both keys, in ZPL)::

    metadata
        name = "gateway"
    curve
        public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
        secret-key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"

so certificates made by CZMQ's ``zcert``/``zcert_save`` or pyzmq's
``zmq.auth.create_certificates`` load as they are. A secret file other users can read is
refused (as ssh refuses such a private key); secrets never reach logs or metrics. Secrets are
never written inline in TOML or URLs: settings name files.

Who may connect is the pluggy hook ``gateway_authenticate`` (firstresult, ZAP's role, RFC 27);
the built-in answer (:func:`builtin_authenticate`) follows CZMQ zauth: ``curve_allow=DIR``
allows every public key found in a ``*.key`` file there (:class:`AllowList`: loaded once,
looked at again at most once a second and re-parsed only where a file changed, as CZMQ's
zcertstore reloads on a change; a directory other users may write to is refused),
``plain_passwords=FILE`` holds ``user=password`` lines (mode 600, like every secret file).
A CURVE server without ``curve_allow`` lets in any client key (libzmq's CURVE without ZAP);
a PLAIN server without ``plain_passwords`` refuses everyone, as libzmq's PLAIN server does
without a ZAP handler, unless ``plain_allow_any=1`` says to take any user and password.
"""

from __future__ import annotations

import hmac
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.errors import ConfigError
from gateway.logging import Throttle, get_logger
from gateway.metrics import METRICS
from gateway.wire import z85
from gateway.wire.zmtp_curve import CurveClient, CurveServer, public_of
from gateway.wire.zmtp_mechanism import Authenticate, AuthResult, Mechanism
from gateway.wire.zmtp_plain import PlainClient, PlainServer

log = get_logger("gateway.security")

__all__ = [
    "AllowList",
    "Cert",
    "Security",
    "allowed_keys",
    "builtin_authenticate",
    "check_settings",
    "hook_authenticator",
    "load_cert",
    "read_passwords",
    "read_z85_key",
    "save_cert",
    "security_of",
]

SECURITY_FIELDS = ("curve_server", "curve_cert", "curve_serverkey", "curve_server_cert",
                   "curve_allow", "plain_server", "plain_passwords", "plain_allow_any",
                   "plain_username", "plain_password_file")
#: seconds between two looks at a ``curve_allow`` directory (CZMQ's zcertstore: on a change)
ALLOW_RECHECK = 1.0


# -- key text and files ------------------------------------------------------------------------
def read_z85_key(text: str, what: str = "CURVE key") -> bytes:
    """A 40-character Z85 key -> 32 bytes (ValueError naming ``what`` otherwise)."""
    text = text.strip()
    if len(text) != 40:
        raise ValueError(f"{what}: 40 Z85 characters, not {len(text)}")
    try:
        return z85.decode(text)
    except z85.Z85Error as exc:
        raise ValueError(f"{what}: {exc}") from None


def parse_zpl(text: str) -> dict[str, dict[str, str]]:
    """The two levels of ZPL (rfc.zeromq.org spec 4) a certificate uses: sections and their
    ``name = value`` children (values quoted or bare); comments start with ``#``."""
    out: dict[str, dict[str, str]] = {}
    section: dict[str, str] | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        name, eq, value = line.strip().partition("=")
        name, value = name.strip(), value.strip()
        if value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) >= 2:
            value = value[1:-1]
        elif "#" in value:
            value = value.split("#", 1)[0].strip()
        if indent == 0:
            section = out.setdefault(name, {})
        elif section is None:
            raise ValueError(f"line {lineno}: indented before any section")
        elif eq:
            section[name] = value
    return out


@dataclass(frozen=True, slots=True)
class Cert:
    """A CURVE certificate: the public key, the secret key when the file held it, metadata."""

    public: bytes
    secret: bytes | None
    metadata: Mapping[str, str]
    path: str


def _check_private(path: Path, what: str = "the secret key") -> None:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"permissions {stat.S_IMODE(mode):04o} for {str(path)!r} are too open: "
                         f"other users can read {what} (chmod 600 {path})")


def check_private_file(path: str | os.PathLike[str], what: str = "the secret in it") -> None:
    """A file holding a secret (a key, passwords) must be readable by its owner only, as ssh
    asks of a private key; ValueError naming the file otherwise."""
    try:
        _check_private(Path(path), what)
    except OSError as exc:
        raise ValueError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None


def check_allow_directory(path: str | os.PathLike[str]) -> None:
    """A ``curve_allow`` directory whose certificates decide who gets in: other users must not
    be able to add one (no group or world write bit); ValueError naming it otherwise."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ValueError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ValueError(f"permissions {stat.S_IMODE(mode):04o} for {str(path)!r} are too open: "
                         f"other users can add allowed keys (chmod go-w {path})")


def load_cert(path: str | os.PathLike[str], *, secret: bool = False) -> Cert:
    """Read a zcert file. ``secret=True``: the secret key is needed; ``PATH`` may name the
    ``.key_secret`` file or the public one next to it (CZMQ's ``zcert_load`` habit). Errors
    are ValueErrors naming the file."""
    p = Path(path)
    if secret and not p.name.endswith("_secret"):
        twin = p.with_name(p.name + "_secret")
        if twin.exists():
            p = twin
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read certificate {str(p)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"certificate {str(p)!r} is not UTF-8 text") from None
    try:
        zpl = parse_zpl(text)
    except ValueError as exc:
        raise ValueError(f"certificate {str(p)!r}: {exc}") from None
    curve = zpl.get("curve", {})
    if "public-key" not in curve:
        raise ValueError(f"certificate {str(p)!r} has no curve/public-key")
    public = read_z85_key(curve["public-key"], f"certificate {str(p)!r} public-key")
    secret_key = None
    if "secret-key" in curve:
        if secret:
            _check_private(p)
        secret_key = read_z85_key(curve["secret-key"], f"certificate {str(p)!r} secret-key")
        if public_of(secret_key) != public:
            raise ValueError(f"certificate {str(p)!r}: the secret key does not belong to the "
                             "public key")
    elif secret:
        raise ValueError(f"certificate {str(p)!r} has no secret key (give the .key_secret file)")
    return Cert(public, secret_key, dict(zpl.get("metadata", {})), str(p))


def save_cert(base: str | os.PathLike[str], public: bytes, secret: bytes,
              metadata: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Write ``BASE.key`` and ``BASE.key_secret`` (mode 0600) as CZMQ's zcert does."""
    meta = "".join(f'    {k} = "{v}"\n' for k, v in (metadata or {}).items())
    head = "#   ****  Generated by zmq-sp-gateway  ****\n#   ZeroMQ CURVE {} Certificate\n\n"
    pub = f"{base}.key"
    sec = f"{base}.key_secret"
    body = f'metadata\n{meta}curve\n    public-key = "{z85.encode(public)}"\n'
    Path(pub).write_text(head.format("Public") + body, encoding="utf-8")
    fd = os.open(sec, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT: not the secret's
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(head.format("**Secret**") + body + f'    secret-key = "{z85.encode(secret)}"\n')
    return pub, sec


def allowed_keys(directory: str | os.PathLike[str]) -> set[bytes]:
    """Every public key in the ``*.key`` certificates of ``directory`` (CZMQ zauth's
    ``configure_curve(location)``); unreadable or broken files are skipped with a warning."""
    return set(AllowList(str(directory)).keys())


class AllowList:
    """The public keys of a ``curve_allow`` directory, kept between handshakes.

    :meth:`keys` looks at the directory at most once every :data:`ALLOW_RECHECK` seconds (one
    ``scandir``: names, sizes, modification times) and parses only the certificates that
    changed, so a handshake with an unknown key costs a set lookup, not a re-read of every file
    (CZMQ's zcertstore reloads on a change). Broken files are skipped with one warning each
    time they change. Safe to share between the loop and the ZAP thread. A directory other
    users may write to (or that vanished) allows nobody until it is mended.
    """

    def __init__(self, directory: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self._clock = clock
        self._lock = threading.Lock()
        self._checked = -ALLOW_RECHECK
        self._files: dict[str, tuple[int, int, bytes | None]] = {}  # name -> (mtime, size, key)
        self._keys: frozenset[bytes] = frozenset()
        self.error = ""  # why nobody is allowed ("": the directory is fine)

    def keys(self) -> frozenset[bytes]:
        with self._lock:
            now = self._clock()
            if now - self._checked >= ALLOW_RECHECK:
                self._checked = now
                self._rescan()
            return self._keys

    def _rescan(self) -> None:
        try:
            check_allow_directory(self.directory)
            entries = [(e.name, e.stat()) for e in os.scandir(self.directory)
                       if e.name.endswith(".key") and e.is_file()]
        except (OSError, ValueError) as exc:
            if not self.error:
                log.error("auth.allow_dir_refused", path=self.directory, error=str(exc))
            self.error = str(exc)
            self._files, self._keys = {}, frozenset()
            return
        self.error = ""
        files: dict[str, tuple[int, int, bytes | None]] = {}
        changed = False
        for name, st in sorted(entries):
            old = self._files.get(name)
            if old is not None and old[:2] == (st.st_mtime_ns, st.st_size):
                files[name] = old
                continue
            changed = True
            try:
                key: bytes | None = load_cert(os.path.join(self.directory, name)).public
            except ValueError as exc:
                log.warning("auth.cert_skipped", path=os.path.join(self.directory, name),
                            error=str(exc))
                key = None
            files[name] = (st.st_mtime_ns, st.st_size, key)
        if changed or files.keys() != self._files.keys():
            self._keys = frozenset(k for _, _, k in files.values() if k is not None)
        self._files = files


_ALLOW_LISTS: dict[str, AllowList] = {}
_ALLOW_LOCK = threading.Lock()


def allow_list(directory: str) -> AllowList:
    """The one :class:`AllowList` of ``directory`` in this process."""
    with _ALLOW_LOCK:
        found = _ALLOW_LISTS.get(directory)
        if found is None:
            found = _ALLOW_LISTS[directory] = AllowList(directory)
        return found


def read_passwords(path: str | os.PathLike[str]) -> dict[str, str]:
    """``user=password`` lines (zauth's ``configure_plain``); ``#`` comments, blank lines.
    Clear-text passwords: the file must be readable by its owner only (mode 600)."""
    users: dict[str, str] = {}
    try:
        _check_private(Path(path), "the passwords")
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read password file {str(path)!r}: {exc.strerror or exc}") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        user, eq, password = line.partition("=")
        if not eq or not user.strip():
            raise ValueError(f"password file {str(path)!r} line {lineno}: expected user=password")
        users[user.strip()] = password.rstrip("\r\n")
    return users


def read_secret_file(path: str | os.PathLike[str]) -> str:
    """A one-line secret (PLAIN password); refused when other users can read it."""
    p = Path(path)
    try:
        _check_private(p)
        return p.read_text(encoding="utf-8").splitlines()[0] if p.stat().st_size else ""
    except OSError as exc:
        raise ValueError(f"cannot read {str(p)!r}: {exc.strerror or exc}") from None


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


def _get(settings: Mapping[str, Any] | Any, name: str) -> Any:
    if isinstance(settings, Mapping):
        return settings.get(name)
    return getattr(settings, name, None)


def check_settings(settings: Mapping[str, Any] | Any, family: str = "zmtp") -> list[str]:
    """Every mistake in combining the security settings (each file was checked when read)."""
    g = lambda name: _get(settings, name)  # noqa: E731
    errors: list[str] = []
    curve = [n for n in SECURITY_FIELDS if n.startswith("curve_") and g(n) not in (None, False)]
    plain = [n for n in SECURITY_FIELDS if n.startswith("plain_") and g(n) not in (None, False)]
    if (curve or plain) and family == "any":
        errors.append(f"{', '.join(curve + plain)}: ZeroMQ security would not cover the SP "
                      "clients of an any+ endpoint; bind a zmq+ endpoint with it beside an sp+ one")
        return errors
    if (curve or plain) and family != "zmtp":
        errors.append(f"{', '.join(curve + plain)}: ZeroMQ settings on an SP endpoint "
                      "(SP security is TLS)")
        return errors
    if curve and plain:
        errors.append(f"CURVE ({', '.join(curve)}) and PLAIN ({', '.join(plain)}) on one "
                      "endpoint: choose one mechanism")
        return errors
    if curve:
        if not g("curve_cert"):
            errors.append("CURVE needs curve_cert=PATH (this side's .key_secret certificate)")
        if g("curve_server"):
            extra = [n for n in ("curve_serverkey", "curve_server_cert") if g(n)]
            if extra:
                errors.append(f"{', '.join(extra)}: only for a CURVE client (curve_server=1 here)")
        else:
            if g("curve_allow"):
                errors.append("curve_allow: only for a CURVE server (add curve_server=1)")
            if bool(g("curve_serverkey")) == bool(g("curve_server_cert")):
                errors.append("a CURVE client needs one of curve_serverkey=Z85 or "
                              "curve_server_cert=PATH")
    if plain:
        if g("plain_server"):
            extra = [n for n in ("plain_username", "plain_password_file") if g(n)]
            if extra:
                errors.append(f"{', '.join(extra)}: only for a PLAIN client (plain_server=1 here)")
            if g("plain_passwords") and g("plain_allow_any"):
                errors.append("plain_passwords and plain_allow_any: choose one (a user list, or "
                              "any user and password)")
            elif not g("plain_passwords") and not g("plain_allow_any"):
                errors.append("plain_server=1 needs plain_passwords=FILE (user=password lines, "
                              "mode 600); without it every client is refused, as libzmq's PLAIN "
                              "server without ZAP does (plain_allow_any=1 takes any user and "
                              "password; a gateway_authenticate plugin still decides first)")
        else:
            for name in ("plain_passwords", "plain_allow_any"):
                if g(name):
                    errors.append(f"{name}: only for a PLAIN server (add plain_server=1)")
            if g("plain_username") is None or not g("plain_password_file"):
                errors.append("a PLAIN client needs plain_username and plain_password_file=PATH")
    return errors


def security_of(settings: Mapping[str, Any] | Any, family: str = "zmtp") -> Security | None:
    """The side's :class:`Security` (None: NULL); ConfigError with every mistake at once."""
    errors = check_settings(settings, family)
    if errors:
        raise ConfigError("\n".join(errors))
    g = lambda name: _get(settings, name)  # noqa: E731
    try:
        if g("curve_cert"):
            cert = load_cert(g("curve_cert"), secret=True)
            assert cert.secret is not None
            if g("curve_server"):
                if g("curve_allow"):
                    allow_list(g("curve_allow")).keys()  # loaded now, not at the first client
                return Security("CURVE", True, cert.public, cert.secret,
                                curve_allow=g("curve_allow"))
            server_key = (read_z85_key(g("curve_serverkey"), "curve_serverkey")
                          if g("curve_serverkey") else load_cert(g("curve_server_cert")).public)
            return Security("CURVE", False, cert.public, cert.secret, server_key)
        if g("plain_server"):
            if g("plain_passwords"):
                read_passwords(g("plain_passwords"))
            return Security("PLAIN", True, plain_passwords=g("plain_passwords"),
                            plain_allow_any=bool(g("plain_allow_any")))
        if g("plain_username") is not None:
            return Security("PLAIN", False, username=g("plain_username"),
                            password=read_secret_file(g("plain_password_file")))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return None


# -- authentication ---------------------------------------------------------------------------------
def builtin_authenticate(mechanism: str, credentials: Mapping[str, str],
                         policy: Security) -> AuthResult | None:
    """CZMQ zauth's habits: a directory of allowed client certificates, a password file.
    None when the side has no such policy: a CURVE server then takes any client key (libzmq
    without ZAP); a PLAIN server refuses everyone unless ``plain_allow_any`` (libzmq's PLAIN
    server without ZAP refuses, ``plain_server.cpp``)."""
    if mechanism == "CURVE" and policy.curve_allow:
        key = credentials.get("client_key", "")
        allowed = allow_list(policy.curve_allow)
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
            users = read_passwords(policy.plain_passwords)
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
