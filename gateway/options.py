"""Endpoint settings: one table, reachable as ``?key=value`` on a URL and per bridge in TOML.

Names are libzmq's socket options without ``ZMQ_``, in lower case, so a ZeroMQ user knows them
(``hwm``, ``reconnect_ivl``, ``handshake_ivl``, ``maxmsgsize``, ``linger``); intervals are
milliseconds as in libzmq and nng (``reconnect_ivl=100``), or carry a unit (``2s``, ``250ms``).
Every row sets one field of :class:`gateway.adapter.SideOptions`; the native engine honours every
row, an adapter the rows it declares when it registers (``register(..., options=...)``).

    zmq+tcp://127.0.0.1:5555?hwm=5000&reconnect_ivl=250&reconnect_ivl_max=5s

    [[bridge]]
    name = "orders"
    front = "@zmq+tcp://0.0.0.0:5555"
    back = ">sp+tcp://127.0.0.1:6000"
    back_options = { reconnect_ivl = 100, reconnect_ivl_max = "5s" }

A value that does not parse is a :class:`~gateway.errors.ConfigError` naming the key, the value
and what would do.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.errors import ConfigError

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*$")
_SIZE = re.compile(r"^\s*([0-9]+)\s*(b|k|kb|kib|m|mb|mib)?\s*$", re.IGNORECASE)
_UNITS = {None: 0.001, "ms": 0.001, "s": 1.0, "m": 60.0}
_SIZES = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20}


def duration(value: object) -> float:
    """Milliseconds (a bare number, as libzmq's intervals) or with a unit (``250ms``, ``2s``,
    ``1m``) -> seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration: milliseconds, or 250ms, 2s, 1m")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError("a duration must be a finite number of milliseconds, at least 0")
        return float(value) / 1000
    match = _DURATION.match(str(value).lower())
    if match is None:
        raise ValueError("a duration: milliseconds, or 250ms, 2s, 1m")
    return float(match.group(1)) * _UNITS[match.group(2)]


def seconds(value: object) -> float:
    """Whole seconds (a bare number, as libzmq's TCP_KEEPALIVE_IDLE/INTVL) or with a unit
    (``250ms``, ``2s``, ``1m``) -> seconds, at least 1 s (the kernel's granularity)."""
    if isinstance(value, bool):
        raise ValueError("seconds: a whole number, or 30s, 2m")
    if isinstance(value, int | float) or str(value).strip().isdigit():
        value = f"{value}s"
    try:
        result = duration(value)
    except ValueError:
        raise ValueError("seconds: a whole number, or 30s, 2m") from None
    if result < 1:
        raise ValueError("seconds: at least 1 (TCP keepalive counts whole seconds)")
    return result


def ttl(value: object) -> float:
    """A duration (as :func:`duration`) that fits a ZMTP PING's TTL: at most 6553.5 s, sent in
    tenths of a second (RFC 37)."""
    result = duration(value)
    if result > 6553.5:
        raise ValueError("a duration of at most 6553.5 s (a PING carries tenths of a second in "
                         "16 bits)")
    return result


def count(value: object) -> int:
    """A whole number, at least 1."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("a whole number, at least 1")
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise ValueError("a whole number, at least 1")
    return int(text)


def whole(value: object) -> int:
    """A whole number, at least 0."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("a whole number, at least 0")
    text = str(value).strip()
    if not text.isdigit():
        raise ValueError("a whole number, at least 0")
    return int(text)


def size(value: object) -> int:
    """Bytes: a whole number, or with a unit (``64k``, ``1MiB``), at least 1."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("bytes: a whole number, or 64k, 1MiB")
    match = _SIZE.match(str(value))
    if match is None or int(match.group(1)) < 1:
        raise ValueError("bytes: a whole number, or 64k, 1MiB")
    return int(match.group(1)) * _SIZES[(match.group(2) or "").lower()]


def flag(value: object) -> bool:
    """``1``/``0``, ``true``/``false``, ``yes``/``no``, ``on``/``off``."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("true or false (1/0, yes/no, on/off)")


#: what ``?pattern=`` accepts (``pair1``: SP pair1, with its hop-count header; SP side only)
PATTERNS = ("reqrep", "pubsub", "pipeline", "pair", "pair1")


def pattern(value: object) -> str:
    """One of :data:`PATTERNS`."""
    text = str(value).strip().lower()
    if isinstance(value, bool) or text not in PATTERNS:
        raise ValueError(" | ".join(PATTERNS))
    return text


def topics(value: object) -> tuple[bytes, ...]:
    """Subscription prefixes: a comma-separated string (``a.,b.``; empty: everything) or, in
    TOML, a list of strings (which may hold commas). UTF-8 bytes, duplicates kept once."""
    if isinstance(value, str):
        items: list[object] = list(value.split(",")) if value else [""]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ValueError('prefixes: "a.,b." or a list of strings ("" subscribes to everything)')
    out: list[bytes] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError('prefixes: "a.,b." or a list of strings ("" subscribes to everything)')
        topic = item.encode()
        if topic not in out:
            out.append(topic)
    return tuple(out)


def _path(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a file path")
    return value.strip()


def cidrs(value: object) -> tuple[str, ...]:
    """Networks in CIDR notation, comma-separated (or a TOML list); a bare address is a /32
    (/128)."""
    import ipaddress

    items = value if isinstance(value, list | tuple) else str(value).split(",")
    out = []
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        try:
            out.append(str(ipaddress.ip_network(text, strict=False)))
        except ValueError:
            raise ValueError(f"networks in CIDR notation, like 10.0.0.0/8 ({text!r} is not "
                             "one)") from None
    if not out:
        raise ValueError("at least one network in CIDR notation, like 127.0.0.1/32")
    return tuple(out)


def _tls(name: str) -> Callable[[object], Any]:
    """A converter of :mod:`gateway.tls`, imported when used."""

    def convert(value: object) -> Any:
        from gateway import tls

        return getattr(tls, name)(value)

    convert.__doc__ = f"gateway.tls.{name}"
    return convert


def secret_cert(value: object) -> str:
    """A CURVE certificate with its secret key (``NAME.key_secret``, or ``NAME.key`` beside it),
    readable by its owner only."""
    from gateway.security import load_cert

    path = _path(value)
    load_cert(path, secret=True)
    return path


def public_cert(value: object) -> str:
    """A CURVE certificate file (its public key is used)."""
    from gateway.security import load_cert

    path = _path(value)
    load_cert(path)
    return path


def z85_key(value: object) -> str:
    """A CURVE public key as 40 Z85 characters."""
    from gateway.security import read_z85_key

    if not isinstance(value, str):
        raise ValueError("a CURVE public key, 40 Z85 characters")
    read_z85_key(value, "a CURVE public key")
    return value.strip()


def directory(value: object) -> str:
    """A readable directory."""
    import os

    path = _path(value)
    if not os.path.isdir(path) or not os.access(path, os.R_OK | os.X_OK):
        raise ValueError(f"a readable directory ({path!r} is not one)")
    return path


def allow_directory(value: object) -> str:
    """A readable directory of allowed client certificates that other users cannot write to."""
    from gateway.security import check_allow_directory

    path = directory(value)
    check_allow_directory(path)
    return path


def password_file(value: object) -> str:
    """A ``user=password`` file, readable by its owner only."""
    from gateway.security import read_passwords

    path = _path(value)
    read_passwords(path)
    return path


def secret_file(value: object) -> str:
    """A file holding one secret, readable by its owner only."""
    from gateway.security import read_secret_file

    path = _path(value)
    read_secret_file(path)
    return path


def text(value: object) -> str:
    """A string."""
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ValueError("a string")
    return str(value)


def _no_inline(hint: str) -> Callable[[object], Any]:
    def refuse(value: object) -> Any:
        raise ValueError(f"a file, not the secret itself: secrets are never written inline "
                         f"in a URL or TOML ({hint})")

    return refuse


@dataclass(frozen=True, slots=True)
class Option:
    """One endpoint setting: ``name`` as users write it, the :class:`SideOptions` ``field`` it
    sets, how its value is read, and the help line ``gateway bridge --help`` shows."""

    name: str
    field: str
    convert: Callable[[object], Any]
    help: str
    aliases: tuple[str, ...] = ()
    #: the wire families it applies to (``None``: every one); set on another one it is refused
    families: frozenset[str] | None = None
    #: a spelling that is refused with a hint (inline secrets); not listed as known
    refused: bool = False


_ZMTP = frozenset({"zmtp"})


OPTIONS: tuple[Option, ...] = (
    Option("hwm", "hwm", count,
           "high-water mark, messages queued per peer in each direction (libzmq SNDHWM/RCVHWM; "
           "default 1000)", ("sndhwm", "rcvhwm")),
    Option("maxmsgsize", "max_message_size", size,
           "largest message accepted from a peer, bytes (default [limits] max_message_size)",
           ("max_message_size",)),
    Option("reconnect_ivl", "reconnect_ivl", duration,
           "first wait before redialling a lost or refused peer (default 100ms)"),
    Option("reconnect_ivl_max", "reconnect_ivl_max", duration,
           "the wait doubles after each failed dial up to this (default 2s)"),
    Option("handshake_ivl", "handshake_timeout", duration,
           "a peer that has not finished its greeting/header after this is disconnected "
           "(default 10s)", ("handshake_timeout",)),
    Option("linger", "linger", duration,
           "on close, how long queued messages may still be sent (default 500ms)"),
    Option("backlog", "backlog", whole,
           "listen backlog of a bound endpoint (default [limits] backlog; 0: the system maximum)"),
    Option("heartbeat_ivl", "heartbeat_ivl", duration,
           "ZeroMQ only: send a PING on a connection that was silent this long (libzmq "
           "HEARTBEAT_IVL; default 0: no heartbeats)", ("heartbeat",), _ZMTP),
    Option("heartbeat_ttl", "heartbeat_ttl", ttl,
           "ZeroMQ only: the TTL put in our PINGs, the peer closes the connection when it hears "
           "nothing from us for this long (libzmq HEARTBEAT_TTL; default 0: none; at most "
           "6553.5 s)", (), _ZMTP),
    Option("heartbeat_timeout", "heartbeat_timeout", duration,
           "ZeroMQ only: after a PING, a connection that stays silent this long is closed "
           "(libzmq HEARTBEAT_TIMEOUT; default: heartbeat_ivl)", (), _ZMTP),
    Option("router_handover", "router_handover", flag,
           "ZeroMQ only: a peer reconnecting with a routing id that is still connected takes "
           "over the old connection instead of being refused (libzmq ROUTER_HANDOVER; default "
           "off, as libzmq; with CURVE or PLAIN only a peer with the same key or user takes "
           "over)", ("handover",), _ZMTP),
    Option("tcp_keepalive", "tcp_keepalive", flag,
           "TCP keepalive probes on every tcp connection (SO_KEEPALIVE; default on)"),
    Option("tcp_keepalive_idle", "tcp_keepalive_idle", seconds,
           "seconds of silence before the first keepalive probe (TCP_KEEPIDLE; default 60)"),
    Option("tcp_keepalive_intvl", "tcp_keepalive_intvl", seconds,
           "seconds between keepalive probes (TCP_KEEPINTVL; default 10)"),
    Option("tcp_keepalive_cnt", "tcp_keepalive_cnt", count,
           "unanswered probes before the connection is dropped (TCP_KEEPCNT; default 6)"),
    Option("pattern", "pattern", pattern,
           "the bridge's pattern: reqrep (default), pubsub, pipeline, pair, or pair1 (SP pair1); "
           "set on either side, the other side follows"),
    Option("subscribe", "subscribe", topics,
           "pub/sub: prefixes the gateway subscribes to at the publisher (a.,b.; empty: "
           "everything; default everything behind an SP front, only its clients' behind a "
           "ZeroMQ front)"),
    Option("curve_server", "curve_server", flag,
           "ZeroMQ: be the CURVE server (needs curve_cert; libzmq CURVE_SERVER)"),
    Option("curve_cert", "curve_cert", secret_cert,
           "ZeroMQ CURVE: this side's certificate, CZMQ zcert NAME.key_secret (mode 600)",
           ("curve_secretkey_file",)),
    Option("curve_serverkey", "curve_serverkey", z85_key,
           "ZeroMQ CURVE client: the server's public key, 40 Z85 characters"),
    Option("curve_server_cert", "curve_server_cert", public_cert,
           "ZeroMQ CURVE client: the server's public certificate (NAME.key)"),
    Option("curve_allow", "curve_allow", allow_directory,
           "ZeroMQ CURVE server: only clients whose NAME.key is in this directory (CZMQ zauth; "
           "not writable by other users; default: any client key)"),
    Option("plain_server", "plain_server", flag,
           "ZeroMQ: be the PLAIN server (libzmq PLAIN_SERVER; needs plain_passwords or "
           "plain_allow_any)"),
    Option("plain_passwords", "plain_passwords", password_file,
           "ZeroMQ PLAIN server: only these users, a file of user=password lines (mode 600)"),
    Option("plain_allow_any", "plain_allow_any", flag,
           "ZeroMQ PLAIN server without plain_passwords: take any user and password (default "
           "off: refuse everyone, as libzmq's PLAIN server without ZAP)"),
    Option("plain_username", "plain_username", text,
           "ZeroMQ PLAIN client: the user name (libzmq PLAIN_USERNAME)"),
    Option("plain_password_file", "plain_password_file", secret_file,
           "ZeroMQ PLAIN client: a file holding the password (mode 600)"),
    Option("allow", "allow", cidrs,
           "a bound endpoint accepts only clients from these networks: CIDR list, "
           "e.g. 127.0.0.1/32,10.0.0.0/8,::1/128 (default: anyone)"),
    Option("max_connections", "max_connections", count,
           "a bound endpoint refuses connections beyond this many at once (default 10000)"),
    Option("tls_cert", "tls_cert", _tls("readable_file"),
           "SP over TLS (sp+tls+tcp://): this side's certificate chain, PEM (needed to bind)"),
    Option("tls_key", "tls_key", _tls("private_file"),
           "SP over TLS: the certificate's private key, PEM, mode 600 (default: in the tls_cert "
           "file, which must then be mode 600)"),
    Option("tls_ca", "tls_ca", _tls("readable_file"),
           "SP over TLS: CA certificates to verify the peer with, PEM (default: the system's)"),
    Option("tls_verify", "tls_verify", _tls("verify_mode"),
           "SP over TLS: none, optional or required (default: none when bound, required when "
           "connecting, as nng)"),
    Option("tls_server_name", "tls_server_name", _tls("server_name"),
           "SP over TLS, connecting: the name the server's certificate must carry (default: "
           "the URL's host)"),
    Option("curve_secretkey", "curve_cert", _no_inline("use curve_cert=PATH"),
           "refused: name a certificate file with curve_cert", ("curve_secret_key",), refused=True),
    Option("curve_publickey", "curve_cert", _no_inline("use curve_cert=PATH, the pair's file"),
           "refused: name a certificate file with curve_cert", ("curve_public_key",), refused=True),
    Option("plain_password", "plain_password_file", _no_inline("use plain_password_file=PATH"),
           "refused: name a file with plain_password_file", refused=True),
)

#: settings the bridge reads itself; no adapter is asked to honour them
BRIDGE_FIELDS = frozenset({"pattern", "subscribe"})

#: every spelling (names and aliases) -> its row
BY_NAME: dict[str, Option] = {n: o for o in OPTIONS for n in (o.name, *o.aliases)}
_BY_FIELD: dict[str, Option] = {o.field: o for o in OPTIONS}


def known() -> str:
    return ", ".join(o.name for o in OPTIONS if not o.refused)


def lookup(key: str) -> Option:
    option = BY_NAME.get(key.lower())
    if option is None:
        raise ConfigError(f"unknown option {key!r} (known: backend, {known()})")
    return option


def read(items: Iterable[tuple[str, object]], where: str) -> dict[str, Any]:
    """``(key, value)`` pairs -> ``{SideOptions field: value}``; every mistake at once, each
    line saying ``where`` (the URL, or the bridge and table)."""
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}
    errors: list[str] = []
    at = f" in {where}" if where else ""
    for key, value in items:
        try:
            option = lookup(key)
        except ConfigError as exc:
            errors.append(f"{exc}{at}")
            continue
        if option.field in seen:
            errors.append(f"option {option.name} given twice ({seen[option.field]!r} and "
                          f"{key!r}){at}")
            continue
        seen[option.field] = key
        try:
            out[option.field] = option.convert(value)
        except ValueError as exc:
            if option.field.startswith(("curve_", "plain_")):  # a secret is never echoed
                errors.append(f"bad value for {option.name}{at}: {exc}")
                continue
            errors.append(f"bad value {value!r} for {option.name}{at}: expected {exc}")
    if errors:
        raise ConfigError("\n".join(errors))
    return out


def check_family(settings: Mapping[str, Any], family: str, where: str = "") -> None:
    """Refuse settings that do not apply to the wire ``family`` (SP has no heartbeats and no
    routing ids): one line naming them and ``where``."""
    if family == "any":  # both wires' pipes: each setting applies to its own (heartbeats: ZMTP)
        return
    wrong = sorted(_name_of(f) for f in settings
                   if (o := _BY_FIELD.get(f)) is not None and o.families is not None
                   and family not in o.families)
    if wrong:
        at = f" in {where}" if where else ""
        wire = "SP (nng/nanomsg)" if family == "sp" else family
        raise ConfigError(f"{', '.join(wrong)}{at}: not on {wire} endpoints (SP has no "
                          f"heartbeat and no routing ids; TCP keepalive applies: tcp_keepalive)")


def merged(url_options: Mapping[str, Any], table: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """A URL's options with a TOML table's (already read); a setting in both is an error."""
    both = sorted(set(url_options) & set(table))
    if both:
        names = ", ".join(_name_of(f) for f in both)
        at = f"{where}: " if where else ""
        raise ConfigError(f"{at}{names} set both in the URL and in the table; keep one")
    return {**url_options, **table}


def _name_of(field: str) -> str:
    return next(o.name for o in OPTIONS if o.field == field)


def describe(fields: Iterable[str]) -> str:
    return ", ".join(sorted(_name_of(f) for f in fields))


def help_text() -> str:
    """The options, one per line, for ``--help`` and the docs."""
    return "\n".join(textwrap.fill(o.help, 79, initial_indent=f"  {o.name:<18} ",
                                   subsequent_indent=" " * 21) for o in OPTIONS
                     if not o.refused)


__all__ = ["BRIDGE_FIELDS", "BY_NAME", "OPTIONS", "PATTERNS", "Option", "check_family", "count",
           "describe", "duration", "flag", "help_text", "known", "lookup", "merged", "pattern",
           "read", "seconds", "size", "topics", "ttl", "whole"]
