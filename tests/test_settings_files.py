"""gateway.settings.files: certificates (CZMQ zcert, pyzmq's files), password files, secret
files, the allowed-keys directory; read once per start or reload."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import zmq.auth

from gateway.security import Security, builtin_authenticate
from gateway.settings.files import (
    allowed_keys,
    check_allow_directory,
    load_cert,
    read_passwords,
    save_cert,
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
    from gateway.settings import files as security

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
    with pytest.raises(ValueError, match="too open.*chmod go-w"):
        check_allow_directory(allow)
    from gateway.settings import files as security

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


# -- names the system refuses (fuzz: config-name-too-long) -------------------------------------
def _bad_names(tmp_path: Path) -> dict[str, str]:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    return {"ENAMETOOLONG": str(tmp_path / ("a" * 300)), "ELOOP": str(loop),
            "EISDIR": str(tmp_path), "NUL": str(tmp_path / "x\0y"),
            "ENOTDIR": str(tmp_path / "loop" / "x")}


@pytest.mark.parametrize("error", ["ENAMETOOLONG", "ELOOP", "EISDIR", "NUL", "ENOTDIR"])
@pytest.mark.parametrize("reader", ["load_cert", "load_cert_secret", "read_passwords",
                                    "read_secret_file", "check_private_file",
                                    "check_allow_directory"])
def test_a_name_the_system_refuses_is_a_value_error_naming_it(tmp_path: Path, error: str,
                                                              reader: str) -> None:
    """Every reader turns what the system says of the name (OSError: too long, a loop, a
    directory, ...) into a ValueError naming the file, a very long name cut short."""
    from gateway.settings import files

    name = _bad_names(tmp_path)[error]
    call = {"load_cert": lambda: files.load_cert(name),
            "load_cert_secret": lambda: files.load_cert(name, secret=True),
            "read_passwords": lambda: files.read_passwords(name),
            "read_secret_file": lambda: files.read_secret_file(name),
            "check_private_file": lambda: files.check_private_file(name),
            "check_allow_directory": lambda: files.check_allow_directory(name)}[reader]
    if error == "EISDIR" and reader in ("check_private_file", "check_allow_directory"):
        call()  # a directory is fine there (mode 0700 from tmp_path)
        return
    with pytest.raises(ValueError) as info:
        call()
    text = str(info.value)
    assert type(info.value) is ValueError
    assert files.shown(name) in text and len(text) < 400, text
    if error == "ENAMETOOLONG":
        assert f"({len(name)} characters)" in text


def test_shown_cuts_a_long_name() -> None:
    from gateway.settings.files import shown

    assert shown("/etc/x") == "'/etc/x'"
    long = "/d/" + "a" * 300
    assert shown(long) == f"{long[:60]!r}...{long[-30:]!r} (303 characters)"
