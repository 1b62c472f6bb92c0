"""How a setting's value is read from a URL query or TOML: syntax only, never a file.

Each converter takes what the user wrote (a string from a URL, a string, number, boolean or
list from TOML) and returns the value, or raises ``ValueError`` with what would do (the caller
adds the key and where). Files named by settings are checked when they are loaded, once per
start or reload (:mod:`gateway.settings.files`), not here.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*$")
_SIZE = re.compile(r"^\s*([0-9]+)\s*(b|k|kb|kib|m|mb|mib)?\s*$", re.IGNORECASE)
_UNITS = {None: 0.001, "ms": 0.001, "s": 1.0, "m": 60.0}
_SIZES = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20}
#: the largest byte size a setting or limit takes (``max_message_size``, ``pending_bytes``):
#: 2**62, so that a size and what a frame adds to it stay within a signed 64-bit integer (the
#: compiled kernel's); beyond it a value is refused, naming the key
SIZE_MAX = 1 << 62
_Z85 = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                 ".-:+=^!/*?&<>()[]{}@%$#")

#: what ``?pattern=`` accepts (``pair1``: SP pair1, with its hop-count header; SP side only)
PATTERNS = ("reqrep", "pubsub", "pipeline", "pair", "pair1")
#: what ``?tls_verify=`` accepts
VERIFY = ("none", "optional", "required")

Converter = Callable[[object], Any]


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


#: the largest TCP_KEEPIDLE/TCP_KEEPINTVL (seconds) and TCP_KEEPCNT Linux takes (its
#: MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL, MAX_TCP_KEEPCNT): past them setsockopt fails (EINVAL)
KEEPALIVE_SECONDS_MAX = 32767
KEEPALIVE_PROBES_MAX = 127


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
    if result > KEEPALIVE_SECONDS_MAX:
        raise ValueError(f"seconds: at most {KEEPALIVE_SECONDS_MAX} (Linux's TCP_KEEPIDLE and "
                         "TCP_KEEPINTVL limit)")
    return result


def probes(value: object) -> int:
    """A count of TCP keepalive probes: 1 to :data:`KEEPALIVE_PROBES_MAX` (TCP_KEEPCNT)."""
    out = count(value)
    if out > KEEPALIVE_PROBES_MAX:
        raise ValueError(f"probes: 1 to {KEEPALIVE_PROBES_MAX} (Linux's TCP_KEEPCNT limit)")
    return out


def ttl(value: object) -> float:
    """A duration (as :func:`duration`) that fits a ZMTP PING's TTL: at most 6553.5 s, sent in
    tenths of a second (RFC 37)."""
    result = duration(value)
    if result > 6553.5:
        raise ValueError("a duration of at most 6553.5 s (a PING carries tenths of a second in "
                         "16 bits)")
    return result


def _whole(value: object, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"a whole number, at least {least}")
    text = str(value).strip()
    if not text.isdigit() or int(text) < least:
        raise ValueError(f"a whole number, at least {least}")
    return int(text)


def count(value: object) -> int:
    """A whole number, at least 1."""
    return _whole(value, 1)


def whole(value: object) -> int:
    """A whole number, at least 0."""
    return _whole(value, 0)


def size(value: object) -> int:
    """Bytes: a whole number, or with a unit (``64k``, ``1MiB``), 1 to :data:`SIZE_MAX`."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("bytes: a whole number, or 64k, 1MiB")
    match = _SIZE.match(str(value))
    if match is None or int(match.group(1)) < 1:
        raise ValueError("bytes: a whole number, or 64k, 1MiB")
    out = int(match.group(1)) * _SIZES[(match.group(2) or "").lower()]
    if out > SIZE_MAX:
        raise ValueError(f"bytes: at most 2**62 ({SIZE_MAX})")
    return out


#: the largest kernel buffer a setting takes: ``SO_SNDBUF``/``SO_RCVBUF`` are C ints, doubled
#: by Linux (which caps them at ``net.core.wmem_max``/``rmem_max`` anyway)
BUFFER_MAX = 1 << 30


def buffer_size(value: object) -> int:
    """A kernel buffer in bytes (``256k``, ``4MiB``), up to :data:`BUFFER_MAX`; ``0`` (or
    libzmq's ``-1``): the OS's own, autotuned."""
    if value in (0, -1, "0", "-1"):
        return 0
    try:
        out = size(value)
    except ValueError:
        raise ValueError("bytes: 0 or -1 (the OS's own), or a size such as 256k, 4MiB") from None
    if out > BUFFER_MAX:
        raise ValueError(f"bytes: at most 1GiB ({BUFFER_MAX})")
    return out


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


def one_of(choices: tuple[str, ...]) -> Converter:
    """One of ``choices`` (any case)."""

    def convert(value: object) -> str:
        text = str(value).strip().lower()
        if isinstance(value, bool) or text not in choices:
            raise ValueError(" | ".join(choices))
        return text

    convert.__doc__ = " | ".join(choices)
    return convert


pattern = one_of(PATTERNS)
verify_mode = one_of(VERIFY)


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


def path(value: object) -> str:
    """A file or directory path (checked when it is loaded, at start)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a file path")
    return value.strip()


def cidrs(value: object) -> tuple[str, ...]:
    """Networks in CIDR notation, comma-separated (or a TOML list); a bare address is a /32
    (/128)."""
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


#: a port a browser leaves out of an origin
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def normal_origin(text: str) -> str:
    """An origin as browsers serialise it (RFC 6454): ``scheme://host[:port]``, lower-cased,
    without a default port or a trailing slash; anything else (``null``) lower-cased."""
    text = text.strip().lower().rstrip("/")
    if "://" not in text:
        return text
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        return text
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    default = _DEFAULT_PORTS.get(parts.scheme)
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")


def origins(value: object) -> tuple[str, ...]:
    """Web origins a ws listener takes pages from, comma-separated (or a TOML list):
    ``https://app.example.com``, ``http://127.0.0.1:8080``, ``null`` (a page opened from a
    file), or ``*`` (any page)."""
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    out = []
    for item in items:
        text = normal_origin(str(item))
        if not text:
            continue
        if text not in ("*", "null"):
            parts = urlsplit(text)
            if parts.scheme not in ("http", "https") or not parts.hostname \
                    or normal_origin(text) != text or parts.path:
                raise ValueError(f"origins like https://app.example.com or "
                                 f"http://127.0.0.1:8080, null or * ({str(item).strip()!r} "
                                 "is not one)")
        out.append(text)
    if not out:
        raise ValueError("at least one origin, like https://app.example.com")
    return tuple(dict.fromkeys(out))


def z85_key(value: object) -> str:
    """A CURVE public key: 40 Z85 characters."""
    text = value.strip() if isinstance(value, str) else ""
    if len(text) != 40:
        raise ValueError(f"a CURVE public key, 40 Z85 characters, not {len(text)}")
    if not set(text) <= _Z85:
        raise ValueError("a CURVE public key in Z85 (a character is not Z85's)")
    return text


def text(value: object) -> str:
    """A string."""
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ValueError("a string")
    return str(value)


def host_name(value: object) -> str:
    """A host name (no spaces)."""
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
        raise ValueError("a host name")
    return value.strip()


def refused(hint: str) -> Converter:
    """A spelling that is never accepted: a secret written inline (the value is never shown)."""

    def refuse(value: object) -> Any:
        raise ValueError(f"a file, not the secret itself: secrets are never written inline "
                         f"in a URL or TOML ({hint})")

    return refuse


__all__ = ["BUFFER_MAX", "KEEPALIVE_PROBES_MAX", "KEEPALIVE_SECONDS_MAX", "PATTERNS", "VERIFY",
           "Converter", "buffer_size", "cidrs", "count", "duration", "flag", "host_name",
           "one_of", "path", "pattern", "probes", "refused", "seconds", "size", "text", "topics", "ttl",
           "verify_mode", "whole", "z85_key"]
