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
    assert read_passwords(p) == {"alice": "wonder=land", "bob": ""}
    p.write_text("no equals sign\n")
    with pytest.raises(ValueError, match="line 1"):
        read_passwords(p)


def test_builtin_authenticator(tmp_path: Path) -> None:
    _, allowed, _ = _czmq(tmp_path, "client")
    stranger, _ = keypair()
    pw = tmp_path / "pw"
    pw.write_text("alice=secret\n")
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
    assert builtin_authenticate("PLAIN", {}, Security("PLAIN", True)) is None  # no policy


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
