"""What a bridge will run, decided once from its description (:class:`gateway.config.BridgeSpec`)
before any socket exists: its pattern, each side's endpoint, implementation and settings, and
every mistake at once (the checks of :mod:`gateway.settings.checks`, the adapters' declared
settings, what ``any+`` and the library proxy allow), then the files the settings name loaded
(once per start or reload).

Patterns (``?pattern=`` on either endpoint, or ``front_options``/``back_options`` in TOML; the
other side follows; docs/patterns.md):

=========  ======================  ======================  ==================================
pattern    front (clients)         back (servers)          messages
=========  ======================  ======================  ==================================
reqrep     raw REP (ROUTER-like)   raw REQ (DEALER-like)   requests forth, replies back
pubsub     XPUB / pub0             XSUB / sub0             published back -> front;
                                                           subscriptions front -> back
pipeline   PULL / pull0            PUSH / push0            front -> back
pair       PAIR / pair0 (pair1)    PAIR / pair0 (pair1)    both ways
=========  ======================  ======================  ==================================
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from gateway.config import BridgeSpec
from gateway.device import sides
from gateway.errors import ConfigError
from gateway.plugins import AdapterSpec, registry
from gateway.security import security_of
from gateway.settings import checks, schema
from gateway.settings.schema import SideOptions
from gateway.tls import tls_of
from gateway.url import Endpoint, parse
from gateway.wire.sniff import ANY

#: pattern -> (front kind, back kind) handed to the side's implementation
KINDS = {"reqrep": ("REP", "REQ"), "pubsub": ("XPUB", "XSUB"),
         "pipeline": ("PULL", "PUSH"), "pair": ("PAIR", "PAIR")}
_FIELDS = frozenset(f.name for f in fields(SideOptions))


@dataclass(frozen=True)
class SidePlan:
    ep: Endpoint  # mode and backend filled in
    adapter: AdapterSpec | None  # None: the native engine
    kind: str
    options: SideOptions  # settings, limits and the loaded material (security, tls)
    settings: dict[str, Any]  # what the URL and the TOML table set


@dataclass(frozen=True)
class BridgePlan:
    name: str
    pattern: str
    sp_pair1: bool
    front: SidePlan
    back: SidePlan
    subscribe: tuple[bytes, ...] | None

    @property
    def mode(self) -> str:
        return f"{self.front.ep.family}->{self.back.ep.family}"

    def proxy_capable(self) -> bool:
        f, b = self.front.adapter, self.back.adapter
        return (f is not None and f is b and f.open_proxy is not None
                and self.front.ep.family == self.back.ep.family)

    def polled(self) -> bool:
        f, b = self.front.adapter, self.back.adapter
        return (f is not None and b is not None
                and f.open_polled is not None and b.open_polled is not None)


def pattern_of(name: str, front: Endpoint, back: Endpoint,
               said: dict[str, str]) -> tuple[str, bool]:
    """The bridge's pattern from its two sides' ``pattern`` settings (either may say it; both
    must agree), and whether the SP side speaks pair1."""
    pair1 = False
    for side, ep in (("front", front), ("back", back)):
        if said[side] == "pair1":
            if ep.family != "sp":
                raise ConfigError(f"bridge {name!r} {side}: pattern=pair1 is SP's pair1; a "
                                  f"ZeroMQ endpoint speaks pair ({ep.url})")
            pair1, said[side] = True, "pair"
    given = {p for p in said.values() if p}
    if len(given) > 1:
        raise ConfigError(f"bridge {name!r}: the front says pattern={said['front']}, the back "
                          f"pattern={said['back']}; say one")
    return (given.pop() if given else "reqrep"), pair1


def plan(spec: BridgeSpec) -> BridgePlan:
    """Decide everything; one :class:`ConfigError` with every mistake, each naming the
    bridge and its side. A side that cannot be read (its URL, a setting's value, its backend)
    is checked no further, but the other side is: both sides' mistakes come at once, and the
    files of a side with no mistake of its own are read even when the bridge has some."""
    name, limits = spec.name, spec.limits
    transports = frozenset(registry().transports)
    own: dict[str, list[str]] = {"front": [], "back": []}  # each side's own mistakes
    read = {side: _read_side(name, side, url, dict(table), transports, own[side])
            for side, url, table in (("front", spec.front, spec.front_options),
                                     ("back", spec.back, spec.back_options))}
    errors = own["front"] + own["back"]
    front_read, back_read = read["front"], read["back"]
    pattern: str | None = None
    pair1, subscribe = False, None
    if front_read is not None and back_read is not None:
        (front, f_settings, f_adapter), (back, b_settings, b_adapter) = front_read, back_read
        settings = {"front": f_settings, "back": b_settings}
        try:
            pattern, pair1 = pattern_of(name, front, back, {s: settings[s].get("pattern", "")
                                                            for s in ("front", "back")})
        except ConfigError as exc:  # (the rules that need no pattern still run)
            errors.append(str(exc))
        errors += _bridge_errors(spec, pattern, front, back,
                                 {"front": f_adapter, "back": b_adapter})
        if pattern is not None:
            subscribe = _subscribe(settings, pattern, errors, name)
    if errors or pattern is None:
        for side, got in read.items():  # a sound side's files: their mistakes too, at once
            if got is not None and not own[side]:
                _side_plan(name, side, got[0], got[2], "", got[1], limits, pattern or "",
                           errors)
        raise ConfigError("\n".join(errors))
    assert front_read is not None and back_read is not None  # (else errors)
    kinds: tuple[str, str] = KINDS[pattern]
    if pair1:  # sp -> sp pair1: both sides pair1
        kinds = ("PAIR1" if front_read[0].family == "sp" else "PAIR",
                 "PAIR1" if back_read[0].family == "sp" else "PAIR")
    made = {side: _side_plan(name, side, got[0], got[2], kind, got[1], limits, pattern, errors)
            for (side, got), kind in zip((("front", front_read), ("back", back_read)), kinds,
                                         strict=True)}
    if errors:
        raise ConfigError("\n".join(errors))
    return BridgePlan(name, pattern, pair1, made["front"], made["back"], subscribe)


def _read_side(name: str, side: str, url: str, table: dict[str, Any],
               transports: frozenset[str], errors: list[str]
               ) -> tuple[Endpoint, dict[str, Any], AdapterSpec | None] | None:
    """One side read and checked on its own: its endpoint (mode and backend filled in), its
    settings (URL over TOML) and its adapter; ``None`` when it could not be read that far.
    Every mistake found goes to ``errors``."""
    where = f"bridge {name!r} {side}"
    try:
        ep = parse(url, transports=transports)
    except ConfigError as exc:
        errors.extend(f"{where}: {line}" for line in str(exc).splitlines())
        return None
    try:
        settings = schema.merged(ep.settings, table, where)
    except ConfigError as exc:
        errors.append(str(exc))
        return None
    ep = sides.default_backend(ep)
    if not ep.mode:
        ep = replace(ep, mode="bind" if side == "front" else "connect")
    try:
        adapter = sides.adapter_for(ep)
    except ConfigError as exc:
        errors.append(f"{where}: {exc}")
        return None
    errors += _side_errors(name, side, ep, settings, adapter)
    return ep, settings, adapter


def _side_errors(name: str, side: str, ep: Endpoint, settings: dict[str, Any],
                 adapter: AdapterSpec | None) -> list[str]:
    where = f"bridge {name!r} {side}"
    transport = registry().transport(ep.transport)
    errors = [f"{where}: {e}" for e in checks.endpoint_rules(
        settings, ep.family, transport, ep.mode == "bind", side)]
    if adapter is not None and adapter.options is not None:
        ignored = set(settings) - adapter.options - schema.BRIDGE_FIELDS
        if ignored:
            errors.append(f"{where}: backend {adapter.name} does not support "
                          f"{schema.describe(ignored)} (it supports: "
                          f"{schema.describe(adapter.options) or 'none'})")
    if ep.family == ANY and side == "back":
        errors.append(f"{where}: any+ is for a front (one port for both wires' clients); the "
                      f"back says zmq+ or sp+: {ep.url}")
    elif ep.family == ANY and ep.mode != "bind":
        errors.append(f"{where}: any+ listens; it cannot dial {ep.url}")
    return errors


def _bridge_errors(spec: BridgeSpec, pattern: str | None, front: Endpoint, back: Endpoint,
                   adapters: dict[str, AdapterSpec | None]) -> list[str]:
    """The rules of the two sides together (``pattern`` None: the sides disagree on it, and
    the rules that need it wait)."""
    name, errors = spec.name, []
    if spec.forwarder not in ("auto", "proxy"):
        errors.append(f"bridge {name!r}: forwarder must be auto or proxy, not {spec.forwarder!r}")
    if spec.forwarder == "proxy":
        f, b = adapters["front"], adapters["back"]
        if not (f is not None and f is b and f.open_proxy is not None
                and front.family == back.family):
            errors.append(f"bridge {name!r}: forwarder=proxy needs the same family and one "
                          f"adapter with a proxy on both sides (e.g. backend=pyzmq)")
        if pattern not in (None, "reqrep"):
            errors.append(f"bridge {name!r}: forwarder=proxy serves reqrep only")
    if front.family == ANY and pattern not in (None, "reqrep"):
        errors.append(f"bridge {name!r} front: any+ serves request-reply, not "
                      f"pattern={pattern}: {front.url}")
    return errors


def _subscribe(settings: dict[str, dict[str, Any]], pattern: str, errors: list[str],
               name: str) -> tuple[bytes, ...] | None:
    given = [t["subscribe"] for t in settings.values() if t.get("subscribe") is not None]
    if given and pattern != "pubsub":
        errors.append(f"bridge {name!r}: subscribe is a pubsub setting, not {pattern}")
        return None
    if not given:
        return None
    return tuple(dict.fromkeys(t for topics in given for t in topics))


def _side_plan(name: str, side: str, ep: Endpoint, adapter: AdapterSpec | None, kind: str,
               settings: dict[str, Any], limits: Any, pattern: str,
               errors: list[str]) -> SidePlan:
    """One side's options: the bridge's limits, its role, its settings, and the material the
    settings' files hold (read here, once)."""
    front = side == "front"
    base = SideOptions(max_message_size=limits.max_message_size, hop_limit=limits.hop_limit,
                       message_timeout=limits.message_timeout, backlog=limits.backlog or None,
                       router_mandatory=front and pattern == "reqrep")
    # the bridge's own settings (pattern, subscribe) are the plan's, never a side socket's
    options = replace(base, **{k: v for k, v in settings.items()
                               if k in _FIELDS and k not in schema.BRIDGE_FIELDS})
    try:
        options = replace(options, security=security_of(options, ep.family),
                          tls=tls_of(options, bound=ep.mode == "bind"))
    except ConfigError as exc:
        errors.extend(f"bridge {name!r} {side}: {line}" for line in str(exc).splitlines())
    return SidePlan(ep, adapter, kind, options, settings)


__all__ = ["KINDS", "BridgePlan", "SidePlan", "pattern_of", "plan"]
