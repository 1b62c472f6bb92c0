"""Harness ``config``: what an operator writes: endpoint URLs (``gateway.url.parse``), endpoint
settings (``gateway.settings.schema.read``, then ``gateway.security.security_of`` and
``gateway.tls.tls_of``, which read the files they name), ``gateway.toml``
(``gateway.config.load``, then ``gateway.device.plan.plan`` for each bridge: every check the
CLI makes before a socket exists), and the files settings name (CURVE certificates, password
files).

Input: ``target`` then the target's bytes. 0: a URL from raw text; 1: settings pairs built from
the schema's names and values (any TOML type); 2: a TOML file from raw bytes; 3: a TOML file
built from sections, keys and values the product knows; 4: a URL built the same way (wire,
transport, address, settings, with a secret and a Z85 key now and then); 5: a certificate
file's text; 6: a password file's text.

Oracles: no exception but :class:`~gateway.errors.ConfigError` leaves the entry points (a
certificate or password file read alone: ``ValueError``); a ``ConfigError`` never holds the
value of a secret-looking key (``plain_password``, ``curve_secretkey``, ... as written or
percent-decoded); a valid Z85 key given as ``curve_serverkey=`` comes out of the URL unchanged.

Settings that name files are only given the harness's own fixtures (or a bare name, which
resolves in the working directory): an input naming any other path is skipped, so the fuzzer
never reads ``/dev/zero``, ``/proc/kmsg`` or a FIFO.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
import tomllib
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, unquote_plus

from gateway import config
from gateway.device.plan import plan
from gateway.errors import ConfigError
from gateway.security import security_of
from gateway.settings import convert, files, schema
from gateway.tls import tls_of
from gateway.url import parse
from gateway.wire import z85
from gateway.wire.zmtp_curve import keypair

from ._data import Data, Writer, check, raised_in

NAME = "config"

#: the spellings of settings that name a file or a directory (read at start)
_PATHS = frozenset(n for n, s in schema.BY_NAME.items() if s.convert is convert.path)
_SECRET_KEY = re.compile(r"(secret|password)(_?key)?$")
#: the inline secrets the product refuses and must never show
_EXACT = frozenset({"plain_password", "curve_secretkey", "curve_secret_key"})
#: the keys whose 40-character Z85 value main's URL parser takes as written
_Z85_KEYS = frozenset({"curve_serverkey", "curve_secretkey", "curve_secret_key",
                       "curve_publickey", "curve_public_key"})
#: a secret's value after its key anywhere in a query (behind a ``;``, or junk before the key)
_LOOSE = re.compile(r"(?i)(?:secret_?key|password)=([^&;#]*)")
_MARK = "s3cr3T-"

WIRES = ("zmq", "sp", "nng", "nanomsg", "zmtp", "any", "ZMQ", "")
TRANSPORTS = ("tcp", "ipc", "inproc", "ws", "wss", "tls+tcp", "")
ADDRESSES = ("127.0.0.1:5555", "[::1]:0", "0.0.0.0:*", "/tmp/fuzz.sock", "name", "host:99999",
             "h:p", ":1", "127.0.0.1:5555/svc", "")
NAMES = tuple(sorted(schema.BY_NAME)) + tuple(sorted(schema.REFUSED)) + (
    "backend", "Backend", "HWM", "x", "")
VALUES = ("1", "0", "100", "2s", "250ms", "1m", "64k", "1MiB", "true", "off", "yes", "-1", "",
          "1.5", "1e3", "inf", "nan", "reqrep", "pubsub", "pair1", "a.,b.", "none", "optional",
          "required", "127.0.0.1/32,10.0.0.0/8", "::1/128", "300.1.1.1", "native", "pyzmq",
          "example.org", "a b")
LIMIT_KEYS = ("max_message_size", "hop_limit", "pending_tokens", "token_ttl", "grace",
              "message_timeout", "backlog", "unknown")
GATEWAY_KEYS = ("log_format", "log_level", "metrics", "other")
GATEWAY_VALUES = ("console", "json", "debug", "info", "warning", "error", "127.0.0.1:9100",
                  ":9100", "x")
SECTIONS = ("gateway", "limits", "bridge", "plugins", "other")


def encode_input(target: int, rest: bytes = b"") -> bytes:
    return Writer().byte(target).raw(rest).bytes()


class _Fixtures:
    """Files settings may name: made once per process, in a private temporary directory."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="gateway-fuzz-config-")
        d = self.dir
        public, secret = keypair()
        self.pub_cert, self.secret_cert = files.save_cert(os.path.join(d, "server"), public,
                                                          secret)
        open_pub, open_sec = files.save_cert(os.path.join(d, "open"), public, secret)
        os.chmod(open_sec, 0o644)  # a secret others can read: refused
        self.allow = os.path.join(d, "allow")
        os.mkdir(self.allow)
        files.save_cert(os.path.join(self.allow, "client"), *keypair())
        self.passwords = self._file("passwords", "alice=pw\n# comment\nbob=x=y\n")
        self.bad_passwords = self._file("bad-passwords", "no equals sign\n")
        self.secret = self._file("secret", "pw\n")
        self.pem = self._file("cert.pem", "-----BEGIN CERTIFICATE-----\n")
        self.scratch = os.path.join(d, "scratch")
        self.paths = (self.pub_cert, self.secret_cert, open_pub, open_sec, self.allow,
                      self.passwords, self.bad_passwords, self.secret, self.pem,
                      os.path.join(d, "missing"), d)

    def _file(self, name: str, text: str) -> str:
        path = os.path.join(self.dir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return path

    def safe(self, value: object) -> bool:
        """A path the fuzzer may make the product read: ours, or a bare name."""
        if not isinstance(value, str) or "/" not in value:
            return True
        try:
            real = os.path.realpath(value.strip())
        except ValueError:  # a NUL byte
            return False
        return real == self.dir or real.startswith(self.dir + os.sep)

    def write(self, data: bytes, mode: int = 0o600) -> str:
        fd = os.open(self.scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return self.scratch


_FIX: _Fixtures | None = None


def fixtures() -> _Fixtures:
    global _FIX
    if _FIX is None:
        _FIX = _Fixtures()
    return _FIX


# -- what an input makes the product read -------------------------------------------------------
def _pairs_safe(pairs: Iterable[tuple[object, object]]) -> bool:
    fix = fixtures()
    return all(fix.safe(value) for key, value in pairs if str(key).lower() in _PATHS)


def _url_pairs(url: str) -> list[tuple[str, str]]:
    query = url.partition("://")[2].partition("?")[2]
    return parse_qsl(query, keep_blank_values=True)


def _strings(obj: object) -> Iterable[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def _tables(obj: object) -> Iterable[dict[str, Any]]:
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from _tables(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _tables(v)


def _toml_safe(doc: dict[str, Any]) -> bool:
    return (all(_pairs_safe(t.items()) for t in _tables(doc))
            and all(_pairs_safe(_url_pairs(s)) for s in _strings(doc) if "://" in s))


# -- the oracles ---------------------------------------------------------------------------------
def _secret_id(key: object) -> str | None:
    """Which oracle a key's value falls under: ``secret-echo`` for the inline secrets the
    product refuses (it must never show their values), ``secret-echo-loose`` for any other
    key that looks like a secret (a misspelt one); None for the rest."""
    name = unquote(str(key)).strip().lower()
    if name in _EXACT:
        return "secret-echo"
    return "secret-echo-loose" if _SECRET_KEY.search(name) else None


def _secrets_of(pairs: Iterable[tuple[object, object]]) -> list[tuple[str, str]]:
    """(value, oracle) of the secret-looking keys, long enough not to turn up by chance."""
    out = []
    for key, value in pairs:
        which = _secret_id(key)
        if which and isinstance(value, str) and len(value) >= 8:
            out.append((value, which))
    return out


def _expect_config_error(call: Any, text: str, secrets: list[tuple[str, str]],
                         strict: bool) -> Any:
    """Run ``call``; only ConfigError may leave it, and it must not hold a secret (one that
    stands once in ``text``: written twice, under another key too, no telling who echoed it)."""
    try:
        return call()
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG or not raised_in(exc, "gateway.settings.files"):
            raise
        check(False, "config-name-too-long", f"{exc!r:.200} left the settings reader", strict)
        return None
    except ConfigError as exc:
        message = str(exc)
        exact = {v for v, which in secrets if which == "secret-echo"}
        for secret, which in set(secrets):
            if which != "secret-echo" and secret in exact:
                continue  # one value, two readings: the stricter one decides
            if text.count(secret) > 1 or unquote_plus(text).count(secret) > 1:
                continue
            check(secret not in message, which,
                  f"a ConfigError echoes a secret value {secret!r}: {message!r:.300}", strict)
        return None


def _url_secrets(url: str) -> list[tuple[str, str]]:
    """The secret values of a URL, as written and as decoded: after a secret-looking key of
    the query, and after ``...password=`` or ``...secretkey=`` anywhere in it (a secret that
    follows a ``;`` or junk inside another value is still one)."""
    query = url.partition("://")[2].partition("?")[2]
    odd = "?" in url.partition("://")[0]  # a '?' before the '://': junk where the scheme is
    swallowed = _in_z85_windows(query)
    found: list[tuple[str, str]] = []
    pos = 0
    for part in query.split("&"):
        key, _, value = part.partition("=")
        which = _secret_id(key)
        if which and odd:
            which = "secret-echo-loose"
        elif which and pos in swallowed:
            which = "secret-echo-z85-window"
        pos += len(part) + 1
        if which:
            found += [(v, which) for v in (value, unquote(value), unquote_plus(value))]
    for match in _LOOSE.finditer(query):
        value = match.group(1)
        found += [(v, "secret-echo-loose") for v in (value, unquote(value))]
    return [(v, which) for v, which in found if _MARK in v]


def _in_z85_windows(query: str) -> set[int]:
    """Where ``key=value`` parts start inside the 40 characters that follow a Z85 key's ``=``
    when those are followed by ``&`` or the end: main's URL parser takes such a window as the
    key, whatever ``&`` it holds (``curve_serverkey=abc&plain_password=...``)."""
    inside: set[int] = set()
    pos = 0
    for part in query.split("&"):
        key, eq, _ = part.partition("=")
        start = pos + len(key) + 1
        if eq and unquote(key).lower() in _Z85_KEYS and (
                start + 40 == len(query) or query[start + 40:start + 41] == "&"):
            inside.update(i for i in range(start, start + 40)
                          if i > start and query[i - 1] == "&")
        pos += len(part) + 1
    return inside


def _check_url(url: str, strict: bool) -> None:
    if not _pairs_safe(_url_pairs(url)):
        return
    _expect_config_error(lambda: parse(url), url, _url_secrets(url), strict)


def _check_toml(text: bytes, strict: bool) -> None:
    try:
        doc = tomllib.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        doc = None
    if doc is not None and not _toml_safe(doc):
        return
    secrets = []
    if doc is not None:
        for table in _tables(doc):
            secrets += [s for s in _secrets_of(table.items()) if _MARK in s[0]]
        for s in _strings(doc):
            if "://" in s:
                secrets += _url_secrets(s)
    path = fixtures().write(text)
    shown = text.decode("utf-8", "replace")
    loaded = _expect_config_error(lambda: config.load(path), shown, secrets, strict)
    for spec in loaded.bridges if loaded is not None else ():
        _expect_config_error(lambda: plan(spec), shown, secrets, strict)  # noqa: B023


def _check_pairs(pairs: list[tuple[str, Any]], family: str, transport: str, bound: bool,
                 strict: bool) -> None:
    if not _pairs_safe(pairs):
        return
    secrets = [s for s in _secrets_of(pairs) if _MARK in s[0]]
    text = repr(pairs)
    settings = _expect_config_error(lambda: schema.read(pairs, "fuzz"), text, secrets, strict)
    if settings is None:
        return
    _expect_config_error(lambda: security_of(settings, family), text, secrets, strict)
    _expect_config_error(lambda: tls_of(settings, bound if transport in ("tls+tcp", "wss")
                                        else None), text, secrets, strict)


def _check_z85(key: bytes, strict: bool) -> None:
    """A Z85 key (RFC 32: any of 85 characters, '%', '&', '+' and '?' among them) written as
    the README writes it, after ``curve_serverkey=``."""
    text = z85.encode(key)
    url = f"zmq+tcp://127.0.0.1:5555?curve_serverkey={text}"
    try:
        got = parse(url).settings.get("curve_serverkey")
    except ConfigError as exc:
        got = f"ConfigError: {exc}"
    check(got == text, "z85-in-url", f"curve_serverkey={text} came out as {got!r:.200}",
          strict)


# -- building inputs the product knows ---------------------------------------------------------
def _text(data: Data) -> str:
    return data.short().decode("utf-8", "replace")


def _value(data: Data, key: str) -> object:
    """A value for ``key``: one the option knows, a fixture path, a secret, or fuzz; as a
    string, or (TOML) another type."""
    kind = data.byte() % 10
    if _SECRET_KEY.search(key.lower()) and kind < 5:
        return _MARK + data.take(6).hex()
    if kind < 4:
        return data.choice(VALUES)
    if kind == 4:
        return data.choice(fixtures().paths)
    if kind == 5:
        return data.uint(2) - (1 << 15) * data.flag()
    if kind == 6:
        return data.choice((True, False, 1.5, float("inf"), -0.0, 1e400))
    if kind == 7:
        return [_text(data) for _ in range(data.byte() % 3)]
    return _text(data)


def _key(data: Data) -> str:
    return data.choice(NAMES) if data.byte() % 8 else _text(data)


def _pairs(data: Data, toml: bool) -> list[tuple[str, Any]]:
    pairs = []
    for _ in range(data.byte() % 8):
        key = _key(data)
        value = _value(data, key)
        pairs.append((key, value if toml or isinstance(value, str) else str(value)))
    return pairs


def _url(data: Data) -> str:
    prefix = data.choice(("", "@", ">", " @"))
    wire = data.choice(WIRES) if data.byte() % 8 else _text(data)
    transport = data.choice(TRANSPORTS) if data.byte() % 8 else _text(data)
    scheme = f"{wire}+{transport}" if data.byte() % 8 else wire or "inproc"
    address = data.choice(ADDRESSES) if data.byte() % 8 else _text(data)
    query = []
    encode = data.flag()
    for key, value in _pairs(data, False):
        text = str(value)
        query.append(f"{quote(key) if encode else key}={quote(text) if encode else text}")
    url = f"{prefix}{scheme}://{address}"
    return url + ("?" + "&".join(query) if query or data.flag() else "")


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(value), repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}"
                               for k, v in value.items()) + "}"
    return json.dumps(str(value))


def _toml(data: Data) -> str:
    lines = []
    for _ in range(data.byte() % 6):
        section = data.choice(SECTIONS)
        if section == "bridge":
            lines.append("[[bridge]]")
            for key in ("name", "front", "back", "forwarder"):
                if data.byte() % 4:
                    value: object = (_url(data) if key in ("front", "back")
                                     else data.choice(("orders", "auto", "proxy", "x")))
                    lines.append(f"{key} = {_toml_value(value)}")
            for key in ("front_options", "back_options"):
                if data.byte() % 3 == 0:
                    lines.append(f"{key} = {_toml_value(dict(_pairs(data, True)))}")
        else:
            lines.append(f"[{section}]")
            keys = {"limits": LIMIT_KEYS, "gateway": GATEWAY_KEYS}.get(section, NAMES)
            for _ in range(data.byte() % 4):
                key = data.choice(keys)
                value = (data.choice(GATEWAY_VALUES) if section == "gateway" and data.flag()
                         else _value(data, key))
                lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def one_input(buf: bytes, strict: bool = False) -> None:
    data = Data(buf)
    target = data.byte() % 7
    if target == 0:
        _check_url(data.rest().decode("utf-8", "replace"), strict)
    elif target == 1:
        family = data.choice(("zmtp", "sp", "any"))
        transport = data.choice(TRANSPORTS)
        bound = data.flag()
        _check_pairs(_pairs(data, True), family, transport, bound, strict)
    elif target == 2:
        _check_toml(data.rest(), strict)
    elif target == 3:
        _check_toml(_toml(data).encode(), strict)
    elif target == 4:
        with_key = data.flag()
        key = data.take(32).ljust(32, b"\x00")
        _check_url(_url(data), strict)
        if with_key:
            _check_z85(key, strict)
    elif target == 5:  # a certificate file (mode 600: the permission check passes)
        path = fixtures().write(data.rest())
        for secret in (False, True):
            try:
                files.load_cert(path, secret=secret)
            except ValueError:
                pass
        _expect_config_error(lambda: security_of({"curve_server": True, "curve_cert": path}),
                             "", [], strict)
    else:
        path = fixtures().write(data.rest())
        try:
            files.read_passwords(path)
        except ValueError:
            pass
        _expect_config_error(lambda: security_of({"plain_server": True,
                                                  "plain_passwords": path}), "", [], strict)
