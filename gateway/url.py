"""Endpoint URLs: ``[@|>]wire+transport://address[?backend=...&option=value...]``.

``zmq+tcp://127.0.0.1:5555``, ``sp+ipc:///tmp/x.sock``, ``inproc://name`` (ZMTP wire);
``nng+`` and ``nanomsg+`` are aliases of ``sp+``, ``zmtp+`` of ``zmq+``; ``any+tcp://`` (bind
only) takes peers of both wires on one port, told apart by their first byte
(:mod:`gateway.wire.sniff`). CZMQ's convention:
``@url`` binds, ``>url`` connects; without a prefix the caller's default applies.

Users write ``zmq+``; inside the code the wire family is called ``zmtp`` (``Endpoint.family`` is
``"zmtp"``, ``"sp"`` or ``"any"``), and URLs given back keep the user's scheme.
Query options other than ``backend`` are the settings of :mod:`gateway.settings.schema`
(``?hwm=5000``), read for their syntax only: parsing reads no file, and which settings go with
which endpoint is :mod:`gateway.settings.checks`'s to say.

Values are percent-decoded (``%2F``; a ``+`` stays a plus), except a CURVE key: Z85 text uses
``& = % + ? # / :`` itself, so the 40 characters after ``curve_serverkey=`` are taken as they
are (``?curve_serverkey=rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7`` works as libzmq's docs
write it), unless they hold ``&name=`` with a known or secret-looking name (the next setting:
``?curve_serverkey=abc&plain_password=...`` is two settings, the second refused); a key that was
percent-encoded whole is decoded as any value. A URL in an error
message never shows the value of a secret (an inline ``plain_password`` or
``curve_secretkey``, refused anyway, or any secret-looking key, wherever it stands): it shows
``***``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote

from gateway.errors import ConfigError
from gateway.settings import schema

#: URL wire spelling -> the canonical wire family.
WIRE_ALIASES = {"zmq": "zmtp", "zmtp": "zmtp", "sp": "sp", "nng": "sp", "nanomsg": "sp",
                "any": "any"}
#: canonical wire family -> how a URL spells it when the user did not (``zmq+tcp://``).
URL_WIRE = {"zmtp": "zmq", "sp": "sp", "any": "any"}
#: the transports the built-in plugins add (for a hint only: which are loaded is the registry's)
KNOWN_TRANSPORTS = ("tcp", "ipc", "inproc", "tls+tcp", "ws", "wss")
_NAME = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-.")
#: query keys whose value is a Z85 CURVE key: 40 characters, taken as written
Z85_KEYS = frozenset({"curve_serverkey", "curve_secretkey", "curve_secret_key",
                      "curve_publickey", "curve_public_key"})
#: query keys whose value is never shown in a message (secrets, refused inline)
SECRET_KEYS = frozenset({"curve_secretkey", "curve_secret_key", "plain_password"})
_Z85_LEN = 40


@dataclass(frozen=True, slots=True)
class Endpoint:
    family: str  # the wire family: "zmtp", "sp", or "any" (one port for both)
    transport: str  # "tcp", "ipc", "inproc", or a plugin's scheme
    address: str  # "127.0.0.1:5555", "/tmp/x.sock", "name"
    mode: str | None = None  # "bind", "connect" or None (caller's default)
    backend: str | None = None
    scheme: str = ""  # the scheme as the user wrote it, kept in the URLs we give back
    options: tuple[tuple[str, Any], ...] = ()  # (SideOptions field, value), from the query

    @property
    def settings(self) -> dict[str, Any]:
        """The query's settings as ``{SideOptions field: value}``."""
        return dict(self.options)

    @property
    def lib_url(self) -> str:
        """The URL as libzmq / nng spell it: ``tcp://127.0.0.1:5555``."""
        return f"{self.transport}://{self.address}"

    @property
    def url(self) -> str:
        scheme = self.scheme or f"{URL_WIRE.get(self.family, self.family)}+{self.transport}"
        return f"{scheme}://{self.address}"

    def with_address(self, address: str) -> Endpoint:
        return replace(self, address=address)

    def host_port(self) -> tuple[str, int]:
        return split_host_port(self.address)


def split_host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"tcp address {schema.quoted(address)} needs host:port")
    host = host.strip("[]")
    if port == "*":
        return host, 0
    if not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"bad port {schema.quoted(port)} in {schema.quoted(address)}")
    return host, int(port)


_PAIR_IN_KEY = re.compile(r"&([\w%.+\-]+)(?:=|%3[dD])")


def _holds_a_pair(window: str) -> bool:
    """True when a Z85 window holds ``&name=`` with ``name`` a key the URL knows or one that
    looks like a secret's: that is the next setting, not 40 characters of a key (a key that
    really holds one is written percent-encoded)."""
    for match in _PAIR_IN_KEY.finditer(window):
        name = unquote(match.group(1)).lower()
        if (name == "backend" or name in schema.BY_NAME or name in schema.REFUSED
                or schema.looks_secret(name)):
            return True
    return False


def split_query(query: str) -> list[tuple[str, str]]:
    """``key=value&key=value`` -> pairs, percent-decoded (``+`` is a plus, not a space), a Z85
    key's 40 characters as written; ValueError when a part is not ``key=value``."""
    pairs: list[tuple[str, str]] = []
    pos, end = 0, len(query)
    while pos < end:
        eq = query.find("=", pos)
        amp = query.find("&", pos)
        if eq <= pos or (amp != -1 and amp < eq):
            raise ValueError(f"{query[pos:amp if amp != -1 else end]!r} is not key=value")
        key = unquote(query[pos:eq])
        start = eq + 1
        if key.lower() in Z85_KEYS:
            stop = start + _Z85_LEN
            if stop <= end and (stop == end or query[stop] == "&") and not _holds_a_pair(
                    query[start:stop]):
                pairs.append((key, query[start:stop]))
                pos = stop + 1
                continue
        stop = query.find("&", start)
        if stop == -1:
            stop = end
        pairs.append((key, unquote(query[start:stop])))
        pos = stop + 1
    return pairs


def redact(url: str) -> str:
    """``url`` as an error message may show it: the value after every secret-looking key is
    ``***`` wherever it stands (:func:`gateway.settings.schema.mask`)."""
    return schema.mask(url)


def parse(url: str, *, transports: frozenset[str] | None = None) -> Endpoint:
    """Parse an endpoint URL; raise ``ConfigError`` with a one-line reason when it is bad (the
    URL shown with its secrets masked, :func:`redact`)."""
    shown = redact(url)
    text = url.strip()
    mode = None
    if text[:1] in ("@", ">"):
        mode = "bind" if text[0] == "@" else "connect"
        text = text[1:]
    scheme, sep, rest = text.partition("://")
    if not sep or not scheme:
        raise ConfigError(f"bad endpoint {shown!r}: expected wire+transport://address, e.g. zmq+tcp://127.0.0.1:5555")
    address, _, query = rest.partition("?")
    wire_name, plus, transport = scheme.lower().partition("+")
    wire_shown, transport_shown = schema.quoted(wire_name), schema.quoted(transport)
    hint = wire_name if schema.mask(wire_name) == wire_name else "tcp"  # (never a secret)
    if not plus:
        if wire_name == "inproc":
            wire_name, transport = "zmtp", "inproc"
        elif wire_name in WIRE_ALIASES:  # zmq:// : the wire without its transport
            raise ConfigError(f"bad endpoint {shown!r}: say which transport, e.g. "
                              f"{wire_name}+tcp://")
        else:
            if wire_name not in KNOWN_TRANSPORTS:  # a typo of a transport, or of a wire?
                hint = schema.close_to(wire_name, KNOWN_TRANSPORTS) or "tcp"
            raise ConfigError(f"bad endpoint {shown!r}: say which wire, e.g. zmq+{hint}:// or sp+{hint}://")
    if not transport:
        raise ConfigError(f"bad endpoint {shown!r}: missing transport, e.g. {hint}+tcp://")
    wire = WIRE_ALIASES.get(wire_name)
    if wire is None:
        guess = schema.close_to(wire_name, WIRE_ALIASES)
        mean = f"did you mean {guess}+? " if guess else ""
        raise ConfigError(f"unknown wire {wire_shown} in {shown!r}: {mean}use zmq+ or sp+ "
                          "(nng+, nanomsg+), or any+ for a port that takes both")
    if transports is not None and transport not in transports:
        known = ", ".join(sorted(transports))
        guess = schema.did_you_mean(transport, transports)
        raise ConfigError(f"unknown transport {transport_shown} in {shown!r}{guess} "
                          f"(loaded: {known})")
    if not address:
        raise ConfigError(f"bad endpoint {shown!r}: missing address")
    if transport in ("tcp", "tls+tcp"):
        split_host_port(address)
    backend = None
    pairs: list[tuple[str, str]] = []
    try:
        items = split_query(query)
    except ValueError:
        raise ConfigError(f"bad query {shown.partition('?')[2]!r} in {shown!r}: expected "
                          "key=value&key=value") from None
    for key, value in items:
        if key != "backend":
            pairs.append((key, value))
        elif not value or not set(value) <= _NAME:
            raise ConfigError(f"bad backend {schema.quoted(value)} in {shown!r}: native, or an adapter's name")
        else:
            backend = value  # which adapters exist is the plugin registry's to say
    settings = schema.read(pairs, repr(shown)) if pairs else {}
    return Endpoint(wire, transport, address, mode, backend, scheme.lower(),
                    tuple(sorted(settings.items())))
