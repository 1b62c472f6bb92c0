"""Reading the files endpoint settings name, once per start or reload (never while parsing a
URL or TOML): CURVE certificates (CZMQ's ``zcert`` files, pyzmq's ``create_certificates``), the
directory of allowed client certificates, PLAIN password files, one-line secret files, and TLS
key files.

Certificates are ZPL (rfc.zeromq.org spec 4): ``NAME.key`` holds the public key, ``NAME.key_secret``
both keys::

    metadata
        name = "gateway"
    curve
        public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
        secret-key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"

A file holding a secret (a secret key, passwords, a TLS private key) must be readable by its
owner only, as ssh asks of a private key, and a ``curve_allow`` directory must not be writable
by other users. Every error is a ``ValueError`` naming the file; secrets never reach a message.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gateway.logging import get_logger
from gateway.wire import z85
from gateway.wire.zmtp_curve import public_of

log = get_logger("gateway.security")

#: seconds between two looks at a ``curve_allow`` directory (CZMQ's zcertstore: on a change)
ALLOW_RECHECK = 1.0


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


#: how much of a file name a message shows (a name over the system's limits is the mistake)
_SHOWN = 120


def shown(path: str | os.PathLike[str]) -> str:
    """A file name as a message shows it: quoted, and cut short when it is very long."""
    text = str(path)
    if len(text) <= _SHOWN:
        return repr(text)
    return f"{text[:_SHOWN // 2]!r}...{text[-_SHOWN // 4:]!r} ({len(text)} characters)"


def _named(path: str | os.PathLike[str], what: str = "") -> str | os.PathLike[str]:
    """``path``, unless no system call can take it (a NUL byte): ValueError naming it."""
    if "\0" in str(path):
        raise ValueError(f"cannot read {what}{shown(path)}: a NUL byte in the name")
    return path


def _check_private(path: Path, what: str = "the secret key") -> None:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"permissions {stat.S_IMODE(mode):04o} for {str(path)!r} are too open: "
                         f"other users can read {what} (chmod 600 {path})")


def check_private_file(path: str | os.PathLike[str], what: str = "the secret in it") -> None:
    """A file holding a secret (a key, passwords) must be readable by its owner only, as ssh
    asks of a private key; ValueError naming the file otherwise."""
    try:
        _check_private(Path(_named(path)), what)
    except OSError as exc:
        raise ValueError(f"cannot read {shown(path)}: {exc.strerror or exc}") from None


def check_allow_directory(path: str | os.PathLike[str]) -> None:
    """A ``curve_allow`` directory whose certificates decide who gets in: other users must not
    be able to add one (no group or world write bit); ValueError naming it otherwise."""
    try:
        mode = os.stat(_named(path)).st_mode
    except OSError as exc:
        raise ValueError(f"cannot read {shown(path)}: {exc.strerror or exc}") from None
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ValueError(f"permissions {stat.S_IMODE(mode):04o} for {str(path)!r} are too open: "
                         f"other users can add allowed keys (chmod go-w {path})")


def load_cert(path: str | os.PathLike[str], *, secret: bool = False) -> Cert:
    """Read a zcert file. ``secret=True``: the secret key is needed; ``PATH`` may name the
    ``.key_secret`` file or the public one next to it (CZMQ's ``zcert_load`` habit). Errors
    are ValueErrors naming the file."""
    p = Path(_named(path, "certificate "))
    try:
        if secret and p.name and not p.name.endswith("_secret"):
            twin = p.with_name(p.name + "_secret")
            if twin.exists():
                p = twin
        text = p.read_text(encoding="utf-8")
    except OSError as exc:  # too long a name, a loop, no permission, a directory ...
        raise ValueError(f"cannot read certificate {shown(p)}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"certificate {shown(p)} is not UTF-8 text") from None
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
            try:
                _check_private(p)
            except OSError as exc:  # (gone since it was read)
                raise ValueError(f"cannot read certificate {shown(p)}: "
                                 f"{exc.strerror or exc}") from None
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
        _check_private(Path(_named(path, "password file ")), "the passwords")
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read password file {shown(path)}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"password file {shown(path)} is not UTF-8 text") from None
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
    p = Path(_named(path))
    try:
        _check_private(p)
        return p.read_text(encoding="utf-8").splitlines()[0] if p.stat().st_size else ""
    except OSError as exc:
        raise ValueError(f"cannot read {shown(p)}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{shown(p)} is not UTF-8 text") from None


def readable_file(path: str) -> str:
    """A readable file; ValueError naming it otherwise."""
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise ValueError(f"a readable file ({shown(path)} is not one)")
    return path


def holds_private_key(path: str) -> bool:
    """True when the PEM file ``path`` holds a private key (``-----BEGIN ... PRIVATE KEY``)."""
    try:
        with open(path, "rb") as f:
            return b"PRIVATE KEY-----" in f.read(1 << 20)
    except OSError:
        return False


__all__ = ["ALLOW_RECHECK", "AllowList", "Cert", "allow_list", "allowed_keys",
           "check_allow_directory", "check_private_file", "holds_private_key", "load_cert",
           "parse_zpl", "read_passwords", "read_secret_file", "read_z85_key", "readable_file",
           "save_cert", "shown"]
