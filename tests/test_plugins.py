"""The plugin manager: built-ins by name, GATEWAY_PLUGINS, entry points and their kill switch,
third-party plugin objects registered at runtime, and what ``collect`` sees."""

from __future__ import annotations

import asyncio
import importlib
import textwrap
import uuid
from pathlib import Path

import pluggy
import pytest

import gateway
from gateway import hookspecs
from gateway.engine.codecs import make_codec
from gateway.errors import ConfigError
from gateway.plugins import BUILTIN_PLUGINS, collect, make_manager, registry

CORE = ("tcp", "ipc", "inproc", "wires")


def importable(name: str) -> bool:
    try:
        importlib.import_module(BUILTIN_PLUGINS[name])
    except Exception:  # an adapter whose library is missing (or is being written)
        return False
    return True


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("GATEWAY_PLUGINS", raising=False)
    monkeypatch.delenv("GATEWAY_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    return monkeypatch


def test_builtins_loaded(clean_env: pytest.MonkeyPatch) -> None:
    adapters = [name for name in ("pyzmq", "pynng") if importable(name)]
    if len(adapters) < 2:  # load what can be loaded; the rest is reported by its own tests
        clean_env.setenv("GATEWAY_PLUGINS", ",".join((*CORE, *adapters)))
    pm = make_manager()
    for name in (*CORE, *adapters):
        assert pm.get_plugin(name) is importlib.import_module(BUILTIN_PLUGINS[name]), name
    reg = collect(pm)
    assert set(reg.transports) >= {"tcp", "ipc", "inproc"}
    assert set(reg.wires) >= {"zmq", "zmtp", "sp", "nng", "nanomsg"}
    assert {w.family for n, w in reg.wires.items() if n in ("zmq", "zmtp")} == {"zmtp"}
    assert {w.family for n, w in reg.wires.items() if n in ("sp", "nng", "nanomsg")} == {"sp"}
    assert reg.provided_by["tcp"] == ["transport tcp"]
    assert reg.provided_by["ipc"] == ["transport ipc"]
    assert reg.provided_by["inproc"] == ["transport inproc"]
    assert reg.provided_by["wires"] == ["wire zmtp (zmtp)", "wire sp (sp)"]
    for name in adapters:
        assert name in reg.adapters
        assert reg.adapters[name].family == {"pyzmq": "zmtp", "pynng": "sp"}[name]
        assert reg.adapters[name].plugin == name


def test_transports_and_wires_have_the_documented_shape(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GATEWAY_PLUGINS", ",".join(CORE))
    reg = collect(make_manager())
    for scheme, transport in reg.transports.items():
        assert transport.scheme == scheme
        assert callable(transport.listen) and asyncio.iscoroutinefunction(transport.dial)
    for spec in reg.wires.values():
        codec = make_codec(spec.codec_factory, spec.family, "REQ", False, identity=b"",
                           max_message_size=1 << 20, transport=reg.transport("tcp"))
        assert codec.family == spec.family
        assert isinstance(codec.initiate(), bytes)


def test_gateway_plugins_restricts(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GATEWAY_PLUGINS", " tcp , wires ")
    pm = make_manager()
    assert pm.get_plugin("tcp") is not None and pm.get_plugin("wires") is not None
    for name in ("ipc", "inproc", "pyzmq", "pynng"):
        assert pm.get_plugin(name) is None
    reg = collect(pm)
    assert set(reg.transports) == {"tcp"}
    assert reg.adapters == {}
    with pytest.raises(ConfigError, match="ipc"):
        reg.transport("ipc")
    with pytest.raises(ConfigError):
        reg.adapter("pyzmq")
    with pytest.raises(ConfigError):
        reg.wire("ws")


@pytest.fixture
def entry_point_plugin(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A third-party distribution on sys.path with ``[project.entry-points.gateway]``."""
    ep_name = f"thirdparty{uuid.uuid4().hex[:8]}"
    module = f"gw_{ep_name}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(f"""
        from gateway import hookimpl

        class Loop:
            scheme = "{ep_name}"
            def listen(self, address, protocol_factory):
                raise OSError("not here")
            async def dial(self, address, protocol_factory):
                raise OSError("not here")

        @hookimpl
        def gateway_register_transports(register):
            register("{ep_name}", Loop())
    """))
    dist = tmp_path / f"{ep_name}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {ep_name}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[gateway]\n{ep_name} = {module}\n")
    clean_env.syspath_prepend(str(tmp_path))
    return ep_name


def test_entry_points_are_loaded(entry_point_plugin: str, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GATEWAY_PLUGINS", ",".join(CORE))  # keep the adapters out of this test
    assert make_manager().get_plugin(entry_point_plugin) is None  # not named: blocked
    clean_env.setenv("GATEWAY_PLUGINS", ",".join((*CORE, entry_point_plugin)))
    pm = make_manager()
    assert pm.get_plugin(entry_point_plugin) is not None
    reg = collect(pm)
    assert entry_point_plugin in reg.transports
    assert reg.provided_by[entry_point_plugin] == [f"transport {entry_point_plugin}"]


def test_disable_autoload(entry_point_plugin: str, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GATEWAY_PLUGINS", ",".join((*CORE, entry_point_plugin)))
    clean_env.setenv("GATEWAY_DISABLE_PLUGIN_AUTOLOAD", "1")
    pm = make_manager()
    assert pm.get_plugin(entry_point_plugin) is None
    assert pm.get_plugin("tcp") is not None  # built-ins are not entry points: still there
    assert entry_point_plugin not in collect(pm).transports


class MirrorTcp:
    """A third-party transport: TCP under another scheme name."""

    scheme = "mirror"

    def __init__(self) -> None:
        from gateway_plugins.tcp import TcpTransport

        self._tcp = TcpTransport()

    def listen(self, address, protocol_factory):  # type: ignore[no-untyped-def]
        return self._tcp.listen(address, protocol_factory)

    async def dial(self, address, protocol_factory):  # type: ignore[no-untyped-def]
        await self._tcp.dial(address, protocol_factory)


class ThirdParty:
    @gateway.hookimpl
    def gateway_register_transports(self, register):  # type: ignore[no-untyped-def]
        register("mirror", MirrorTcp())

    @gateway.hookimpl
    def gateway_register_adapters(self, register):  # type: ignore[no-untyped-def]
        register("fake", "sp", lambda kind, raw=True: None)

    @gateway.hookimpl
    def gateway_body_codec(self, frames, direction):  # type: ignore[no-untyped-def]
        if direction == "to_sp":
            return (b"|".join(frames),)
        return None


def test_runtime_plugin_object(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GATEWAY_PLUGINS", ",".join(CORE))
    pm = make_manager()
    assert pm.hook.gateway_body_codec(frames=(b"a", b"b"), direction="to_sp") is None
    pm.register(ThirdParty(), name="thirdparty")
    pm.check_pending()
    reg = collect(pm)
    assert isinstance(reg.transports["mirror"].transport, MirrorTcp)
    assert set(reg.transports) == {"tcp", "ipc", "inproc", "mirror"}
    assert reg.provided_by["thirdparty"] == ["transport mirror", "adapter fake (sp)"]
    assert reg.adapter("fake").family == "sp"
    assert pm.hook.gateway_body_codec(frames=(b"a", b"b"), direction="to_sp") == (b"a|b",)
    assert pm.hook.gateway_body_codec(frames=(b"a",), direction="to_zmtp") is None


def test_runtime_transport_carries_a_native_socket(clean_env: pytest.MonkeyPatch) -> None:
    """The engine uses whatever the registry holds: a plugin's scheme works end to end."""
    clean_env.setenv("GATEWAY_PLUGINS", ",".join(CORE))
    pm = make_manager()
    pm.register(ThirdParty(), name="thirdparty")
    reg = collect(pm)
    clean_env.setattr("gateway.engine.endpoints.registry", lambda: reg)

    async def main() -> None:
        async with gateway.Socket("REP") as rep, gateway.Socket("REQ") as req:
            url = rep.bind("sp+mirror://127.0.0.1:0")
            assert url.startswith("sp+mirror://127.0.0.1:") and not url.endswith(":0")
            req.connect(url)
            await req.send(b"ping")
            assert await rep.recv() == b"ping"
            await rep.send(b"pong")
            assert await req.recv() == b"pong"

    asyncio.run(asyncio.wait_for(main(), 10))


def test_misspelled_hook_is_refused() -> None:
    class Typo:
        @gateway.hookimpl
        def gateway_register_transport(self, register):  # type: ignore[no-untyped-def]
            pass  # missing "s"

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(Typo())
    with pytest.raises(pluggy.PluginValidationError):
        pm.check_pending()


def test_bad_hook_signature_is_refused() -> None:
    class Wrong:
        @gateway.hookimpl
        def gateway_register_wires(self, register, extra):  # type: ignore[no-untyped-def]
            pass

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    with pytest.raises(pluggy.PluginValidationError):
        pm.register(Wrong())


def test_process_registry_has_the_core() -> None:
    reg = registry()
    assert {"tcp", "ipc", "inproc"} <= set(reg.transports)
    assert {"zmq", "sp"} <= set(reg.wires)
    assert reg is registry()  # collected once
