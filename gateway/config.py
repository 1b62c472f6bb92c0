"""``gateway.toml``: several bridges, limits and logging in one file (read with tomllib).

    [gateway]
    log_format = "console"          # or "json"
    metrics = "127.0.0.1:9100"      # optional Prometheus endpoint

    [limits]                        # all optional; these are the defaults
    max_message_size = 1048576
    hop_limit = 8
    pending_tokens = 100000
    token_ttl = 60.0
    grace = 2.0
    message_timeout = 10.0          # a message started but incomplete after it closes its pipe
    backlog = 0                     # listen backlog of native fronts; 0: the system maximum

    [[bridge]]
    name = "orders"
    front = "@zmq+tcp://0.0.0.0:5555"
    back = ">sp+tcp://127.0.0.1:6000"
    back_options = { reconnect_ivl = 100, reconnect_ivl_max = "5s" }   # or ?key=value on a URL

    [plugins]                       # free-form: plugins read it in their gateway_configure hook

Every mistake is a :class:`ConfigError` with one line saying what and where (the CLI prints it
and exits 2): unknown sections and keys, wrong types, limits out of range.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields, replace
from typing import Any

from gateway import options
from gateway.errors import ConfigError
from gateway.url import parse, split_host_port


@dataclass
class Limits:
    """The bridge's limits (docs/design.md); every one configurable."""

    max_message_size: int = 1 << 20
    hop_limit: int = 8
    pending_tokens: int = 100_000
    token_ttl: float = 60.0
    grace: float = 2.0  # drain time on SIGINT/SIGTERM
    message_timeout: float = 10.0  # a message started but not complete after this closes its pipe
    backlog: int = 0  # listen backlog of native fronts; 0: the system maximum


@dataclass
class BridgeConfig:
    name: str
    front: str
    back: str
    forwarder: str = "auto"
    #: endpoint settings of :mod:`gateway.options`, as ``{SideOptions field: value}``
    front_options: dict[str, Any] = field(default_factory=dict)
    back_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Config:
    bridges: list[BridgeConfig]
    limits: Limits = field(default_factory=Limits)
    log_format: str = "console"
    log_level: str = "info"
    metrics: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def _limits_checked(table: dict[str, Any], base: Limits | None,
                    errors: list[str]) -> Limits:
    limits = replace(base) if base is not None else Limits()
    known = {f.name for f in fields(Limits)}
    for key, value in table.items():
        if key not in known:
            errors.append(f"unknown limit {key!r} (known: {', '.join(sorted(known))})")
            continue
        if (not isinstance(value, int | float) or isinstance(value, bool)
                or not math.isfinite(value) or value < 0 or (value == 0 and key != "backlog")):
            errors.append(f"limit {key} must be a positive number, not {value!r}")
            continue
        if isinstance(getattr(limits, key), int) and value != int(value):
            errors.append(f"limit {key} must be a whole number, not {value!r}")
            continue
        setattr(limits, key, type(getattr(limits, key))(value))
    if not 1 <= limits.hop_limit <= 15:
        errors.append(f"limit hop_limit must be within 1..15, not {limits.hop_limit}")
    return limits


def limits_from(table: dict[str, Any], base: Limits | None = None) -> Limits:
    """Limits from a table (``[limits]`` or the CLI's flags); every mistake at once."""
    errors: list[str] = []
    limits = _limits_checked(table, base, errors)
    if errors:
        raise ConfigError("\n".join(errors))
    return limits


def load(path: str) -> Config:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return from_dict(data, source=path)


_GATEWAY_KEYS = ("log_format", "log_level", "metrics")
_BRIDGE_KEYS = ("name", "front", "back", "forwarder")
_BRIDGE_TABLES = ("front_options", "back_options")
_LOG_LEVELS = ("debug", "info", "warning", "error")


def from_dict(data: dict[str, Any], source: str = "config") -> Config:
    """Check everything, collect every mistake (file, section or bridge, key), then raise one
    :class:`ConfigError` listing them all, one per line."""
    errors: list[str] = []

    def err(where: str, message: str) -> None:
        errors.append(f"{source}: {where}: {message}")

    def table(key: str) -> dict[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            err(f"[{key}]", f"must be a table, not {value!r}")
            return {}
        return value

    for name in sorted(set(data) - {"gateway", "limits", "bridge", "plugins"}):
        err(f"[{name}]", "unknown section (known: gateway, limits, bridge, plugins)")
    general = table("gateway")
    for key in sorted(set(general) - set(_GATEWAY_KEYS)):
        err(f"[gateway] {key}", f"unknown key (known: {', '.join(_GATEWAY_KEYS)})")
    table("plugins")
    limit_errors: list[str] = []
    limits = _limits_checked(table("limits"), None, limit_errors)
    for message in limit_errors:
        err("[limits]", message)

    bridges = data.get("bridge", [])
    if not isinstance(bridges, list) or not bridges:
        err("[[bridge]]", "no [[bridge]] tables: add at least one, with front and back")
        bridges = []
    parsed: list[BridgeConfig] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(bridges):
        if not isinstance(entry, dict):
            err(f"bridge #{i + 1}", "must be a table")
            continue
        name = entry.get("name", f"bridge{i + 1}")
        where = f"bridge {name!r}" if isinstance(name, str) else f"bridge #{i + 1}"
        for key in sorted(set(entry) - set(_BRIDGE_KEYS) - set(_BRIDGE_TABLES)):
            err(f"{where} {key}", f"unknown key (known: {', '.join(_BRIDGE_KEYS + _BRIDGE_TABLES)})")
        ok = True
        for key in _BRIDGE_KEYS:
            if key in entry and not isinstance(entry[key], str):
                err(f"{where} {key}", f"must be a string, not {entry[key]!r}")
                ok = False
        settings: dict[str, dict[str, Any]] = {}
        for key in ("front", "back"):
            url_settings: dict[str, Any] = {}
            wire_family = ""
            if key not in entry:
                err(f"{where} {key}", "missing")
                ok = False
            elif isinstance(entry[key], str):
                try:
                    endpoint = parse(entry[key])
                    url_settings, wire_family = endpoint.settings, endpoint.family
                except ConfigError as exc:
                    for line in str(exc).splitlines():
                        err(f"{where} {key}", line)
                    ok = False
            table_key = f"{key}_options"
            value = entry.get(table_key, {})
            if not isinstance(value, dict):
                err(f"{where} {table_key}", f"must be a table of settings, not {value!r}")
                ok = False
                continue
            try:
                read = options.read(value.items(), "")
                options.merged(url_settings, read)
                if wire_family:
                    options.check_family(read, wire_family)
            except ConfigError as exc:
                for line in str(exc).splitlines():
                    err(f"{where} {table_key}", line)
                ok = False
                continue
            settings[key] = read
            try:
                ep = parse(entry[key]) if isinstance(entry.get(key), str) else None
            except ConfigError:  # reported above
                ep = None
            if ep is not None:
                from gateway import tls
                from gateway.security import check_settings

                both = {**url_settings, **read}
                bound = (ep.mode or ("bind" if key == "front" else "connect")) == "bind"
                misplaced = [f"{name}: applies to a bound endpoint (@), not a connecting one"
                          for name in ("allow", "max_connections")
                          if not bound and both.get(name) is not None]
                for line in [*check_settings(both, ep.family),
                             *tls.check_settings(both, ep.family, ep.transport, bound),
                             *misplaced]:
                    err(f"{where} {key}", line)
                    ok = False
        forwarder = entry.get("forwarder", "auto")
        if forwarder not in ("auto", "proxy"):
            err(f"{where} forwarder", f"must be auto or proxy, not {forwarder!r}")
            ok = False
        if isinstance(name, str):
            if name in seen:
                err(where, f"duplicate name (bridge #{seen[name] + 1} has it too)")
                ok = False
            seen.setdefault(name, i)
        if ok:
            parsed.append(BridgeConfig(name, entry["front"], entry["back"], forwarder,
                                       settings["front"], settings["back"]))

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
    if errors:
        raise ConfigError("\n".join(errors))
    return Config(parsed, limits, fmt, level, metrics, data)
