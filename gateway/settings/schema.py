"""Endpoint settings, declared once: :class:`SideOptions` *is* the schema.

Each user setting is one field of :class:`SideOptions` whose metadata says how users spell it
(``?hwm=5000`` on a URL, ``hwm = 5000`` in a bridge's ``front_options``/``back_options`` TOML
table), how its value is read (:mod:`gateway.settings.convert`: syntax only, never a file), its
unit, which wire families and which end (bound or connecting, front or back) it applies to, and
the help line; the default is the field's. :data:`SETTINGS`, the parser (:func:`read`), the
help text of ``gateway bridge --help``, the TOML keys and the settings reference in the docs are
all made from it, so a setting exists in one place. Which settings an adapter honours is the
adapter's to declare when it registers (``register(..., options=...)``); the native engine
honours every one. The "goes with" rules (a setting that needs another, or a family, transport
or end) are :mod:`gateway.settings.checks`; loading the files settings name is
:mod:`gateway.settings.files`.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any
from urllib.parse import unquote

from gateway.errors import ConfigError
from gateway.settings import convert as c

#: the kernel send buffer (SO_SNDBUF, which Linux doubles) of a TCP connection to a peer on
#: this host while ``sndbuf`` is unset: the OS's autotuning grows one to MiB there, and the
#: peers spent 25-40 % more CPU per request copying bytes that waited that long
#: (docs/design.md, "Kernel buffers"); across a network the OS's own is kept, as its RTT
#: needs it
LOCAL_SNDBUF = 256 * 1024

_ZMTP = frozenset({"zmtp"})
_SP = frozenset({"sp"})


@dataclass(frozen=True, slots=True)
class Setting:
    """One endpoint setting, as the schema declares it (see the module doc)."""

    name: str  # as users write it
    field: str  # the SideOptions field it sets
    convert: c.Converter
    help: str
    default: Any = None
    unit: str = ""  # messages, bytes, seconds (ms in a URL), ...
    aliases: tuple[str, ...] = ()
    #: wire families it applies to (None: both); set on another one it is refused
    families: frozenset[str] | None = None
    #: "bind": only a listening endpoint; "connect": only a dialling one; "": either
    placement: str = ""
    #: "front" or "back": only that side of a bridge; "": either
    side: str = ""
    #: read by the bridge itself, never handed to an adapter (pattern, subscribe)
    bridge: bool = False
    #: a secret: its value is never shown in a message
    secret: bool = False


def setting(default: Any, convert: c.Converter, help: str, *, name: str = "", unit: str = "",
            aliases: tuple[str, ...] = (), families: frozenset[str] | None = None,
            placement: str = "", side: str = "", bridge: bool = False,
            secret: bool = False) -> Any:
    """A SideOptions field that users can set (its metadata is the rest of the declaration)."""
    meta = dict(name=name, convert=convert, help=help, unit=unit, aliases=aliases,
                families=families, placement=placement, side=side, bridge=bridge, secret=secret)
    return field(default=default, metadata={"setting": meta})


@dataclass(frozen=True, slots=True)
class SideOptions:
    """A bridge side's (or a native socket's) settings, in the gateway's terms; adapters
    translate them to their library's options. Fields with a ``setting`` are what users write
    (see the module doc); the others are set by the bridge (limits, its role) or loaded from
    the files the settings name (``security``, ``tls``: adapters use these, never the files)."""

    hwm: int = setting(1000, c.count, "high-water mark, messages queued per peer in each "
                       "direction (libzmq SNDHWM/RCVHWM)", unit="messages",
                       aliases=("sndhwm", "rcvhwm"))
    max_message_size: int = setting(1 << 20, c.size, "largest message accepted from a peer "
                                    "(nng's default; a ZeroMQ frame counts at least 2 bytes, "
                                    "so empty frames are not free; at most 2**62; [limits] "
                                    "max_message_size sets it for every bridge)",
                                    name="maxmsgsize", unit="bytes",
                                    aliases=("max_message_size",))
    reconnect_ivl: float = setting(0.1, c.duration, "first wait before redialling a lost or "
                                   "refused peer", unit="seconds")
    reconnect_ivl_max: float = setting(2.0, c.duration, "the wait doubles after each failed "
                                       "dial up to this", unit="seconds")
    handshake_timeout: float = setting(10.0, c.duration, "a peer that has not finished its "
                                       "greeting/header after this is disconnected",
                                       name="handshake_ivl", unit="seconds",
                                       aliases=("handshake_timeout",))
    linger: float = setting(0.5, c.duration, "on close, how long queued messages may still be "
                            "sent", unit="seconds")
    immediate: bool = setting(False, c.flag, "queue messages only on completed connections "
                              "(libzmq IMMEDIATE): while a peer's connection is in progress "
                              "or down, a send waits in the gateway instead of in that "
                              "peer's queue (pyzmq; the native engine always does so, "
                              "whatever the value)")
    backlog: int | None = setting(None, c.whole, "listen backlog of a bound endpoint (0 or "
                                  "unset: the system maximum)", unit="connections",
                                  placement="bind")
    heartbeat_ivl: float = setting(0.0, c.duration, "ZeroMQ only: send a PING on a connection "
                                   "that was silent this long (libzmq HEARTBEAT_IVL; 0: no "
                                   "heartbeats)", unit="seconds", aliases=("heartbeat",),
                                   families=_ZMTP)
    heartbeat_ttl: float = setting(0.0, c.ttl, "ZeroMQ only: the TTL put in our PINGs, the "
                                   "peer closes the connection when it hears nothing from us "
                                   "for this long (libzmq HEARTBEAT_TTL; 0: none; at most "
                                   "6553.5 s)", unit="seconds", families=_ZMTP)
    heartbeat_timeout: float | None = setting(None, c.duration, "ZeroMQ only: after a PING, a "
                                              "connection that stays silent this long is "
                                              "closed (libzmq HEARTBEAT_TIMEOUT; unset: "
                                              "heartbeat_ivl)", unit="seconds", families=_ZMTP)
    router_handover: bool = setting(False, c.flag, "ZeroMQ only: a peer reconnecting with a "
                                    "routing id that is still connected takes over the old "
                                    "connection instead of being refused (libzmq "
                                    "ROUTER_HANDOVER, off as libzmq's; with CURVE or PLAIN "
                                    "only a peer with the same key or user takes over)",
                                    aliases=("handover",), families=_ZMTP, side="front")
    tcp_keepalive: bool = setting(True, c.flag, "TCP keepalive probes on every tcp connection "
                                  "(SO_KEEPALIVE)")
    tcp_keepalive_idle: float = setting(60.0, c.seconds, "seconds of silence before the first "
                                        "keepalive probe (TCP_KEEPIDLE)", unit="seconds (s)")
    tcp_keepalive_intvl: float = setting(10.0, c.seconds, "seconds between keepalive probes "
                                         "(TCP_KEEPINTVL)", unit="seconds (s)")
    tcp_keepalive_cnt: int = setting(6, c.probes, "unanswered probes before the connection is "
                                     "dropped (TCP_KEEPCNT)", unit="probes")
    sndbuf: int | None = setting(None, c.buffer_size, "kernel send buffer of each connection "
                                 "(libzmq SNDBUF: SO_SNDBUF, which Linux doubles; 0: the OS's "
                                 "own, autotuned; unset: 256k toward a TCP peer on this host, "
                                 "the OS's own toward others)", unit="bytes")
    rcvbuf: int = setting(0, c.buffer_size, "kernel receive buffer of each connection "
                          "(libzmq RCVBUF: SO_RCVBUF, which Linux doubles; 0: the OS's own, "
                          "autotuned)", unit="bytes")
    pattern: str = setting("", c.pattern, "the bridge's pattern: reqrep (the default), "
                           "pubsub, pipeline, pair, or pair1 (SP pair1); set on either side, "
                           "the other side follows", bridge=True)
    subscribe: tuple[bytes, ...] | None = setting(
        None, c.topics, "pub/sub: prefixes the gateway subscribes to at the publisher (a.,b.; "
        "empty: everything; unset: everything behind an SP front, only its clients' behind a "
        "ZeroMQ front)", bridge=True)
    curve_server: bool = setting(False, c.flag, "ZeroMQ: be the CURVE server (needs "
                                 "curve_cert; libzmq CURVE_SERVER)", families=_ZMTP)
    curve_cert: str | None = setting(None, c.path, "ZeroMQ CURVE: this side's certificate, CZMQ "
                                     "zcert NAME.key_secret (mode 600)", unit="path",
                                     aliases=("curve_secretkey_file",), families=_ZMTP)
    curve_serverkey: str | None = setting(None, c.z85_key, "ZeroMQ CURVE client: the server's "
                                          "public key, 40 Z85 characters (written as they "
                                          "are)", families=_ZMTP, placement="")
    curve_server_cert: str | None = setting(None, c.path, "ZeroMQ CURVE client: the server's "
                                            "public certificate (NAME.key)", unit="path",
                                            families=_ZMTP)
    curve_allow: str | None = setting(None, c.path, "ZeroMQ CURVE server: only clients whose "
                                      "NAME.key is in this directory (CZMQ zauth; not writable "
                                      "by other users; unset: any client key)", unit="path",
                                      families=_ZMTP)
    plain_server: bool = setting(False, c.flag, "ZeroMQ: be the PLAIN server (libzmq "
                                 "PLAIN_SERVER; needs plain_passwords or plain_allow_any)",
                                 families=_ZMTP)
    plain_passwords: str | None = setting(None, c.path, "ZeroMQ PLAIN server: only these "
                                          "users, a file of user=password lines (mode 600)",
                                          unit="path", families=_ZMTP)
    plain_allow_any: bool = setting(False, c.flag, "ZeroMQ PLAIN server without "
                                    "plain_passwords: take any user and password (off: refuse "
                                    "everyone, as libzmq's PLAIN server without ZAP)",
                                    families=_ZMTP)
    plain_username: str | None = setting(None, c.text, "ZeroMQ PLAIN client: the user name "
                                         "(libzmq PLAIN_USERNAME)", families=_ZMTP)
    plain_password_file: str | None = setting(None, c.path, "ZeroMQ PLAIN client: a file "
                                              "holding the password (mode 600)", unit="path",
                                              families=_ZMTP)
    allow: tuple[str, ...] | None = setting(None, c.cidrs, "accept only clients from these "
                                            "networks: CIDR list, e.g. 127.0.0.1/32,"
                                            "10.0.0.0/8,::1/128 (unset: anyone)",
                                            placement="bind")
    origin: tuple[str, ...] | None = setting(
        None, c.origins, "WebSocket (ws, wss) listeners: the web pages that may connect, by "
        "their Origin: https://app.example.com,http://127.0.0.1:8080 (* any page, null a "
        "file); others are answered 403 (unset: only pages of the listener's own origin; "
        "clients that send no Origin, not browsers, are never refused by it)",
        placement="bind")
    max_connections: int | None = setting(10_000, c.count, "refuse connections beyond this "
                                          "many at once", unit="connections",
                                          placement="bind")
    tls_cert: str | None = setting(None, c.path, "SP over TLS (sp+tls+tcp://, sp+wss://): this "
                                   "side's certificate chain, PEM (needed to bind)",
                                   unit="path", families=_SP)
    tls_key: str | None = setting(None, c.path, "SP over TLS: the certificate's private key, "
                                  "PEM, mode 600 (unset: in the tls_cert file, which must then "
                                  "be mode 600)", unit="path", families=_SP)
    tls_ca: str | None = setting(None, c.path, "SP over TLS: CA certificates to verify the peer "
                                 "with, PEM (unset: the system's)", unit="path", families=_SP)
    tls_verify: str | None = setting(None, c.verify_mode, "SP over TLS: none, optional or "
                                     "required (unset: none when bound, required when "
                                     "connecting, as nng)", families=_SP)
    tls_server_name: str | None = setting(None, c.host_name, "SP over TLS, connecting: the name "
                                          "the server's certificate must carry (unset: the "
                                          "URL's host)", families=_SP, placement="connect")
    # -- set by the bridge ([limits], its role), not per endpoint ------------------------------
    hop_limit: int = 8  # SP TTL on a raw rep front (nng's ttl-max), [limits] hop_limit
    #: the bytes each of a request-reply bridge's pending tables may hold (the ZeroMQ envelopes
    #: parked under tokens, the envelopes of requests in flight), beside pending_tokens'
    #: count: a full token table refuses (table-full), a full in-flight table forgets its
    #: oldest (token-expired). [limits] pending_bytes
    pending_bytes: int = 64 << 20
    message_timeout: float = 10.0  # a started message must be whole within, [limits]
    router_mandatory: bool = False  # a routed send to an unknown or full peer raises
    # -- loaded once per start or reload from the files above (gateway.settings.files) ---------
    security: Any = None  # gateway.security.Security, or None: NULL
    tls: Any = None  # gateway.tls.TlsSettings, or None: not TLS


#: refused spellings: an inline secret, with the setting to use instead
REFUSED: dict[str, tuple[str, str]] = {
    "curve_secretkey": ("curve_cert", "use curve_cert=PATH"),
    "curve_secret_key": ("curve_cert", "use curve_cert=PATH"),
    "curve_publickey": ("curve_cert", "use curve_cert=PATH, the pair's file"),
    "curve_public_key": ("curve_cert", "use curve_cert=PATH, the pair's file"),
    "plain_password": ("plain_password_file", "use plain_password_file=PATH"),
}


def _setting_of(f: Field[Any]) -> Setting:
    meta = dict(f.metadata["setting"])
    name = meta.pop("name") or f.name
    default = None if f.default is MISSING else f.default
    return Setting(name=name, field=f.name, default=default, **meta)


#: every user setting, in the order of the schema
SETTINGS: tuple[Setting, ...] = tuple(_setting_of(f) for f in fields(SideOptions)
                                      if "setting" in f.metadata)
#: every spelling (names and aliases) -> its setting
BY_NAME: dict[str, Setting] = {n: s for s in SETTINGS for n in (s.name, *s.aliases)}
BY_FIELD: dict[str, Setting] = {s.field: s for s in SETTINGS}
#: the SideOptions defaults, for code that needs one (Limits, the engine)
DEFAULTS = SideOptions()
#: settings the bridge reads itself; no adapter is asked to honour them
BRIDGE_FIELDS = frozenset(s.field for s in SETTINGS if s.bridge)


#: what makes a key look like a secret's (matched anywhere in its lower-cased, decoded name)
_SECRET_WORD = re.compile(r"secret|pass|pwd|private")
#: the words of a secret's key a misspelling of which looks like one too (when unsure, mask)
_SECRET_WORDS = ("password", "passwd", "secret", "private", "passphrase")
_SECRET_TRIGRAMS = frozenset(w[i:i + 3] for w in _SECRET_WORDS for i in range(len(w) - 2))
#: ``key=`` (or ``key%3D``, or ``'key':`` as a dict's repr shows it) anywhere in a text: the key
#: is the run of name characters before it
_ASSIGN = re.compile(r"([\w%.+\-]*)(?:=|%3[dD]|['\"]?:)")
#: where a masked value ends: the next ``&key=``
_NEXT_PAIR = re.compile(r"&[\w%.+\-]*(?:=|%3[dD])")
_Z85_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                       ".-:+=^!/*?&<>()[]{}@%$#")


def looks_secret(key: str) -> bool:
    """True when the value of ``key`` must never be shown: an inline secret the schema
    refuses (``plain_password``, ``curve_secretkey``...) or any other name that looks like
    one (``plainpassword``, ``curve_secret``, ``db_pwd``, a misspelt ``plain_pasword``...);
    the settings that name a file
    (``plain_password_file``, ``plain_passwords``) are not secrets."""
    name = unquote(key).strip().lower()
    found = BY_NAME.get(name)
    if found is not None and not found.secret:
        return False
    return _SECRET_WORD.search(name) is not None or _misspelt_secret(name)


@functools.lru_cache(maxsize=512)
def _misspelt_secret(name: str) -> bool:
    """True when a part of ``name`` is one of :data:`_SECRET_WORDS` misspelt (a letter
    dropped, added, swapped or changed: ``plain_pasword``, ``plainpasword``, ``curve_secrtkey``).
    A name sharing no three letters in a row with those words is none (one edit leaves some)."""
    if not any(name[i:i + 3] in _SECRET_TRIGRAMS for i in range(len(name) - 2)):
        return False
    from difflib import SequenceMatcher

    for word in _SECRET_WORDS:
        matcher = SequenceMatcher(None, b=word)
        for size in (len(word) - 1, len(word), len(word) + 1):
            for start in range(max(1, len(name) - size + 1)):
                matcher.set_seq1(name[start:start + size])
                if matcher.ratio() >= 0.8:
                    return True
    return False


def mask(text: str) -> str:
    """``text`` (a URL, a query, a setting's value) as a message may show it: the value after
    every secret-looking ``key=`` is ``***``, wherever it stands (behind a ``;`` inside another
    value, before the ``://``, in the window of a Z85 key), up to the next ``&key=`` (a Z85
    key's 40 characters first) or the end; when unsure, more is masked, never less."""
    spans: list[tuple[int, int]] = []
    for match in _ASSIGN.finditer(text):
        if not looks_secret(match.group(1)):
            continue
        start = match.end()
        window = text[start:start + 40]
        after = start + 40 if len(window) == 40 and set(window) <= _Z85_CHARS else start
        following = _NEXT_PAIR.search(text, after)
        spans.append((start, following.start() if following else len(text)))
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end in sorted(spans):
        if start >= pos:  # (a span inside or across a masked one only widens it)
            out.append(text[pos:start] + "***")
        pos = max(pos, end)
    return "".join(out) + text[pos:]


def quoted(value: object) -> str:
    """``repr(value)`` with its secrets masked (:func:`mask`), for a message."""
    return repr(mask(value)) if isinstance(value, str) else mask(repr(value))


def known() -> str:
    return ", ".join(s.name for s in SETTINGS)


def close_to(word: str, choices: Iterable[str]) -> str | None:
    """The choice ``word`` was most likely meant to be (difflib), or None."""
    import difflib

    found = difflib.get_close_matches(word.lower(), list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``": did you mean 'hwm'?"`` for a close choice, else ``""``."""
    found = close_to(word, choices)
    return f": did you mean {found!r}?" if found else ""


#: the other spellings of each setting nng and libzmq users bring along: a hint, never accepted
FOREIGN: dict[str, str] = {"recvmaxsz": "maxmsgsize", "recv_max_size": "maxmsgsize",
                           "sendhwm": "hwm", "recvhwm": "hwm", "reconnmint": "reconnect_ivl",
                           "reconnmaxt": "reconnect_ivl_max"}


def lookup(key: str, at: str = "") -> Setting:
    """The setting ``key`` names; else a ConfigError saying ``at`` (`` in URL``) and the
    setting most likely meant, or every one when none is close."""
    found = BY_NAME.get(key.lower())
    if found is None:
        guess = FOREIGN.get(key.lower()) or close_to(key, ["backend", *BY_NAME, *REFUSED])
        guess = REFUSED[guess][0] if guess in REFUSED else guess  # curve_secret: curve_cert
        if guess:
            raise ConfigError(f"unknown option {quoted(key)}{at}: did you mean {guess!r}? "
                              "(`gateway settings` lists every setting)")
        raise ConfigError(f"unknown option {quoted(key)} (known: backend, {known()}){at}")
    return found


def read(items: Iterable[tuple[str, object]], where: str,
         errors: list[str] | None = None) -> dict[str, Any]:
    """``(key, value)`` pairs -> ``{SideOptions field: value}``; every mistake at once, each
    line saying ``where`` (the URL, or the bridge and table). No file is read. With ``errors``
    given, the mistakes go there and the good settings are returned (a caller that goes on to
    find the mistakes of the next stage); else they are raised as one ConfigError."""
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}
    collect = errors is not None
    errors = [] if errors is None else errors
    at = f" in {where}" if where else ""
    for key, value in items:
        lower = key.lower()
        if lower in REFUSED:
            target, hint = REFUSED[lower]
            errors.append(f"bad value for {lower}{at}: a file, not the secret itself: secrets "
                          f"are never written inline in a URL or TOML ({hint})")
            continue
        try:
            found = lookup(key, at)
        except ConfigError as exc:
            errors.append(str(exc))
            continue
        if found.field in seen:
            errors.append(f"option {found.name} given twice ({seen[found.field]!r} and "
                          f"{key!r}){at}")
            continue
        seen[found.field] = key
        try:
            out[found.field] = found.convert(value)
        except ValueError as exc:
            if found.secret or found.field.startswith(("curve_", "plain_")):
                errors.append(f"bad value for {found.name}{at}: {exc}")  # never echoed
                continue
            shown = quoted(value)
            errors.append(f"bad value {shown} for {found.name}{at}: expected {mask(str(exc))}")
    if errors and not collect:
        raise ConfigError("\n".join(errors))
    return out


def merged(url_options: Mapping[str, Any], table: Mapping[str, Any],
           where: str = "") -> dict[str, Any]:
    """A URL's settings with a TOML table's (already read); a setting in both is an error."""
    both = sorted(set(url_options) & set(table))
    if both:
        at = f"{where}: " if where else ""
        raise ConfigError(f"{at}{describe(both)} set both in the URL and in the table; keep one")
    return {**url_options, **table}


def describe(fields_: Iterable[str]) -> str:
    """Setting names of SideOptions fields, sorted, for a message."""
    return ", ".join(sorted(BY_FIELD[f].name if f in BY_FIELD else f for f in fields_))


def default_text(s: Setting) -> str:
    """A setting's default as the help and the docs show it."""
    value = s.default
    if value is None:
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    if s.unit == "seconds" and isinstance(value, float):
        return f"{value * 1000:g}ms" if 0 < value < 1 else f"{value:g}s"
    if s.unit == "bytes" and value >= 1 << 20 and not value % (1 << 20):
        return f"{value >> 20} MiB"
    if isinstance(value, str) and not value:
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)


def help_text() -> str:
    """The settings, one per line with its default, for ``--help``."""
    lines = []
    for s in SETTINGS:
        default = default_text(s)
        text = s.help + (f" (default {default})" if default else "")
        lines.append(textwrap.fill(text, 79, initial_indent=f"  {s.name:<20} ",
                                   subsequent_indent=" " * 23))
    return "\n".join(lines)


__all__ = ["BRIDGE_FIELDS", "BY_FIELD", "BY_NAME", "DEFAULTS", "FOREIGN", "REFUSED", "SETTINGS",
           "Setting", "SideOptions", "close_to", "default_text", "describe", "did_you_mean",
           "help_text", "known", "looks_secret",
           "lookup", "mask", "merged", "quoted", "read", "setting"]
