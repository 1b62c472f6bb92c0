"""A bridge's two sides: which implementation serves each endpoint, opened through the registry.

The native engine is always there (``?backend=native``); every other backend is an adapter
plugin (:mod:`gateway.adapter`), selected by name, a third party's included. Every side declares
what the forwarders need (``peers``, ``backlog``, ``confirms_delivery``, ``on_peer_lost``;
:class:`gateway.adapter.RawSocket`), so nothing asks a side what it is. The native side also
has the callback path (``callbacks``): it reports to a :class:`~gateway.engine.hooks.SocketHooks`
observer and sends without waiting (``send_now``, ``room``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gateway.errors import ConfigError, TransportError
from gateway.plugins import AdapterSpec, registry
from gateway.settings.schema import SideOptions
from gateway.url import Endpoint

NATIVE = "native"


class NativeSide:
    """The native engine's raw socket as a bridge side (``kind``: the pattern's front or back
    kind, e.g. raw REP front, raw REQ back)."""

    #: forwarding can run in this side's own callbacks (see gateway.device.forward_async)
    callbacks = True
    #: the engine delivers every message it takes (a library may still drop a reply)
    confirms_delivery = True

    def __init__(self, kind: str, options: SideOptions, name: str = "") -> None:
        from gateway.engine.options import SocketOptions
        from gateway.engine.socket import Socket  # the engine loads the transport plugins

        fields = {f: getattr(options, f) for f in SideOptions.__dataclass_fields__}
        opts = SocketOptions(**fields, name=name or f"device-x{kind.lower()}",
                             # toward an SP publisher the gateway's sub0 filters by what it
                             # holds (a raw XSUB would take everything)
                             filter=True if kind == "XSUB" else None)
        self.socket = Socket(kind, raw=True, options=opts)
        self.send_msg = self.socket.send_msg
        self.recv_msg = self.socket.recv_msg
        self.send_now = self.socket.send_now
        self.observe = self.socket.observe
        self.family_of = self.socket.family_of
        #: a native back end reports each lost pipe itself (``SocketHooks.pipe_lost``)
        self.on_peer_lost: Callable[[], None] | None = None

        balanced = self.socket.pattern.strategy == "balanced"
        #: ``room[0]``: True when a send would go out now, a cell the socket keeps current
        #: (:attr:`gateway.engine.send.Routing.room`); None: always (a routed or fanout send)
        self.room: list[bool] | None = self.socket.routing.room if balanced else None

    async def wait_room(self) -> None:
        """Until a send can go out now."""
        if self.room is not None and not self.room[0]:
            await self.socket.wait_writable()

    @property
    def peers(self) -> int:
        return self.socket.peers

    @property
    def backlog(self) -> int:
        """Received messages not yet taken (they were never forwarded)."""
        return self.socket.inbox_size

    def bind(self, url: str) -> str:
        return self.socket.bind(url)

    def connect(self, url: str) -> None:
        self.socket.connect(url)

    def close(self, linger: float | None = None) -> None:
        self.socket.close(linger)


def backend_of(ep: Endpoint) -> str:
    return ep.backend or NATIVE


def adapter_for(ep: Endpoint) -> AdapterSpec | None:
    """The adapter serving ``ep`` (None: the native engine); a clear error when it is unknown
    or speaks the other wire."""
    name = backend_of(ep)
    if name == NATIVE:
        return None
    if ep.family == "any":
        raise ConfigError(f"any+ (one port, both wires) is the native engine's; drop "
                          f"backend={name}: {ep.url}")
    reg = registry()
    spec = reg.adapters.get(name)
    if spec is None:
        known = ", ".join([NATIVE, *sorted(reg.adapters)])
        raise ConfigError(f"unknown backend {name!r} in {ep.url} (loaded: {known})")
    if spec.family != ep.family:
        raise ConfigError(f"backend {name} speaks {spec.family}, not {ep.family}: {ep.url}")
    return spec


def default_backends(front: Endpoint, back: Endpoint) -> tuple[Endpoint, Endpoint]:
    """Fill in ``?backend=`` where the user gave none: the native engine, on every route.

    Measured (``gateway bench``): on any bridge with an SP side the native engine is the
    fastest (nng's threads cost a handoff per message); on zmq -> zmq libzmq's own proxy
    (``forwarder="proxy"``) is faster, but it counts frames, not messages, and cannot time a
    hop, so it is opt-in and every default route keeps the same, exact accounting.
    """

    return default_backend(front), default_backend(back)


def default_backend(ep: Endpoint) -> Endpoint:
    """One side's half of :func:`default_backends` (the choice needs no other side)."""
    return ep if ep.backend else replace(ep, backend=NATIVE)


def attach(sock: Any, ep: Endpoint) -> str:
    """Bind or connect ``sock`` as ``ep`` says; return the endpoint's real URL. The socket is
    closed when that fails."""
    native = backend_of(ep) == NATIVE
    url = ep.url if native else ep.lib_url
    try:
        if ep.mode == "connect":
            sock.connect(url)
            return ep.url
        real = sock.bind(url)
        return real if native else f"{ep.scheme}://{real.partition('://')[2]}"
    except ConfigError:
        sock.close()
        raise
    except Exception as exc:  # OSError, TransportError, zmq.ZMQError, pynng.NNGException
        sock.close()
        if isinstance(exc, TransportError) and ep.url in str(exc):  # already says where
            raise
        raise TransportError(f"cannot {ep.mode or 'bind'} {ep.url}: {exc}") from exc


def open_async(ep: Endpoint, kind: str, options: SideOptions, name: str = "") -> tuple[Any, str]:
    """The asyncio face for ``ep``, bound or connected; and its real URL. ``name`` names a
    native socket in the logs (the bridge and the side)."""
    spec = adapter_for(ep)
    sock: Any = NativeSide(kind, options, name) if spec is None else spec.open_async(kind, options)
    if spec is not None and isinstance(getattr(type(sock), "name", None), property):
        sock.name = name  # (an adapter face that names its log lines: pyzmq's)
    return sock, attach(sock, ep)


def open_polled(ep: Endpoint, kind: str, options: SideOptions,
                name: str = "") -> tuple[Any, str]:
    """The polled face for ``ep`` (both sides have one), bound or connected; and its real URL."""
    spec = adapter_for(ep)
    assert spec is not None and spec.open_polled is not None
    sock = spec.open_polled(kind, options)
    sock.name = name
    return sock, attach(sock, ep)


__all__ = ["NATIVE", "NativeSide", "adapter_for", "attach", "backend_of", "default_backend",
           "default_backends",
           "open_async", "open_polled"]
