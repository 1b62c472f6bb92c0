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

    transports: dict[str, Any] = field(default_factory=dict)
    wires: dict[str, WireSpec] = field(default_factory=dict)
    adapters: dict[str, AdapterSpec] = field(default_factory=dict)
    provided_by: dict[str, list[str]] = field(default_factory=dict)

    def transport(self, scheme: str) -> Any:
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


def collect(pm: pluggy.PluginManager) -> Registry:
    reg = Registry()

    def who() -> str:
        return current[0]

    current = [""]

    def add_transport(scheme: str, transport: Any) -> None:
        reg.transports[scheme] = transport
        reg.provided_by.setdefault(who(), []).append(f"transport {scheme}")

    def add_wire(name: str, family: str, codec_factory: Callable[..., Any], aliases: tuple[str, ...] = ()) -> None:
        for n in (name, *aliases):
            reg.wires[n] = WireSpec(n, family, codec_factory, who())
        reg.provided_by.setdefault(who(), []).append(f"wire {name} ({family})")

    def add_adapter(name: str, family: str, factory: Callable[..., Any], *,
                    polled: Callable[..., Any] | None = None,
                    proxy: Callable[..., Any] | None = None,
                    options: frozenset[str] | None = None) -> None:
        if name == "native":
            raise ConfigError(f"plugin {who()}: the backend name 'native' is the engine's")
        reg.adapters[name] = AdapterSpec(name, family, factory, polled, proxy, who(),
                                         None if options is None else frozenset(options))
        faces = "".join(f", {f}" for f, on in (("polled", polled), ("proxy", proxy)) if on)
        reg.provided_by.setdefault(who(), []).append(f"adapter {name} ({family}{faces})")

    # Call each implementation ourselves (in pluggy's order) to know which plugin provided what.
    for caller, register in (
        (pm.hook.gateway_register_wires, add_wire),
        (pm.hook.gateway_register_transports, add_transport),
        (pm.hook.gateway_register_adapters, add_adapter),
    ):
        for impl in reversed(caller.get_hookimpls()):
            current[0] = impl.plugin_name
            impl.function(register=register)
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
