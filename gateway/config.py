"""``gateway.toml``: several bridges, limits and logging in one file (read with tomllib).

    [gateway]
    log_format = "console"          # or "json"
    metrics = "127.0.0.1:9100"      # optional Prometheus endpoint
    unknown_peers = "waiting"       # /readyz and a back end that cannot tell: or "ready"

    [limits]                        # all optional; these are the defaults
    max_message_size = 1048576
    hop_limit = 8
    pending_tokens = 100000
    pending_bytes = 67108864        # bytes of envelopes each pending table may hold (64 MiB)
    token_ttl = 60.0
    grace = 2.0
    message_timeout = 10.0          # a message started but incomplete after it closes its pipe
    backlog = 0                     # listen backlog of native fronts; 0: the system maximum

    [[bridge]]
    name = "orders"
    front = "@zmq+tcp://0.0.0.0:5555"
    back = ">sp+tcp://127.0.0.1:6000"
    back_options = { reconnect_ivl = 100, reconnect_ivl_max = "5s" }   # or ?key=value on a URL
    control = "@zmq+tcp://127.0.0.1:7001"   # optional: zmq_proxy_steerable's commands
    capture = "@zmq+tcp://127.0.0.1:7002"   # optional: a PUB of every forwarded message

    [plugins]                       # free-form: plugins read it in their gateway_configure hook

Every mistake is a :class:`ConfigError` with one line saying what and where (the CLI prints it
and exits 2): unknown sections and keys, wrong types, limits out of range, settings that do not
parse. What needs the plugins (transports, backends) and the settings that go together is
checked when the bridges are planned (:func:`gateway.device.plan.plan`), every mistake of
every bridge at once too (:func:`gateway.device.check`); no file is read here.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields
from typing import Any

from gateway.errors import ConfigError
from gateway.settings import convert, schema
from gateway.url import parse, split_host_port

_DEFAULTS = schema.DEFAULTS


@dataclass(frozen=True)
class Limits:
    """The bridge's limits (docs/design.md); every one configurable. The endpoint ones take
    their defaults from the settings schema."""

    max_message_size: int = _DEFAULTS.max_message_size
    hop_limit: int = _DEFAULTS.hop_limit
    pending_tokens: int = 100_000
    pending_bytes: int = _DEFAULTS.pending_bytes
    token_ttl: float = 60.0
    grace: float = 2.0  # drain time on SIGINT/SIGTERM
    message_timeout: float = _DEFAULTS.message_timeout  # a started message must be whole within
    backlog: int = 0  # listen backlog of native fronts; 0: the system maximum


@dataclass(frozen=True)
class BridgeSpec:
    """What a bridge is made of: the one description the config, the CLI, the supervisor, the
    workers and :class:`gateway.device.Bridge` share; two equal specs are the same bridge
    (kept across a reload)."""

    name: str
    front: str
    back: str
    limits: Limits = field(default_factory=Limits)
    forwarder: str = "auto"
    #: endpoint settings beyond the URL's, ``(SideOptions field, value)`` pairs (TOML's
    #: ``front_options``/``back_options`` read by :func:`gateway.settings.schema.read`)
    front_options: tuple[tuple[str, Any], ...] = ()
    back_options: tuple[tuple[str, Any], ...] = ()
    #: zmq_proxy_steerable's control endpoint (PAUSE, RESUME, TERMINATE, STATISTICS) and
    #: capture endpoint (a PUB of every forwarded message); "": none (gateway.device.steer)
    control: str = ""
    capture: str = ""
    capture_format: str = "frames"  # "frames" (libzmq's) or "records" (gateway capture's)
    #: the bridge as planned when its spec was checked (:func:`gateway.device.planned`), so a
    #: start or a reload plans it, and reads its files, once; not part of what the bridge is
    planned: Any = field(default=None, compare=False, repr=False)


@dataclass
class Config:
    bridges: list[BridgeSpec]
    limits: Limits = field(default_factory=Limits)
    log_format: str = "console"
    log_level: str = "info"
    metrics: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    unknown_peers: str = "waiting"  # /readyz and a back end that cannot tell (gateway.observe)


def _limits_checked(table: dict[str, Any], base: Limits | None,
                    errors: list[str]) -> Limits:
    values = {f.name: getattr(base or Limits(), f.name) for f in fields(Limits)}
    known = set(values)
    for key, value in table.items():
        if key not in known:
            errors.append(f"unknown limit {schema.quoted(key)}{schema.did_you_mean(key, known)} "
                          f"(known: {', '.join(sorted(known))})")
            continue
        if (not isinstance(value, int | float) or isinstance(value, bool)
                or not math.isfinite(value) or value < 0 or (value == 0 and key != "backlog")):
            errors.append(f"limit {key} must be a positive number, not {schema.quoted(value)}")
            continue
        if isinstance(values[key], int) and value != int(value):
            errors.append(f"limit {key} must be a whole number, not {schema.quoted(value)}")
            continue
        values[key] = type(values[key])(value)
    limits = Limits(**values)
    if not 1 <= limits.hop_limit <= 15:
        errors.append(f"limit hop_limit must be within 1..15, not {limits.hop_limit}")
    for key in ("max_message_size", "pending_bytes"):
        if getattr(limits, key) > convert.SIZE_MAX:
            errors.append(f"limit {key} must be at most 2**62 ({convert.SIZE_MAX}), not "
                          f"{getattr(limits, key)}")
    return limits


def limits_from(table: dict[str, Any], base: Limits | None = None) -> Limits:
    """Limits from a table (``[limits]`` or the CLI's flags); every mistake at once."""
    errors: list[str] = []
    limits = _limits_checked(table, base, errors)
    if errors:
        raise ConfigError("\n".join(errors))
    return limits


class ConfigFileError(ConfigError):
    """A config file's mistakes; ``readable``: the bridges that could be read nonetheless
    (their settings without the refused ones), so that the next stage's rules can report
    their mistakes in the same breath (every mistake at once)."""

    def __init__(self, message: str, readable: list[BridgeSpec]) -> None:
        super().__init__(message)
        self.readable = readable


def load(path: str) -> Config:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return from_dict(data, source=path)


#: what ``/readyz`` makes of a back end that cannot tell its peers (``-1``: pyzmq's asyncio
#: face on a pub/sub, pipeline or pair back end, a plugin's adapter that does not count):
#: ``[gateway] unknown_peers`` or ``--unknown-peers``
UNKNOWN_PEERS: dict[str, str] = {
    "waiting": "not ready (the default: nothing says a server is there)",
    "ready": "ready (trust the back end; for an adapter that cannot count its peers)",
}
_GATEWAY_KEYS = ("log_format", "log_level", "metrics", "unknown_peers")
_BRIDGE_KEYS = ("name", "front", "back", "forwarder", "control", "capture", "capture_format")
_BRIDGE_TABLES = ("front_options", "back_options")
_LOG_LEVELS = ("debug", "info", "warning", "error")
#: what a bridge's capture endpoint publishes per forwarded message (docs/capture.md):
#: ``frames``, the frames as forwarded (libzmq's capture socket); ``records``, a header frame
#: and the message as each side's socket had it (what ``gateway capture`` needs for both sides)
CAPTURE_FORMATS = ("frames", "records")


def from_dict(data: dict[str, Any], source: str = "config") -> Config:
    """Check everything, collect every mistake (file, section or bridge, key), then raise one
    :class:`ConfigError` listing them all, one per line."""
    errors: list[str] = []

    def err(where: str, message: str) -> None:
        errors.append(f"{source}: {where}: {message}")

    def table(key: str) -> dict[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            err(f"[{key}]", f"must be a table, not {schema.quoted(value)}")
            return {}
        return value

    for name in sorted(set(data) - {"gateway", "limits", "bridge", "plugins"}):
        sections = ("gateway", "limits", "bridge", "plugins")
        err(f"[{name}]", f"unknown section{schema.did_you_mean(name, sections)} (known: "
                         f"{', '.join(sections)})")
    general = table("gateway")
    for key in sorted(set(general) - set(_GATEWAY_KEYS)):
        err(f"[gateway] {key}", f"unknown key{schema.did_you_mean(key, _GATEWAY_KEYS)} (known: "
                                f"{', '.join(_GATEWAY_KEYS)})")
    table("plugins")
    limit_errors: list[str] = []
    limits = _limits_checked(table("limits"), None, limit_errors)
    for message in limit_errors:
        err("[limits]", message)

    bridges = data.get("bridge", [])
    if not isinstance(bridges, list) or not bridges:
        err("[[bridge]]", "no [[bridge]] tables: add at least one, with front and back")
        bridges = []
    parsed: list[BridgeSpec] = []
    readable: list[BridgeSpec] = []  # with mistakes, but checked further (ConfigFileError)
    seen: dict[str, int] = {}
    for i, entry in enumerate(bridges):
        if not isinstance(entry, dict):
            err(f"bridge #{i + 1}", "must be a table")
            continue
        name = entry.get("name", f"bridge{i + 1}")
        # (a name as written, as the rules, the logs and the metrics show it: a masked one, as
        # "bypass:***", made a second form of each mistake the rules report too)
        where = f"bridge {name!r}" if isinstance(name, str) else f"bridge #{i + 1}"
        for key in sorted(set(entry) - set(_BRIDGE_KEYS) - set(_BRIDGE_TABLES)):
            keys = _BRIDGE_KEYS + _BRIDGE_TABLES
            err(f"{where} {key}", f"unknown key{schema.did_you_mean(key, keys)} (known: "
                                  f"{', '.join(keys)})")
        ok = True
        urls = True  # both URLs are strings: the rules can check them, whatever else is wrong
        for key in _BRIDGE_KEYS:
            if key in entry and not isinstance(entry[key], str):
                err(f"{where} {key}", f"must be a string, not {schema.quoted(entry[key])}")
                ok = urls = False
        tables: dict[str, tuple[tuple[str, Any], ...]] = {}
        for key in ("front", "back"):
            url_settings: dict[str, Any] = {}
            if key not in entry:
                err(f"{where} {key}", "missing")
                ok = urls = False
            elif isinstance(entry[key], str):
                try:
                    url_settings = parse(entry[key]).settings
                except ConfigError as exc:
                    for line in str(exc).splitlines():
                        err(f"{where} {key}", line)
                    ok = False
            table_key = f"{key}_options"
            value = entry.get(table_key, {})
            if not isinstance(value, dict):
                err(f"{where} {table_key}", f"must be a table of settings, not {schema.quoted(value)}")
                ok = False
                continue
            bad: list[str] = []
            read = schema.read(value.items(), "", bad)
            both = set(url_settings) & set(read)
            if both:
                bad.append(f"{schema.describe(both)} set both in the URL and in the table; "
                           "keep one")
                read = {k: v for k, v in read.items() if k not in both}
            for line in bad:
                err(f"{where} {table_key}", line)
            tables[key] = tuple(sorted(read.items()))  # the good ones: checked further
        forwarder = entry.get("forwarder", "auto")
        if forwarder not in ("auto", "proxy"):
            err(f"{where} forwarder", f"must be auto or proxy, not {schema.quoted(forwarder)}")
            ok = False
        if isinstance(name, str):
            if name in seen:
                err(where, f"duplicate name (bridge #{seen[name] + 1} has it too)")
                ok = False
            seen.setdefault(name, i)
        extras = {"control": "", "capture": ""}  # those that parse (for the further checks)
        for key in extras:
            if isinstance(entry.get(key), str) and entry[key]:
                try:
                    parse(entry[key])
                except ConfigError as exc:
                    for line in str(exc).splitlines():
                        err(f"{where} {key}", line)
                    ok = False
                else:
                    extras[key] = entry[key]
        capture_format = entry.get("capture_format", "frames")
        if capture_format not in CAPTURE_FORMATS:  # (the bridge's other rules still run)
            err(f"{where} capture_format", f"must be {' or '.join(CAPTURE_FORMATS)}, not "
                                           f"{schema.quoted(capture_format)}")
            capture_format = "frames"
        if urls and isinstance(name, str):  # (its tables' good settings are kept)
            spec = BridgeSpec(name, entry["front"], entry["back"], limits,
                              forwarder if forwarder in ("auto", "proxy") else "auto",
                              tables.get("front", ()), tables.get("back", ()),
                              extras["control"], extras["capture"], capture_format)
            readable.append(spec)
            if ok:
                parsed.append(spec)

    fmt = general.get("log_format", "console")
    if fmt not in ("console", "json"):
        err("[gateway] log_format", f"must be console or json, not {fmt!r}")
    level = general.get("log_level", "info")
    if level not in _LOG_LEVELS:
        err("[gateway] log_level", f"must be one of {', '.join(_LOG_LEVELS)}, not {level!r}")
    metrics = general.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, str):
            err("[gateway] metrics", f'must be "HOST:PORT", not {metrics!r}')
        else:
            try:
                split_host_port(metrics)
            except ConfigError as exc:
                err("[gateway] metrics", str(exc))
    unknown = general.get("unknown_peers", "waiting")
    if not isinstance(unknown, str) or unknown not in UNKNOWN_PEERS:
        err("[gateway] unknown_peers", f"must be {' or '.join(UNKNOWN_PEERS)}, not "
                                       f"{schema.quoted(unknown)}")
    if errors:
        raise ConfigFileError("\n".join(errors), readable)
    return Config(parsed, limits, fmt, level, metrics, data, unknown)
