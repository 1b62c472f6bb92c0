"""What ``gateway run`` would refuse at bind time, found before anything starts: two bridges
binding one address (:func:`clashes`, no I/O: ``bridge``, ``run``, ``check`` and a reload
all run it), and an address another process holds (:func:`in_use`, ``gateway check`` only:
each address is bound for a moment with the options the engine binds with, then released,
never listened on). Every line names the bridge and its side."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from dataclasses import dataclass

from gateway.config import BridgeSpec
from gateway.errors import ConfigError
from gateway.url import parse, split_host_port

#: transports whose address is host:port on TCP (one port, one listener)
TCP_TRANSPORTS = frozenset({"tcp", "tls+tcp"})
#: hosts that mean "every interface": they clash with any host on the same port
WILDCARDS = frozenset({"", "*", "0.0.0.0", "::"})


@dataclass(frozen=True)
class Bound:
    """One bound address of a bridge side."""

    bridge: str
    side: str  # "front" or "back"
    transport: str
    address: str

    @property
    def where(self) -> str:
        return f"bridge {self.bridge!r} {self.side}"


def bound(specs: list[BridgeSpec]) -> list[Bound]:
    """The addresses the bridges bind (front: bind unless ``>``; back: only with ``@``);
    URLs that do not parse are left to the rules that report them."""
    out: list[Bound] = []
    for spec in specs:
        for side, url, default in (("front", spec.front, "bind"), ("back", spec.back, "connect")):
            try:
                ep = parse(url)
            except ConfigError:
                continue
            if (ep.mode or default) == "bind":
                out.append(Bound(spec.name, side, ep.transport, ep.address))
    return out


def _tcp(b: Bound) -> tuple[str, int] | None:
    if b.transport not in TCP_TRANSPORTS:
        return None
    try:
        host, port = split_host_port(b.address)
    except ConfigError:
        return None
    return host, port


def _same(a: Bound, b: Bound) -> bool:
    ta, tb = _tcp(a), _tcp(b)
    if ta is not None and tb is not None:
        (ha, pa), (hb, pb) = ta, tb
        return pa == pb != 0 and (ha == hb or ha in WILDCARDS or hb in WILDCARDS)
    if ta is not None or tb is not None:
        return False
    return a.transport == b.transport and a.address == b.address


def clashes(specs: list[BridgeSpec], where: str = "") -> list[str]:
    """One line per bound address that an earlier bridge side binds too."""
    at = f"{where}: " if where else ""
    seen = bound(specs)
    errors = []
    for i, b in enumerate(seen):
        first = next((a for a in seen[:i] if _same(a, b)), None)
        if first is not None:
            errors.append(f"{at}{b.where}: {b.transport}://{b.address} is bound by "
                          f"{first.where} too: give each bridge its own address")
    return errors


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
            exc = _try_tcp(*tcp)
        elif b.transport == "ipc":
            exc = _try_ipc(b.address)
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


__all__ = ["Bound", "bound", "clashes", "in_use"]
