"""The plugin manager: built-ins by name, then entry points of the group ``gateway``.

* ``GATEWAY_PLUGINS=tcp,wires,...`` loads only the plugins named (built-in or entry point);
* ``GATEWAY_DISABLE_PLUGIN_AUTOLOAD=1`` skips the entry points (tests use it).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pluggy

from gateway import hookspecs
from gateway.errors import ConfigError
from gateway.transport import TransportSpec

BUILTIN_PLUGINS = {  # installed from the repository's plugins/ folder as gateway_plugins.*
    "auth": "gateway_plugins.auth",  # first registered, so asked last (firstresult hooks)
    "tcp": "gateway_plugins.tcp",
    "tls": "gateway_plugins.tls",
    "ws": "gateway_plugins.ws",
    "ipc": "gateway_plugins.ipc",
    "inproc": "gateway_plugins.inproc",
    "wires": "gateway_plugins.wires",
    "pyzmq": "gateway_plugins.pyzmq_adapter",
    "pynng": "gateway_plugins.pynng_adapter",
}


@dataclass(frozen=True, slots=True)
class WireSpec:
    name: str
    family: str
    codec_factory: Callable[..., Any]
    plugin: str = ""
    #: the transport framing it serves: "stream" (it frames messages in a byte stream), or a
    #: transport's own ("ws": each message one WebSocket message)
    framing: str = "stream"


@dataclass(frozen=True, slots=True)
class AdapterSpec:
    """A library-backed implementation of bridge sides (see :mod:`gateway.adapter`)."""

    name: str
    family: str
    open_async: Callable[..., Any]  # (kind, SideOptions) -> RawSocket
    open_polled: Callable[..., Any] | None = None  # (kind, SideOptions) -> PolledSocket
    open_proxy: Callable[..., Any] | None = None  # (front, back SideOptions) -> LibraryProxy
    plugin: str = ""
    #: the SideOptions fields it honours beyond the bridge's own (None: it did not say)
    options: frozenset[str] | None = None


@dataclass
class Registry:
    """What the loaded plugins provide, collected once through the register callbacks."""

    transports: dict[str, TransportSpec] = field(default_factory=dict)
    wires: dict[str, WireSpec] = field(default_factory=dict)
    adapters: dict[str, AdapterSpec] = field(default_factory=dict)
    provided_by: dict[str, list[str]] = field(default_factory=dict)

    def transport(self, scheme: str) -> TransportSpec:
        try:
            return self.transports[scheme]
        except KeyError:
            known = ", ".join(sorted(self.transports))
            raise ConfigError(f"unknown transport {scheme!r} (loaded: {known})") from None

    def wire(self, name: str) -> WireSpec:
        try:
            return self.wires[name]
        except KeyError:
            raise ConfigError(f"unknown wire {name!r} (loaded: {', '.join(sorted(self.wires))})") from None

    def wire_for(self, family: str, framing: str = "stream") -> WireSpec:
        """The codec of ``family`` for a transport's ``framing`` (its declared one)."""
        for spec in self.wires.values():
            if spec.family == family and spec.framing == framing:
                return spec
        raise ConfigError(f"no {family} wire for {framing} framing (a plugin of the transport "
                          "registers one)")

    def adapter(self, name: str) -> AdapterSpec:
        try:
            return self.adapters[name]
        except KeyError:
            known = ", ".join(sorted(self.adapters))
            raise ConfigError(f"unknown backend {name!r} (loaded: {known})") from None


def _wanted() -> set[str] | None:
    only = os.environ.get("GATEWAY_PLUGINS", "").strip()
    return {name.strip() for name in only.split(",") if name.strip()} if only else None


def make_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    wanted = _wanted()
    for name, module in BUILTIN_PLUGINS.items():
        if wanted is None or name in wanted:
            pm.register(importlib.import_module(module), name=name)
    if not os.environ.get("GATEWAY_DISABLE_PLUGIN_AUTOLOAD"):
        if wanted is not None:
            for ep_name in _entry_point_names() - wanted:
                pm.set_blocked(ep_name)
        pm.load_setuptools_entrypoints(hookspecs.PROJECT)
    pm.check_pending()
    return pm


def _entry_point_names() -> set[str]:
    from importlib.metadata import entry_points

    return {ep.name for ep in entry_points(group=hookspecs.PROJECT)}


@cache
def manager() -> pluggy.PluginManager:
    return make_manager()


class _Collector:
    """The ``register`` callbacks of one plugin: what it provides goes into the registry under
    its name."""

    def __init__(self, reg: Registry, who: str) -> None:
        self.reg, self.who = reg, who

    def transport(self, scheme: str, transport: Any, **declared: Any) -> None:
        self.reg.transports[scheme] = TransportSpec(scheme, transport, self.who, **declared)
        self._provides(f"transport {scheme}")

    def wire(self, name: str, family: str, codec_factory: Callable[..., Any],
             aliases: tuple[str, ...] = (), framing: str = "stream") -> None:
        for n in (name, *aliases):
            self.reg.wires[n] = WireSpec(n, family, codec_factory, self.who, framing)
        self._provides(f"wire {name} ({family})")

    def adapter(self, name: str, family: str, factory: Callable[..., Any], *,
                polled: Callable[..., Any] | None = None,
                proxy: Callable[..., Any] | None = None,
                options: frozenset[str] | None = None) -> None:
        if name == "native":
            raise ConfigError(f"plugin {self.who}: the backend name 'native' is the engine's")
        self.reg.adapters[name] = AdapterSpec(name, family, factory, polled, proxy, self.who,
                                              None if options is None else frozenset(options))
        faces = "".join(f", {f}" for f, on in (("polled", polled), ("proxy", proxy)) if on)
        self._provides(f"adapter {name} ({family}{faces})")

    def _provides(self, what: str) -> None:
        self.reg.provided_by.setdefault(self.who, []).append(what)


def collect(pm: pluggy.PluginManager) -> Registry:
    """What every plugin provides, through pluggy (one subset hook caller per plugin, so each
    registration is known by its plugin and pluggy's tracing sees every call)."""
    reg = Registry()
    plugins = pm.list_name_plugin()
    for name, _ in plugins:
        add = _Collector(reg, name or "")
        others = [p for n, p in plugins if n != name]
        for hook, register in (("gateway_register_wires", add.wire),
                               ("gateway_register_transports", add.transport),
                               ("gateway_register_adapters", add.adapter)):
            pm.subset_hook_caller(hook, remove_plugins=others)(register=register)
    return reg


@cache
def registry() -> Registry:
    return collect(manager())


def body_codec(frames: tuple[bytes, ...], direction: str) -> tuple[bytes, ...] | None:
    result: tuple[bytes, ...] | None = manager().hook.gateway_body_codec(frames=frames, direction=direction)
    return result


def body_codec_hook() -> Callable[[tuple[bytes, ...], str], tuple[bytes, ...] | None] | None:
    """The ``gateway_body_codec`` hook as a function, or None while no plugin implements it
    (then a bridge skips the call on every message). Read when a bridge opens."""
    return body_codec if manager().hook.gateway_body_codec.get_hookimpls() else None
