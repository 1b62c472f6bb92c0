"""The gateway process: its bridges, signals, reload and readiness (``gateway bridge``/``run``).

* SIGINT/SIGTERM: one line (``shutdown.draining``: the signal, requests in flight, the grace),
  every bridge drains its in-flight replies for its grace, then exit 0; a second signal ends the
  drain now (``shutdown.forced``, what is still in flight counted ``forced-exit``); once the
  drain is over, a signal is ignored until the process exits (exit 0, not killed by it);
* SIGHUP: the config is read again; bridges added, removed or changed are started, drained and
  restarted, unchanged ones keep their connections and requests in flight; a changed bridge
  with the same front is replaced on that front (``bridge.replaced``: the new one forwards
  every request from now on, the old one drains its back end for its grace, nothing is
  rebound, see :meth:`Supervisor._take_over`); a config with
  mistakes is refused (every mistake logged) and the running bridges go on; each changed
  bridge logs what changed (``config.changed``), and so does ``[gateway] unknown_peers``,
  applied at once (the other ``[gateway]`` keys need a restart);
* systemd (``Type=notify``): ``READY=1`` once every front is bound, ``RELOADING=1`` /
  ``READY=1`` around a reload, ``STOPPING=1``, and ``STATUS=`` with each bridge's peers;
* ``READY front=... back=...`` on stdout for each bridge that starts (scripts wait for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass

from gateway.config import BridgeSpec
from gateway.device import Bridge
from gateway.errors import BridgeStopped, ConfigError, GatewayError
from gateway.logging import get_logger
from gateway.observe import ObserveServer

log = get_logger("gateway.supervisor")
STATUS_EVERY = 5.0  # seconds between two STATUS updates to systemd

#: the READY line's fields, in the order they are written: ``READY front=URL back=URL``, then
#: ``name=`` (more than one bridge, or ``--name`` given), ``metrics=HOST:PORT`` and ``workers=N`` when they apply,
#: ``control=URL`` and ``capture=URL`` for a bridge with those endpoints
READY_FIELDS = ("front", "back", "name", "metrics", "workers", "control", "capture")


def ready_line(**fields: object) -> str:
    """The READY line of one bridge (the one writer: :meth:`Supervisor._start`, and the parent
    of ``--workers``): the fields of :data:`READY_FIELDS` that are not None, in that order.
    A value never holds a space (URLs, names and addresses are checked before they get here)."""
    unknown = set(fields) - set(READY_FIELDS)
    if unknown:
        raise ValueError(f"not READY fields: {sorted(unknown)}")
    return " ".join(["READY"] + [f"{k}={fields[k]}" for k in READY_FIELDS
                                 if fields.get(k) is not None])


def parse_ready(line: str) -> dict[str, str] | None:
    """The fields of a READY line (:func:`ready_line`), or None when ``line`` is not one."""
    words = line.split()
    if not words or words[0] != "READY":
        return None
    return dict(w.split("=", 1) for w in words[1:] if "=" in w)


def sd_notify(message: str) -> bool:
    """Send ``message`` to systemd's ``NOTIFY_SOCKET`` (if set); False when it could not."""
    path = os.environ.get("NOTIFY_SOCKET", "")
    if not path:
        return False
    address = "\0" + path[1:] if path.startswith("@") else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError as exc:
        log.warning("notify.failed", socket=path, error=str(exc))
        return False
    return True


def spec_changes(old: BridgeSpec, new: BridgeSpec) -> dict[str, str]:
    """What a reload changes in a bridge, ``{field: "old -> new"}`` (limits by their own
    names, ``limits.grace``; URLs with their secrets masked)."""
    from dataclasses import fields

    from gateway.settings.schema import mask

    out: dict[str, str] = {}
    for f in fields(BridgeSpec):
        if not f.compare:  # (the plan it carries: not what the bridge is)
            continue
        a, b = getattr(old, f.name), getattr(new, f.name)
        if a == b:
            continue
        if f.name == "limits":
            for g in fields(a):
                x, y = getattr(a, g.name), getattr(b, g.name)
                if x != y:
                    out[f"limits.{g.name}"] = f"{x} -> {y}"
        else:
            out[f.name] = mask(f"{a} -> {b}")
    return out


@dataclass
class _Running:
    spec: BridgeSpec
    bridge: Bridge
    stop: asyncio.Event
    task: asyncio.Task[None]


def _ignore_late_signals(loop: asyncio.AbstractEventLoop) -> None:
    """Drained: a SIGINT, SIGTERM or SIGHUP from now until the process ends changes nothing,
    and must not kill it by the signal. The loop's handlers are removed (else its close would
    restore the defaults: asyncio's does) and the signals ignored, while this thread blocks
    them, so the defaults that removing restores never see one."""
    late = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, late)
    try:
        for sig in late:
            with contextlib.suppress(ValueError, RuntimeError):
                loop.remove_signal_handler(sig)
            signal.signal(sig, signal.SIG_IGN)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, late)


class Supervisor:
    """Runs the bridges of ``specs``; ``reload`` (when given) returns the specs and the
    ``unknown_peers`` of a re-read config or raises :class:`ConfigError` with its mistakes
    (any other exception is logged as a refused reload too)."""

    def __init__(self, specs: list[BridgeSpec], metrics: str | None,
                 reload: Callable[[], tuple[list[BridgeSpec], str]] | None = None,
                 unknown_peers: str = "waiting", show_names: bool = False) -> None:
        self.specs = specs
        self.show_names = show_names  # name= on READY lines with one bridge too (--name)
        self.unknown_peers = unknown_peers
        self.metrics = metrics
        #: the bridges drained and SIGINT/SIGTERM ignored (a late one must not kill the process)
        self.drained = False
        self.reload = reload
        self.running: dict[str, _Running] = {}
        self.server: ObserveServer | None = None
        self._stop = asyncio.Event()
        self._force = asyncio.Event()  # a second SIGINT/SIGTERM: the drain ends now
        self._draining: list[_Running] = []  # stopped, not yet drained
        self._reload = asyncio.Event()

    def readiness(self) -> list[tuple[str, int, int]]:
        return [(name, *r.bridge.peers) for name, r in list(self.running.items())]

    def status(self) -> str:
        rows = [f"{name} front={f} back={b}" for name, f, b in self.readiness()]
        return "; ".join(rows) or "no bridges"

    # -- starting and stopping bridges ---------------------------------------------------------
    def _open(self, specs: list[BridgeSpec]) -> list[Bridge]:
        """Build, bind and connect; all or nothing (a failure closes the ones already open)."""
        opened: list[Bridge] = []
        try:
            for spec in specs:
                bridge = Bridge.from_spec(spec)
                try:
                    bridge.open()
                except (GatewayError, OSError) as exc:  # a bind failure names its bridge
                    raise ConfigError(f"bridge {spec.name!r}: {exc}") from None
                opened.append(bridge)
        except BaseException:
            for bridge in opened:
                bridge.close()
            raise
        return opened

    def _start(self, specs: list[BridgeSpec], bridges: list[Bridge]) -> None:
        many = len(self.specs) > 1 or self.show_names
        metrics = self.server.address if self.server is not None else None
        for spec, bridge in zip(specs, bridges, strict=True):
            stop = asyncio.Event()
            task = asyncio.get_running_loop().create_task(bridge.run(stop, self._force),
                                                          name=spec.name)
            self.running[spec.name] = _Running(spec, bridge, stop, task)
            bridge.on_terminate = self.terminate
            print(ready_line(front=bridge.front_url, back=bridge.back_url,
                             name=bridge.name if many else None, metrics=metrics,
                             control=bridge.control_url or None,
                             capture=bridge.capture_url or None), flush=True)

    async def _stop_bridges(self, names: list[str]) -> None:
        gone = [self.running.pop(name) for name in names]
        self._draining += gone
        await self._drain(gone)

    def _take_over(self, names: list[str], new: dict[str, BridgeSpec]) -> list[_Running]:
        """The changed bridges whose new version can take over the old one's front (the same
        front: :meth:`Bridge.takes_front_of`) start now, on that front: no client is
        disconnected and no request is lost; the old ones, no longer running, forward no
        request from now on and drain their back ends (:meth:`_drain`). The others
        are stopped and started again (their front goes down for the drain)."""
        taken: list[_Running] = []
        for name in names:
            old = self.running[name]
            bridge = Bridge.from_spec(new[name])
            if not bridge.takes_front_of(old.bridge):
                bridge.ledger.close()
                continue
            try:
                bridge.open(front=old.bridge.front_side)
            except (GatewayError, OSError) as exc:  # the old one goes on as it was
                log.error("config.reload_failed", error=str(exc), bridges=[name])
                continue
            old.bridge.release_front()
            del self.running[name]
            self._draining.append(old)
            self._start([new[name]], [bridge])
            log.info("bridge.replaced", bridge=name, in_flight=old.bridge.in_flight,
                     grace=old.spec.limits.grace)
            taken.append(old)
        return taken

    async def _drain(self, gone: list[_Running]) -> None:
        """Stop bridges no longer running (stopped, or replaced on their own front): each
        delivers the replies to what it has in flight for its grace, then closes (a replaced
        one, its back end only)."""
        for r in gone:
            r.stop.set()
        try:
            await asyncio.gather(*(r.task for r in gone), return_exceptions=True)
        finally:
            self._draining = [r for r in self._draining if r not in gone]

    # -- signals ---------------------------------------------------------------------------------
    def in_flight(self) -> int:
        return sum(r.bridge.in_flight for r in [*self.running.values(), *self._draining])

    def terminate(self) -> None:
        """A control endpoint's TERMINATE: the whole gateway drains, as on a first SIGTERM."""
        self._signalled(signal.SIGTERM, by="TERMINATE")

    def _signalled(self, sig: signal.Signals, by: str = "") -> None:
        """SIGINT/SIGTERM: the first drains (one line: what is in flight, for how long), a
        second ends the drain now, counting what it drops."""
        if not self._stop.is_set():
            grace = max((r.spec.limits.grace for r in self.running.values()), default=0.0)
            log.info("shutdown.draining", signal=by or sig.name, in_flight=self.in_flight(),
                     grace=grace, hint=f"send {sig.name} again to exit now")
            self._stop.set()
        elif not self._force.is_set():
            log.warning("shutdown.forced", signal=sig.name, dropped=self.in_flight())
            self._force.set()

    # -- reload ------------------------------------------------------------------------------------
    async def _do_reload(self) -> None:
        if self.reload is None:
            log.warning("config.reload", result="nothing to reload: no config file (gateway bridge)")
            return
        sd_notify("RELOADING=1")
        try:
            specs, unknown_peers = self.reload()
        except Exception as exc:  # noqa: BLE001 - no mistake in a file may end the gateway
            lines = (str(exc).splitlines() if isinstance(exc, GatewayError)
                     else [f"{type(exc).__name__}: {exc}"])
            for line in lines:
                log.error("config.reload_failed", error=line)
            log.warning("config.reload", result="refused: the running bridges go on")
            sd_notify("READY=1")
            return
        if unknown_peers != self.unknown_peers:  # /readyz reads it at each request
            log.info("config.changed", gateway="unknown_peers", unknown_peers=unknown_peers,
                     was=self.unknown_peers)
            self.unknown_peers = unknown_peers
        new = {s.name: s for s in specs}
        old = {name: r.spec for name, r in self.running.items()}
        removed = [n for n in old if n not in new]
        changed = [n for n in old if n in new and new[n] != old[n]]
        added = [n for n in new if n not in old]
        self.specs = specs
        taken = self._take_over(changed, new)
        kept_front = {r.spec.name for r in taken}
        await self._stop_bridges(removed + [n for n in changed if n not in kept_front])
        starting = [new[n] for n in changed + added if n not in kept_front]  # (ports free)
        try:
            self._start(starting, self._open(starting))
        except (GatewayError, OSError) as exc:
            log.error("config.reload_failed", error=str(exc), bridges=[s.name for s in starting])
        await self._drain(taken)
        for name in changed:
            log.info("config.changed", bridge=name, **spec_changes(old[name], new[name]))
        log.info("config.reloaded", added=added, removed=removed, changed=changed,
                 kept=[n for n in old if n in new and n not in changed])
        sd_notify("READY=1")  # (STATUS= follows from the serving loop, once)

    # -- the process -------------------------------------------------------------------------------
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._signalled, sig)
        loop.add_signal_handler(signal.SIGHUP, self._reload.set)
        self.server = (ObserveServer(self.metrics, self.readiness, lambda: self.unknown_peers)
                       if self.metrics else None)
        try:
            self._start(self.specs, self._open(self.specs))
        except BaseException:
            if self.server is not None:
                self.server.close()
            raise
        sd_notify("READY=1")
        sd_notify(f"STATUS={self.status()}")
        try:
            await self._serve()
        finally:
            sd_notify("STOPPING=1")
            await self._stop_bridges(list(self.running))
            if self.server is not None:
                self.server.close()
            self.drained = True
            _ignore_late_signals(loop)
        return 0

    async def _serve(self) -> None:
        while not self._stop.is_set():
            waiters = [asyncio.ensure_future(self._stop.wait()),
                       asyncio.ensure_future(self._reload.wait())]
            tasks = [r.task for r in self.running.values()]
            done, _ = await asyncio.wait([*waiters, *tasks], timeout=STATUS_EVERY,
                                         return_when=asyncio.FIRST_COMPLETED)
            for w in waiters:
                w.cancel()
            for task in tasks:
                if task in done:  # a bridge that ended by itself: its error ends the process
                    task.result()
                    raise BridgeStopped(f"bridge {task.get_name()} stopped on its own")
            if self._reload.is_set() and not self._stop.is_set():
                self._reload.clear()
                await self._do_reload()
            with contextlib.suppress(Exception):
                sd_notify(f"STATUS={self.status()}")
