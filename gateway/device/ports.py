"""What ``gateway run`` would refuse at bind time, found before anything starts: two bridges
(or a bridge and the metrics endpoint) binding one address (:func:`clashes`: host names
resolved, nothing bound; ``bridge``, ``run``, ``check`` and a reload all run it), an ipc path
that cannot be bound (:func:`ipc_paths`, the same), and an address another process holds
(:func:`in_use`, ``gateway check --ports`` only: each address is bound for a moment with the
options the engine binds with, then released, never listened on). Every line names the bridge
and its side."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import socket
import stat
from dataclasses import dataclass

from gateway.config import BridgeSpec
from gateway.errors import ConfigError
from gateway.url import parse, split_host_port

#: transports whose address is host:port on TCP (one port, one listener); ws/wss are
#: ``host:port/path`` on a TCP port of their own
TCP_TRANSPORTS = frozenset({"tcp", "tls+tcp", "ws", "wss"})
WEB_TRANSPORTS = frozenset({"ws", "wss"})
#: hosts that mean "every interface" of both families (``::`` is dual-stack; ``*`` and an
#: empty host are taken so too, to be safe): they clash with any host on the same port
WILDCARDS = frozenset({"", "*", "::"})
#: every IPv4 interface: clashes with IPv4 hosts only ([::1]:P binds beside 0.0.0.0:P)
ANY_IPV4 = "0.0.0.0"


@dataclass(frozen=True)
class Bound:
    """One bound address of a bridge side (or of the metrics endpoint: side ``metrics``)."""

    bridge: str
    side: str  # "front", "back", "control", "capture" or "metrics"
    transport: str
    address: str
    backend: str = "native"

    @property
    def where(self) -> str:
        return "[gateway] metrics" if self.side == "metrics" else \
            f"bridge {self.bridge!r} {self.side}"


def bound(specs: list[BridgeSpec], metrics: str | None = None) -> list[Bound]:
    """The addresses the bridges bind (front: bind unless ``>``; back: only with ``@``), and
    ``metrics`` last; URLs that do not parse are left to the rules that report them."""
    out: list[Bound] = []
    for spec in specs:
        for side, url, default in (("front", spec.front, "bind"), ("back", spec.back, "connect")):
            try:
                ep = parse(url)
            except ConfigError:
                continue
            if (ep.mode or default) == "bind":
                out.append(Bound(spec.name, side, ep.transport, ep.address,
                                 ep.backend or "native"))
        for side in ("control", "capture"):  # (gateway.device.steer: bound by default)
            url = getattr(spec, side)
            if not url:
                continue
            try:
                extra = parse(url)
            except ConfigError:
                continue
            if extra.mode != "connect":
                out.append(Bound(spec.name, side, extra.transport, extra.address))
    if metrics:
        out.append(Bound("", "metrics", "tcp", metrics))
    return out


def _tcp(b: Bound) -> tuple[str, int] | None:
    if b.transport not in TCP_TRANSPORTS:
        return None
    address = b.address.partition("/")[0] if b.transport in WEB_TRANSPORTS else b.address
    try:
        host, port = split_host_port(address)
    except ConfigError:
        return None
    return host, port


def _path(b: Bound) -> str:
    """A ws path (``/`` when none), or an ipc path made absolute and normal."""
    if b.transport in WEB_TRANSPORTS:
        return "/" + b.address.partition("/")[2]
    if b.transport == "ipc":
        return os.path.abspath(os.path.normpath(b.address))
    return b.address


@functools.lru_cache(maxsize=256)
def _addresses(host: str) -> frozenset[str]:
    """The IP addresses ``host`` resolves to (``localhost``: 127.0.0.1 and ::1), or the host
    itself when it does not resolve (an interface name such as ``lo``)."""
    if host in WILDCARDS or host == ANY_IPV4:
        return frozenset({host})
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return frozenset({host})
    return frozenset(str(info[4][0]).partition("%")[0] for info in infos) or frozenset({host})


def _hosts_clash(ha: str, hb: str) -> bool:
    if ha in WILDCARDS or hb in WILDCARDS:
        return True
    a, b = _addresses(ha), _addresses(hb)
    if ANY_IPV4 in (ha, hb):  # 0.0.0.0 takes every IPv4 address, no IPv6 one
        other = b if ha == ANY_IPV4 else a
        return any(":" not in x for x in other)
    return bool(a & b)


def _same(a: Bound, b: Bound) -> bool:
    ta, tb = _tcp(a), _tcp(b)
    if ta is not None and tb is not None:
        (ha, pa), (hb, pb) = ta, tb
        if not (pa == pb != 0 and _hosts_clash(ha, hb)):
            return False
        web = a.transport in WEB_TRANSPORTS and b.transport in WEB_TRANSPORTS
        if web and a.backend == b.backend == "pynng":  # nng shares a port among paths
            return _path(a) == _path(b)
        return True  # one listener a port: the native engine's ws does not share it
    if ta is not None or tb is not None:
        return False
    return a.transport == b.transport and _path(a) == _path(b)


def clashes(specs: list[BridgeSpec], where: str = "", metrics: str | None = None) -> list[str]:
    """One line per bound address (the ``metrics`` address too) that an earlier bridge side
    binds too (host names resolved)."""
    at = f"{where}: " if where else ""
    seen = bound(specs, metrics)
    errors = []
    for i, b in enumerate(seen):
        first = next((a for a in seen[:i] if _same(a, b)), None)
        if first is not None:
            errors.append(f"{at}{b.where}: {b.transport}://{b.address} is bound by "
                          f"{first.where} too: give each its own address")
    return errors


def ipc_paths(specs: list[BridgeSpec], where: str = "") -> list[str]:
    """One line per bound ipc path that ``run`` could not bind: its directory is missing, or
    the path is there and is not a socket (a stale socket is the engine's to replace)."""
    at = f"{where}: " if where else ""
    errors = []
    for b in bound(specs):
        if b.transport != "ipc" or not b.address:
            continue
        path = _path(b)
        if not os.path.isdir(os.path.dirname(path)):
            errors.append(f"{at}{b.where}: ipc://{b.address}: no directory "
                          f"{os.path.dirname(path)!r}")
        elif os.path.lexists(path) and not stat.S_ISSOCK(os.lstat(path).st_mode):
            errors.append(f"{at}{b.where}: ipc://{b.address}: the path is there and is not a "
                          "socket")
    return errors


def _interface(host: str) -> bool:
    """True when ``host`` is a network interface's name (libzmq binds ``tcp://lo:5555``)."""
    try:
        return host in {name for _, name in socket.if_nameindex()}
    except OSError:
        return False


def _try_tcp(host: str, port: int) -> OSError | None:
    host = "0.0.0.0" if host in ("", "*") else host
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers
        try:
            sock.bind(address)
        except OSError as exc:
            return exc
    return None


def _try_ipc(path: str) -> OSError | None:
    if not os.path.exists(path):
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(path)
        except OSError:
            return None  # a stale file: the engine replaces it
    return OSError(errno.EADDRINUSE, "a process listens on it")


def in_use(specs: list[BridgeSpec], where: str = "", metrics: str | None = None) -> list[str]:
    """One line per bound address (and the metrics address) that cannot be bound now; each
    is bound for a moment and released (never listened on)."""
    at = f"{where}: " if where else ""
    errors = []
    for b in bound(specs):
        tcp = _tcp(b)
        exc: OSError | None = None
        if tcp is not None and tcp[1] != 0:
            if _interface(tcp[0]):
                continue  # an interface, not a host: left to the engine that binds it
            exc = _try_tcp(*tcp)
        elif b.transport == "ipc":
            exc = _try_ipc(_path(b))
        if exc is not None:
            errors.append(f"{at}{b.where}: cannot bind {b.transport}://{b.address}: "
                          f"{exc.strerror or exc}")
    if metrics:
        with contextlib.suppress(ConfigError):
            host, port = split_host_port(metrics)
            exc = _try_tcp(host, port) if port else None
            if exc is not None:
                errors.append(f"{at}[gateway] metrics: cannot serve on {metrics}: "
                              f"{exc.strerror or exc}")
    return errors


__all__ = ["Bound", "bound", "clashes", "in_use", "ipc_paths"]
