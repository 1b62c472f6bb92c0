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

    [[bridge]]
    name = "orders"
    front = "@zmq+tcp://0.0.0.0:5555"
    back = ">sp+tcp://127.0.0.1:6000"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from typing import Any

from gateway.device import Limits
from gateway.errors import ConfigError
from gateway.url import parse


@dataclass
class BridgeConfig:
    name: str
    front: str
    back: str


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
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"limit {key} must be a positive number, not {value!r}")
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
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return from_dict(data, source=path)


def from_dict(data: dict[str, Any], source: str = "config") -> Config:
    unknown = set(data) - {"gateway", "limits", "bridge"}
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {', '.join(sorted(unknown))}")
    general = data.get("gateway", {})
    bridges = data.get("bridge", [])
    if not isinstance(bridges, list) or not bridges:
        raise ConfigError(f"{source}: no [[bridge]] tables")
    parsed = []
    for i, entry in enumerate(bridges):
        if not isinstance(entry, dict) or "front" not in entry or "back" not in entry:
            raise ConfigError(f"{source}: bridge #{i + 1} needs 'front' and 'back'")
        parse(entry["front"]), parse(entry["back"])  # fail early, with the URL in the message
        parsed.append(BridgeConfig(str(entry.get("name", f"bridge{i + 1}")), entry["front"], entry["back"]))
    fmt = general.get("log_format", "console")
    if fmt not in ("console", "json"):
        raise ConfigError(f"{source}: log_format must be console or json, not {fmt!r}")
    return Config(parsed, limits_from(data.get("limits", {})), fmt,
                  general.get("log_level", "info"), general.get("metrics"), data)
