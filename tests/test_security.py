"""Certificates (CZMQ zcert, pyzmq's files), password files, the security settings and the
built-in authenticator (CZMQ zauth's habits)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import zmq.auth

from gateway import options
from gateway.errors import ConfigError
from gateway.security import (
    Security,
    allowed_keys,
    builtin_authenticate,
    check_settings,
    load_cert,
    read_passwords,
    save_cert,
    security_of,
)
from gateway.wire import z85
from gateway.wire.zmtp_curve import keypair

# A certificate as CZMQ's zcert_save_secret writes it (ZPL, quoted values, a banner).
CZMQ_SECRET = '''#   ****  Generated on 2024-01-01 00:00:00 by CZMQ  ****
#   ZeroMQ CURVE **Secret** Certificate
#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.

metadata
    name = "gateway test"
curve
    public-key = "{public}"
    secret-key = "{secret}"
'''


def _czmq(tmp: Path, name: str = "czmq") -> tuple[Path, bytes, bytes]:
    public, secret = keypair()
    path = tmp / f"{name}.key_secret"
    path.write_text(CZMQ_SECRET.format(public=z85.encode(public), secret=z85.encode(secret)))
    os.chmod(path, 0o600)
    (tmp / f"{name}.key").write_text(CZMQ_SECRET.format(
        public=z85.encode(public), secret="").replace('    secret-key = ""\n', ""))
    return path, public, secret


def test_czmq_certificate_loads(tmp_path: Path) -> None:
    path, public, secret = _czmq(tmp_path)
    cert = load_cert(path, secret=True)
    assert (cert.public, cert.secret) == (public, secret)
    assert cert.metadata == {"name": "gateway test"}
    # the public twin, or the base name with _secret beside it (zcert_load's habit)
    assert load_cert(tmp_path / "czmq.key").public == public
    assert load_cert(tmp_path / "czmq.key", secret=True).secret == secret


def test_pyzmq_certificates_load_and_agree_with_pyzmq(tmp_path: Path) -> None:
    pub, sec = zmq.auth.create_certificates(str(tmp_path), "py")
    os.chmod(sec, 0o600)
    zpub, zsec = zmq.auth.load_certificate(sec)
    cert = load_cert(sec, secret=True)
    assert z85.encode(cert.public).encode() == zpub and cert.secret is not None
    assert z85.encode(cert.secret).encode() == zsec
    ours_pub, ours_sec = save_cert(tmp_path / "ours", cert.public, cert.secret, {"name": "x"})
    assert zmq.auth.load_certificate(ours_sec) == (zpub, zsec)  # pyzmq reads ours too
    assert oct(os.stat(ours_sec).st_mode & 0o777) == "0o600"


def test_secret_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path, _, secret = _czmq(tmp_path)
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="too open") as info:
        load_cert(path, secret=True)
    assert z85.encode(secret) not in str(info.value)


@pytest.mark.parametrize(("text", "match"), [
    ("curve\n    secret-key = \"x\"\n", "no curve/public-key"),
    ("curve\n    public-key = \"short\"\n", "40 Z85 characters"),
])
def test_broken_certificates_name_the_file(tmp_path: Path, text: str, match: str) -> None:
    p = tmp_path / "bad.key"
    p.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        load_cert(p)
    assert str(p) in str(info.value)


def test_missing_certificate_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read certificate") as info:
        load_cert(tmp_path / "none.key_secret", secret=True)
    assert "none.key_secret" in str(info.value)


def test_allowed_keys_from_a_directory(tmp_path: Path) -> None:
    _, a, _ = _czmq(tmp_path, "a")
    _, b, _ = _czmq(tmp_path, "b")
    (tmp_path / "junk.key").write_text("not a cert\n")
    assert allowed_keys(tmp_path) == {a, b}


def test_password_file(tmp_path: Path) -> None:
    p = tmp_path / "pw"
    p.write_text("# users\nalice=wonder=land\n\nbob=\n")
    p.chmod(0o600)
    assert read_passwords(p) == {"alice": "wonder=land", "bob": ""}
    p.write_text("no equals sign\n")
    with pytest.raises(ValueError, match="line 1"):
        read_passwords(p)


def test_password_file_is_a_secret_file(tmp_path: Path) -> None:
    """Clear-text passwords: refused when other users can read them, as the client's
    password file and every key are (issue 20, finding 11)."""
    p = tmp_path / "pw"
    p.write_text("alice=secret\n")
    p.chmod(0o644)
    with pytest.raises(ValueError, match="too open.*chmod 600"):
        read_passwords(p)


def test_builtin_authenticator(tmp_path: Path) -> None:
    _, allowed, _ = _czmq(tmp_path, "client")
    stranger, _ = keypair()
    pw = tmp_path / "pw"
    pw.write_text("alice=secret\n")
    pw.chmod(0o600)
    curve = Security("CURVE", True, curve_allow=str(tmp_path))
    plain = Security("PLAIN", True, plain_passwords=str(pw))
    ok = builtin_authenticate("CURVE", {"client_key": z85.encode(allowed)}, curve)
    assert ok is not None and ok.allowed
    no = builtin_authenticate("CURVE", {"client_key": z85.encode(stranger)}, curve)
    assert no is not None and (no.allowed, no.reason) == (False, "unknown-key")
    cases = [({"username": "alice", "password": "secret"}, (True, "allowed")),
             ({"username": "alice", "password": "guess"}, (False, "bad-password")),
             ({"username": "mallory", "password": "secret"}, (False, "unknown-user"))]
    for creds, want in cases:
        got = builtin_authenticate("PLAIN", creds, plain)
        assert got is not None and (got.allowed, got.reason) == want
    # a PLAIN server without a user list refuses everyone, as libzmq's without ZAP (finding 2)
    none = builtin_authenticate("PLAIN", {"username": "x", "password": "y"},
                                Security("PLAIN", True))
    assert none is not None and (none.allowed, none.reason) == (False, "no-user-list")
    assert builtin_authenticate("PLAIN", {}, Security("PLAIN", True, plain_allow_any=True)) \
        is None  # asked for: any user


def test_settings_every_mistake_at_once() -> None:
    assert check_settings({"curve_server": True, "plain_server": True})[0].startswith(
        "CURVE (curve_server) and PLAIN (plain_server)")
    errors = check_settings({"curve_cert": "x", "curve_allow": "d"})
    assert errors == ["curve_allow: only for a CURVE server (add curve_server=1)",
                      "a CURVE client needs one of curve_serverkey=Z85 or curve_server_cert=PATH"]
    assert check_settings({"plain_username": "u"}) == [
        "a PLAIN client needs plain_username and plain_password_file=PATH"]
    assert "SP endpoint" in check_settings({"curve_server": True}, "sp")[0]
    with pytest.raises(ConfigError, match="CURVE needs curve_cert"):
        security_of({"curve_server": True})


def test_options_refuse_inline_secrets_without_echoing_them(tmp_path: Path) -> None:
    _, _, secret = _czmq(tmp_path)
    shown = z85.encode(secret)
    with pytest.raises(ConfigError) as info:
        options.read([("curve_secretkey", shown), ("plain_password", "hunter2")], "bridge b")
    text = str(info.value)
    assert "curve_cert=PATH" in text and "plain_password_file=PATH" in text
    assert shown not in text and "hunter2" not in text


def test_options_read_security_settings(tmp_path: Path) -> None:
    path, public, secret = _czmq(tmp_path)
    got = options.read([("curve_server", "1"), ("curve_cert", str(path)),
                        ("curve_allow", str(tmp_path))], "url")
    sec = security_of(got)
    assert sec is not None and (sec.mechanism, sec.as_server) == ("CURVE", True)
    assert (sec.public, sec.secret) == (public, secret)
    assert z85.encode(secret) not in repr(sec)
    with pytest.raises(ConfigError, match="missing.key_secret"):
        options.read([("curve_cert", str(tmp_path / "missing.key_secret"))], "url")


# -- issue 20: hardening --------------------------------------------------------------------------
class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_allow_list_reads_once_and_reloads_only_what_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A handshake with an unknown key costs a set lookup: the directory is read once, looked
    at again at most once a second, and only changed files are parsed (finding 6; CZMQ's
    zcertstore reloads on a change)."""
    from gateway import security

    allow = tmp_path / "allow"
    allow.mkdir()
    keys = []
    for i in range(50):
        _, public, _ = _czmq(tmp_path, f"c{i}")
        (allow / f"c{i}.key").write_text((tmp_path / f"c{i}.key").read_text())
        keys.append(public)
    loads: list[str] = []
    real = security.load_cert
    monkeypatch.setattr(security, "load_cert",
                        lambda path, **kw: loads.append(str(path)) or real(path, **kw))
    clock = _Clock()
    store = security.AllowList(str(allow), clock)
    assert store.keys() == frozenset(keys) and len(loads) == 50
    stranger, _ = keypair()
    for _ in range(1000):  # unknown keys, at once: no file is read again
        assert stranger not in store.keys()
    assert len(loads) == 50
    clock.now += security.ALLOW_RECHECK  # a second later, nothing changed: still no parse
    assert store.keys() == frozenset(keys) and len(loads) == 50
    _, added, _ = _czmq(tmp_path, "late")
    (allow / "late.key").write_text((tmp_path / "late.key").read_text())
    (allow / "c0.key").unlink()
    assert added not in store.keys()  # within the second: not seen yet
    clock.now += security.ALLOW_RECHECK
    got = store.keys()
    assert added in got and keys[0] not in got and len(got) == 50
    assert loads[50:] == [str(allow / "late.key")]  # only the new file was parsed


def test_allow_directory_other_users_can_write_to_is_refused(tmp_path: Path) -> None:
    """Finding 11: a group- or world-writable curve_allow lets others add keys."""
    allow = tmp_path / "allow"
    allow.mkdir()
    _, public, _ = _czmq(tmp_path, "client")
    (allow / "client.key").write_text((tmp_path / "client.key").read_text())
    os.chmod(allow, 0o777)
    with pytest.raises(ConfigError, match="too open.*chmod go-w"):
        options.read([("curve_allow", str(allow))], "url")
    from gateway import security

    store = security.AllowList(str(allow))
    assert store.keys() == frozenset() and "too open" in store.error  # at run time: nobody
    curve = Security("CURVE", True, curve_allow=str(allow))
    got = builtin_authenticate("CURVE", {"client_key": z85.encode(public)}, curve)
    assert got is not None and not got.allowed
    os.chmod(allow, 0o755)


def test_save_cert_over_an_open_file_makes_it_private(tmp_path: Path) -> None:
    """Finding 11: O_CREAT keeps an existing file's mode; the new secret must not be 0644."""
    base = tmp_path / "gw"
    (tmp_path / "gw.key_secret").write_text("old\n")
    os.chmod(tmp_path / "gw.key_secret", 0o644)
    public, secret = keypair()
    _, sec = save_cert(base, public, secret)
    assert os.stat(sec).st_mode & 0o777 == 0o600
    assert load_cert(sec, secret=True).secret == secret


def test_plain_server_needs_a_user_list_or_allow_any(tmp_path: Path) -> None:
    """Finding 2: a PLAIN server without plain_passwords is refused at start with a clear
    message (it would refuse every client, as libzmq's); plain_allow_any=1 takes anyone."""
    errors = check_settings({"plain_server": True})
    assert len(errors) == 1 and "plain_passwords=FILE" in errors[0] \
        and "plain_allow_any=1" in errors[0]
    assert check_settings({"plain_server": True, "plain_allow_any": True}) == []
    pw = tmp_path / "pw"
    pw.write_text("a=b\n")
    pw.chmod(0o600)
    assert "choose one" in check_settings({"plain_server": True, "plain_allow_any": True,
                                           "plain_passwords": str(pw)})[0]
    sec = security_of({"plain_server": True, "plain_allow_any": True})
    assert sec is not None and sec.plain_allow_any
    assert check_settings({"plain_allow_any": True, "plain_username": "u",
                           "plain_password_file": "f"})[0].startswith("plain_allow_any: only")


def _answering(answer: object) -> object:
    """A gateway_authenticate plugin that answers ``answer`` (or raises it)."""
    from types import SimpleNamespace

    from gateway.hookspecs import hookimpl

    @hookimpl
    def gateway_authenticate(mechanism: str, address: str, socket: str,
                             credentials: dict[str, str], policy: object) -> object:
        if isinstance(answer, Exception):
            raise answer
        return answer

    return SimpleNamespace(gateway_authenticate=gateway_authenticate)


@pytest.mark.parametrize("answer", ["yes", 1, object(), ValueError("plugin bug")])
def test_a_bad_plugin_answer_refuses_the_peer(answer: object) -> None:
    """Finding 1: whatever a plugin returns or raises, the authenticator answers an AuthResult
    and fails closed (on 49db3ab a non-AuthResult raised AttributeError out of it, which
    killed the pyzmq ZAP thread)."""
    from gateway.plugins import manager
    from gateway.security import hook_authenticator

    pm = manager()
    pm.register(_answering(answer), name="bad-answer")
    try:
        auth = hook_authenticator(Security("CURVE", True), "s", lambda: "127.0.0.1:1")
        verdict = auth("CURVE", {"client_key": "x" * 40})
    finally:
        pm.unregister(name="bad-answer")
    assert (verdict.allowed, verdict.reason) == (False, "authenticator-error")


def test_a_log_that_cannot_be_written_changes_no_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 1: the auth.denied line failing (stderr gone) must not raise out of the
    authenticator: the refusal stands and the caller goes on."""
    from gateway import security

    class Broken:
        def __getattr__(self, name: str) -> object:
            def fail(*args: object, **kwargs: object) -> None:
                raise OSError("stderr is gone")
            return fail

    monkeypatch.setattr(security, "log", Broken())
    monkeypatch.setattr(security, "_DENIED", security.Throttle(10.0, 64))
    auth = security.hook_authenticator(Security("PLAIN", True), "s", lambda: "peer")
    verdict = auth("PLAIN", {"username": "u", "password": "p"})
    assert (verdict.allowed, verdict.reason) == (False, "no-user-list")


def test_auth_denied_is_rate_limited_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 15: a refused client that redials at once gives one line per interval (the
    next says how many were held back); the counter counts every refusal."""
    from structlog.testing import capture_logs

    from gateway import security
    from gateway.metrics import METRICS

    monkeypatch.setattr(security, "_DENIED", security.Throttle(10.0, 64))
    auth = security.hook_authenticator(Security("PLAIN", True), "rl", lambda: "peer")
    before = METRICS.get("gateway_auth_failures_total", socket="rl", mechanism="PLAIN",
                         reason="no-user-list")
    with capture_logs() as logs:
        for _ in range(500):
            assert not auth("PLAIN", {"username": "u", "password": "p"}).allowed
    assert len([e for e in logs if e["event"] == "auth.denied"]) == 1
    assert METRICS.get("gateway_auth_failures_total", socket="rl", mechanism="PLAIN",
                       reason="no-user-list") == before + 500
