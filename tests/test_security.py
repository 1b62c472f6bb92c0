"""gateway.security: a side's security loaded from its settings, the built-in authenticator
(CZMQ zauth's habits) and the hook authenticator (fail closed, rate-limited refusals)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.security import Security, builtin_authenticate, security_of
from gateway.settings import schema as options
from gateway.wire import z85
from gateway.wire.zmtp_curve import keypair
from tests.test_settings_files import _czmq


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
    # reading a URL or TOML reads no file (issue 21): the file is read when the side is loaded
    missing = options.read([("curve_server", "1"),
                            ("curve_cert", str(tmp_path / "missing.key_secret"))], "url")
    with pytest.raises(ConfigError, match="missing.key_secret"):
        security_of(missing)


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


def test_every_file_mistake_at_once_each_naming_its_setting(tmp_path: Path) -> None:
    """fuzz: config-name-too-long: a name over the system's limits (or a loop, a directory)
    is a ConfigError naming the setting and the file, never an OSError; every file's mistake
    in the same breath."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    long = str(tmp_path / ("a" * 300))
    with pytest.raises(ConfigError) as info:
        security_of({"curve_server": True, "curve_cert": long, "curve_allow": str(loop)})
    lines = str(info.value).splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("curve_cert: cannot read certificate ")
    assert lines[0].endswith(f"({len(long)} characters): File name too long"), lines[0]
    assert lines[1] == f"curve_allow: cannot read {str(loop)!r}: Too many levels of symbolic links"
    with pytest.raises(ConfigError) as info:
        security_of({"curve_cert": str(tmp_path), "curve_server_cert": long})
    lines = str(info.value).splitlines()
    assert lines[0] == f"curve_cert: cannot read certificate {str(tmp_path)!r}: Is a directory"
    assert lines[1].startswith("curve_server_cert: cannot read certificate ")
    for settings in ({"plain_server": True, "plain_passwords": long},
                     {"plain_username": "u", "plain_password_file": long}):
        with pytest.raises(ConfigError, match="File name too long"):
            security_of(settings)


def test_a_curve_allow_directory_that_cannot_be_listed_is_refused_at_start(
        tmp_path: Path) -> None:
    """It would allow nobody: a config error, not a running server that refuses everyone."""
    public, secret = keypair()
    from gateway.settings.files import save_cert

    _, sec = save_cert(str(tmp_path / "server"), public, secret)
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(ConfigError, match="^curve_allow: .*Not a directory"):
        security_of({"curve_server": True, "curve_cert": sec, "curve_allow": str(not_a_dir)})
