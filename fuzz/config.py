"""Harness ``config``: what an operator writes: endpoint URLs (``gateway.url.parse``), endpoint
settings (``gateway.options.read``, then ``gateway.security.security_of`` and
``gateway.tls.check_settings``), ``gateway.toml`` (``gateway.config.load``), and the files
settings name (CURVE certificates, password files).

Input: ``target`` then the target's bytes. 0: a URL from raw text; 1: settings pairs built from
the option table's names and values (any TOML type); 2: a TOML file from raw bytes; 3: a TOML
file built from sections, keys and values the product knows; 4: a URL built the same way
(wire, transport, address, options, with a secret and a Z85 key now and then); 5: a
certificate file's text; 6: a password file's text.

Oracles: no exception but :class:`~gateway.errors.ConfigError` leaves the entry points (a
certificate or password file: ``ValueError``, which the option turns into ``ConfigError``);
a ``ConfigError`` never holds the value of a secret-looking key (``plain_password``,
``curve_secretkey``, ... as written or percent-decoded); a valid Z85 key given as
``curve_serverkey=`` comes out of the URL unchanged.

Settings that name files are only read from the harness's own fixture directory (or a bare
name, which resolves in the working directory): an input naming any other path is skipped, so
the fuzzer never reads ``/dev/zero`` or a FIFO.
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
from urllib.parse import parse_qsl, quote, unquote_plus

from gateway import config, options, tls
from gateway.errors import ConfigError
from gateway.security import read_passwords, save_cert, security_of
from gateway.url import parse
from gateway.wire import z85
from gateway.wire.zmtp_curve import keypair

from ._data import Data, Finding, Writer, check, raised_in

NAME = "config"

#: what reads a file when an option is converted
_FILE_READERS = {options.secret_cert, options.public_cert, options.password_file,
                 options.secret_file}
_SECRET_KEY = re.compile(r"(secret|password)(_?key)?$")
_MARK = "s3cr3T-"

WIRES = ("zmq", "sp", "nng", "nanomsg", "zmtp", "any", "ZMQ", "")
TRANSPORTS = ("tcp", "ipc", "inproc", "ws", "wss", "tls+tcp", "")
ADDRESSES = ("127.0.0.1:5555", "[::1]:0", "0.0.0.0:*", "/tmp/fuzz.sock", "name", "host:99999",
             "h:p", ":1", "127.0.0.1:5555/svc", "")
NAMES = tuple(sorted(options.BY_NAME)) + ("backend", "Backend", "HWM", "x", "")
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
        self.pub_cert, self.secret_cert = save_cert(os.path.join(d, "server"), public, secret)
        open_pub, open_sec = save_cert(os.path.join(d, "open"), public, secret)
        os.chmod(open_sec, 0o644)  # a secret others can read: refused
        self.allow = os.path.join(d, "allow")
        os.mkdir(self.allow)
        save_cert(os.path.join(self.allow, "client"), *keypair())
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
    for key, value in pairs:
        option = options.BY_NAME.get(str(key).lower())
        if option is not None and option.convert in _FILE_READERS and not fix.safe(value):
            return False
    return True


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
def _secrets_of(pairs: Iterable[tuple[object, object]]) -> list[str]:
    """Values of secret-looking keys long enough not to turn up by chance."""
    out = []
    for key, value in pairs:
        if isinstance(value, str) and _SECRET_KEY.search(str(key).lower()) and len(value) >= 8:
            out.append(value)
    return out


def _expect_config_error(call: Any, text: str, secrets: list[str], strict: bool) -> Any:
    """Run ``call``; only ConfigError may leave it, and it must not hold a secret (one that
    stands once in ``text``: written twice, under another key too, no telling who echoed it)."""
    try:
        return call()
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG or not raised_in(exc, "gateway.security"):
            raise
        check(False, "config-name-too-long", f"{exc!r:.200} left the settings reader", strict)
        return None
    except ConfigError as exc:
        message = str(exc)
        for secret in set(secrets):
            if text.count(secret) > 1 or unquote_plus(text).count(secret) > 1:
                continue
            check(secret not in message, "secret-echo",
                  f"a ConfigError echoes a secret value {secret!r}: {message!r:.300}", strict)
        return None


def _url_secrets(url: str) -> list[str]:
    """The secret values of a URL, as written and as decoded."""
    query = url.partition("://")[2].partition("?")[2]
    out = []
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if _SECRET_KEY.search(unquote_plus(key).lower()):
            out += [value, unquote_plus(value)]
    return [s for s in out if _MARK in s]


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
            secrets += [s for s in _secrets_of(table.items()) if _MARK in s]
        for s in _strings(doc):
            if "://" in s:
                secrets += _url_secrets(s)
    path = fixtures().write(text)
    _expect_config_error(lambda: config.load(path), text.decode("utf-8", "replace"), secrets,
                         strict)


def _check_pairs(pairs: list[tuple[str, Any]], family: str, transport: str, bound: bool,
                 strict: bool) -> None:
    if not _pairs_safe(pairs):
        return
    secrets = [s for s in _secrets_of(pairs) if _MARK in s]
    text = repr(pairs)
    settings = _expect_config_error(lambda: options.read(pairs, "fuzz"), text, secrets, strict)
    if settings is None:
        return
    _expect_config_error(lambda: security_of(settings, family), text, secrets, strict)
    lines = tls.check_settings(settings, family, transport, bound)
    if not all(isinstance(line, str) for line in lines):
        raise Finding(f"tls.check_settings gave {lines!r:.200}")


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
                from gateway.security import load_cert

                load_cert(path, secret=secret)
            except ValueError:
                pass
        _expect_config_error(lambda: options.read([("curve_cert", path)], "fuzz"), "", [],
                             strict)
    else:
        path = fixtures().write(data.rest())
        try:
            read_passwords(path)
        except ValueError:
            pass
        _expect_config_error(lambda: options.read([("plain_passwords", path)], "fuzz"), "", [],
                             strict)
