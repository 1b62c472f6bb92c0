"""A bridge's control and capture endpoints: ``zmq_proxy_steerable``'s protocol on the gateway.

``--control URL`` (the ``control`` key of a ``[[bridge]]``) binds a REP (``zmq+``: a ZeroMQ
REP, as ``zmq_proxy_steerable`` users connect a REQ; ``sp+``: an SP rep0) that answers
libzmq's commands exactly as libzmq 4.3.5 does (``handle_control`` in ``src/proxy.cpp``):

=============  =====================================================================
command        effect and reply
=============  =====================================================================
``PAUSE``      traffic held both ways (:meth:`AsyncForwarder.pause`); an empty reply
``RESUME``     traffic flows again; an empty reply
``TERMINATE``  the gateway drains and exits, as on SIGTERM; an empty reply
``STATISTICS`` eight parts, each a ``uint64_t`` in the host's byte order: front parts
               in, bytes in, parts out, bytes out, then the back's the same
               (:meth:`gateway.device.tap.Tap.statistics`); on an ``sp+`` control
               endpoint (no multipart) one 64-byte message of the eight
anything else  an empty reply (libzmq's REP "satisfies its duty"), counted ``unknown``
=============  =====================================================================

Each bridge has its own control endpoint (no bridge-name frame: a script written for one
``zmq_proxy_steerable`` steers one bridge unchanged). Every command is logged
(``control.command``) and counted (``gateway_control_commands_total{bridge, command}``).

``--capture URL`` binds a PUB (:class:`gateway.device.tap.CapturePublisher`). Both endpoints
are planned as a front is (:func:`gateway.device.plan._side_plan`): the same ``allow=``,
``max_connections``, CURVE and PLAIN settings, on the native engine only. A bridge with either
runs on the pure-Python forwarding step (the compiled kernel forwards a read without the
step), on the asyncio forwarder (a native side); ``forwarder=proxy`` and two library sides
have no step to see with.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.config import BridgeSpec
from gateway.device.plan import BridgePlan, SidePlan, _side_plan
from gateway.device.tap import CapturePublisher, Tap
from gateway.errors import ConfigError, GatewayError
from gateway.logging import get_logger
from gateway.message import Message
from gateway.metrics import METRICS
from gateway.plugins import registry
from gateway.settings import checks
from gateway.url import parse

log = get_logger("gateway.control")

#: libzmq's control commands, as sent (``zmq_proxy_steerable(3)``)
COMMANDS = (b"PAUSE", b"RESUME", b"TERMINATE", b"STATISTICS")
#: a STATISTICS part: uint64_t in the host's order, as libzmq memcpy's it
STAT = struct.Struct("=Q")
ENDPOINTS = ("control", "capture")


@dataclass(frozen=True)
class Extras:
    """The planned control and capture endpoints of a bridge (None: not asked for)."""

    control: SidePlan | None = None
    capture: SidePlan | None = None

    def __bool__(self) -> bool:
        return self.control is not None or self.capture is not None


def plan_extras(spec: BridgeSpec, plan: BridgePlan | None = None) -> Extras:
    """Plan ``spec``'s control and capture endpoints; one :class:`ConfigError` with every
    mistake, each naming the bridge and the endpoint."""
    name, errors = spec.name, []
    made: dict[str, SidePlan | None] = {"control": None, "capture": None}
    for what, kind in (("control", "REP"), ("capture", "PUB")):
        url = getattr(spec, what)
        if not url:
            continue
        where = f"bridge {name!r} {what}"
        try:
            ep = parse(url, transports=frozenset(registry().transports))
        except ConfigError as exc:
            errors += [f"{where}: {line}" for line in str(exc).splitlines()]
            continue
        if ep.backend not in (None, "native"):
            errors.append(f"{where}: the {what} endpoint is the native engine's; drop "
                          f"backend={ep.backend}: {url}")
            continue
        if ep.family not in ("zmtp", "sp"):
            errors.append(f"{where}: say zmq+ or sp+, not {ep.url}")
            continue
        ep = ep if ep.mode else _bound(ep)
        settings = ep.settings
        extra = set(settings) & {"pattern", "subscribe"}
        if extra:
            errors.append(f"{where}: {', '.join(sorted(extra))} is a bridge side's setting")
        errors += [f"{where}: {e}" for e in checks.endpoint_rules(
            settings, ep.family, registry().transport(ep.transport), ep.mode == "bind", "front")]
        made[what] = _side_plan(name, what, ep, None, kind,
                                {k: v for k, v in settings.items() if k not in extra},
                                spec.limits, "", errors)
    if plan is not None and (made["control"] or made["capture"]):
        if spec.forwarder == "proxy" or plan.polled():
            errors.append(f"bridge {name!r}: control and capture need the gateway's own "
                          "forwarding step (a native side, forwarder=auto)")
    if errors:
        raise ConfigError("\n".join(errors))
    return Extras(made["control"], made["capture"])


def _bound(ep: Any) -> Any:
    from dataclasses import replace

    return replace(ep, mode="bind")


def open_native(side: SidePlan, name: str, raw: bool = False) -> tuple[Any, str]:
    """A native socket for a control or capture endpoint, bound (or connected); its URL."""
    from gateway.device.sides import attach
    from gateway.engine.options import SocketOptions
    from gateway.engine.socket import Socket

    opts = SocketOptions(**{f: getattr(side.options, f) for f in side.options.__dataclass_fields__},
                         name=name)
    sock = Socket(side.kind, raw=raw, options=opts)
    return sock, attach(sock, side.ep)


def open_capture(bridge: str, side: SidePlan, fmt: str) -> tuple[CapturePublisher, str]:
    sock, url = open_native(side, f"{bridge}/capture")
    return CapturePublisher(bridge, sock, fmt), url


class Control:
    """A bridge's control endpoint (see the module doc). ``fwd``: its forwarder (``pause``,
    ``resume``); ``terminate``: what TERMINATE does (the supervisor's drain)."""

    def __init__(self, bridge: str, side: SidePlan, tap: Tap, fwd: Any,
                 terminate: Callable[[], None] | None) -> None:
        self.bridge, self.tap, self.fwd = bridge, tap, fwd
        self.terminate = terminate
        self.socket, self.url = open_native(side, f"{bridge}/control")
        self.family = side.ep.family
        self._counts = {c.decode().lower(): METRICS.declare("gateway_control_commands_total",
                                                             bridge=bridge,
                                                             command=c.decode().lower())
                        for c in (*COMMANDS, b"unknown")}
        self.paused = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def answer(self, frames: tuple[bytes, ...]) -> tuple[bytes, ...]:
        """The reply to one request (one frame, the command), having done what it says."""
        command = frames[0] if len(frames) == 1 else b""
        word = command.decode().lower() if command in COMMANDS else "unknown"
        METRICS.counters[self._counts[word]] += 1
        reply: tuple[bytes, ...] = (b"",)
        extra: dict[str, object] = {}
        if command == b"STATISTICS":
            stats = self.tap.statistics()
            reply = tuple(STAT.pack(v) for v in stats)
            extra["statistics"] = list(stats)
        elif command == b"PAUSE":
            self.fwd.pause()
            self.paused = True
        elif command == b"RESUME":
            self.fwd.resume()
            self.paused = False
        elif command == b"TERMINATE":
            if self.terminate is not None:
                asyncio.get_running_loop().call_soon(self.terminate)
        else:
            extra["reason"] = "unknown-command"
            extra["frames"] = len(frames)
        if word == "unknown":
            log.warning("control.command", bridge=self.bridge, command="unknown",
                        sent=repr(frames[0][:32]) if frames else "", **extra)
        else:
            log.info("control.command", bridge=self.bridge, command=word.upper(), **extra)
        return reply

    async def _serve(self) -> None:
        sock = self.socket
        while True:
            msg = await sock.recv_msg()
            reply = self.answer(msg.body)
            if self.family == "sp":  # SP has no multipart: STATISTICS' parts, joined (64 bytes)
                reply = (b"".join(reply),)
            try:
                await sock.send_msg(Message((), reply))
            except GatewayError as exc:  # the client went away: nothing to answer
                log.info("control.reply_lost", bridge=self.bridge, reason=str(exc))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.socket.close(0.2)  # (a TERMINATE's empty reply goes out first)


__all__ = ["COMMANDS", "ENDPOINTS", "STAT", "Control", "Extras", "open_capture",
           "plan_extras"]
