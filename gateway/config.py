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

    [plugins]                       # free-form: plugins read it in their gateway_configure hook

Every mistake is a :class:`ConfigError` with one line saying what and where (the CLI prints it
and exits 2): unknown sections and keys, wrong types, limits out of range.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields
from typing import Any

from gateway.errors import ConfigError
from gateway.url import parse, split_host_port


@dataclass
class Limits:
    """The bridge's limits (DESIGN section 10); every one configurable."""

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


@dataclass
class Config:
    bridges: list[BridgeConfig]
    limits: Limits = field(default_factory=Limits)
    log_format: str = "console"
    log_level: str = "info"
    metrics: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def limits_from(table: dict[str, Any], base: Limits | None = None) -> Limits:
    limits = base or Limits()
    known = {f.name: f.type for f in fields(Limits)}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(f"unknown limit {key!r} (known: {', '.join(known)})")
        if (not isinstance(value, int | float) or isinstance(value, bool)
                or not math.isfinite(value) or value < 0 or (value == 0 and key != "backlog")):
            raise ConfigError(f"limit {key} must be a positive number, not {value!r}")
        if isinstance(getattr(limits, key), int) and value != int(value):
            raise ConfigError(f"limit {key} must be a whole number, not {value!r}")
        setattr(limits, key, type(getattr(limits, key))(value))
    if not 1 <= limits.hop_limit <= 15:
        raise ConfigError(f"hop_limit must be within 1..15, not {limits.hop_limit}")
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
_LOG_LEVELS = ("debug", "info", "warning", "error")


def _table(data: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{key}] must be a table, not {value!r}")
    return value


def _unknown_keys(table: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = set(table) - set(known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
                          f"(known: {', '.join(known)})")


def from_dict(data: dict[str, Any], source: str = "config") -> Config:
    unknown = set(data) - {"gateway", "limits", "bridge", "plugins"}
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {', '.join(sorted(unknown))}")
    general = _table(data, "gateway", source)
    _unknown_keys(general, _GATEWAY_KEYS, f"{source} [gateway]")
    _table(data, "plugins", source)
    bridges = data.get("bridge", [])
    if not isinstance(bridges, list) or not bridges:
        raise ConfigError(f"{source}: no [[bridge]] tables")
    parsed = []
    for i, entry in enumerate(bridges):
        if not isinstance(entry, dict) or "front" not in entry or "back" not in entry:
            raise ConfigError(f"{source}: bridge #{i + 1} needs 'front' and 'back'")
        _unknown_keys(entry, _BRIDGE_KEYS, f"{source}: bridge #{i + 1}")
        for key in _BRIDGE_KEYS:
            if key in entry and not isinstance(entry[key], str):
                raise ConfigError(f"{source}: bridge #{i + 1} {key} must be a string, "
                                  f"not {entry[key]!r}")
        parse(entry["front"]), parse(entry["back"])  # fail early, with the URL in the message
        forwarder = entry.get("forwarder", "auto")
        if forwarder not in ("auto", "proxy"):
            raise ConfigError(f"{source}: bridge #{i + 1} forwarder must be auto or proxy, "
                              f"not {forwarder!r}")
        parsed.append(BridgeConfig(entry.get("name", f"bridge{i + 1}"), entry["front"],
                                   entry["back"], forwarder))
    fmt = general.get("log_format", "console")
    if fmt not in ("console", "json"):
        raise ConfigError(f"{source}: log_format must be console or json, not {fmt!r}")
    level = general.get("log_level", "info")
    if level not in _LOG_LEVELS:
        raise ConfigError(f"{source}: log_level must be one of {', '.join(_LOG_LEVELS)}, "
                          f"not {level!r}")
    metrics = general.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, str):
            raise ConfigError(f"{source}: metrics must be \"HOST:PORT\", not {metrics!r}")
        split_host_port(metrics)
    return Config(parsed, limits_from(_table(data, "limits", source)), fmt, level, metrics, data)
