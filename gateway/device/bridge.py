"""A bridge: two endpoints, the implementation of each side, one forwarder, one ledger.

Like pyzmq's devices, a :class:`Bridge` records its description and builds the sockets only in
:meth:`Bridge.open` (or :meth:`Bridge.run`); what it will run is planned when it is made
(:mod:`gateway.device.plan`: the pattern, each side's implementation and options, every
mistake at once). Which forwarder runs follows from what the two sides' implementations offer
(:mod:`gateway.adapter`):

==============================================  ==========================================
sides                                           forwarder
==============================================  ==========================================
a library proxy on both sides, asked for        :class:`ProxyForwarder` (libzmq's proxy)
  (``forwarder="proxy"``; same family)
a polled face on both sides (library backends)  :class:`PollForwarder` (one thread)
anything else (the native engine on a side)     :class:`AsyncForwarder` (asyncio; callbacks
                                                when both sides are native)
==============================================  ==========================================

Translation is :class:`gateway.envelope.Translation`'s, the per-message step
:mod:`gateway.device.step`'s, accounting the :class:`Ledger`'s: the same for every forwarder
and every pattern.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from gateway import kernel
from gateway.config import BridgeSpec, Limits
from gateway.device import sides, steer
from gateway.device.forward_async import AsyncForwarder
from gateway.device.forward_poll import PollForwarder
from gateway.device.forward_proxy import ProxyForwarder
from gateway.device.ledger import REPLY, REQUEST, Ledger
from gateway.device.plan import KINDS, BridgePlan, plan
from gateway.device.tap import Tap
from gateway.device.watch import waiting, watch_back
from gateway.envelope import MixedTranslator, PatternTranslator, Translation, Translator
from gateway.errors import ConfigError
from gateway.logging import get_logger
from gateway.plugins import body_codec_hook
from gateway.url import Endpoint
from gateway.wire.sniff import ANY

log = get_logger("gateway.device")


class Forwarder(Protocol):
    def start(self) -> None: ...
    async def failed(self) -> None:
        """Returns (raising) only when forwarding died on its own."""
    def stop_requests(self) -> None: ...
    async def drain(self, grace: float) -> None: ...
    def backlog(self) -> int: ...
    async def close(self) -> None: ...


def _items(options: Mapping[str, Any] | tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(options.items())) if isinstance(options, Mapping) else tuple(options)


@dataclass
class Bridge:
    """One bridge. ``front`` defaults to bind, ``back`` to connect (CZMQ ``@``/``>`` override);
    the fields other than ``on_ready`` are its :class:`~gateway.config.BridgeSpec`."""

    front: str
    back: str
    name: str = "bridge"
    limits: Limits = field(default_factory=Limits)
    on_ready: Callable[[Bridge], None] | None = None
    forwarder: str = "auto"  # "auto", or "proxy" for the library's own (zmtp->zmtp, pyzmq)
    #: per-side settings beyond the URL's (``{SideOptions field: value}``, as TOML's
    #: ``front_options``/``back_options`` are read)
    front_options: Mapping[str, Any] | tuple[tuple[str, Any], ...] = ()
    back_options: Mapping[str, Any] | tuple[tuple[str, Any], ...] = ()
    front_url: str = ""
    back_url: str = ""
    #: zmq_proxy_steerable's control and capture endpoints (gateway.device.steer; "": none)
    control: str = ""
    capture: str = ""
    capture_format: str = "frames"
    #: the plan made when the spec was checked (:func:`planned`; None: plan now)
    planned: tuple[BridgePlan, Any] | None = None

    @classmethod
    def from_spec(cls, spec: BridgeSpec, on_ready: Callable[[Bridge], None] | None = None
                  ) -> Bridge:
        return cls(spec.front, spec.back, spec.name, spec.limits, on_ready, spec.forwarder,
                   spec.front_options, spec.back_options, control=spec.control,
                   capture=spec.capture, capture_format=spec.capture_format,
                   planned=spec.planned)

    @property
    def spec(self) -> BridgeSpec:
        return BridgeSpec(self.name, self.front, self.back, self.limits, self.forwarder,
                          _items(self.front_options), _items(self.back_options), self.control,
                          self.capture, self.capture_format)

    def __post_init__(self) -> None:
        if self.planned is None:
            self.planned = _plan(self.spec)
        self.plan: BridgePlan = self.planned[0]
        self.extras = self.planned[1]
        #: what a control endpoint's TERMINATE does (the supervisor's drain; None: stop this
        #: bridge's run, as its ``stop`` event would)
        self.on_terminate: Callable[[], None] | None = None
        self.tap: Tap | None = None
        self.control_url = self.capture_url = ""
        self._control: steer.Control | None = None
        p = self.plan
        self.pattern, self.sp_pair1, self.mode = p.pattern, p.sp_pair1, p.mode
        front, back = p.front.ep, p.back.ep
        self.table = kernel.token_table(self.limits.pending_tokens, self.limits.token_ttl,
                                        max_bytes=self.limits.pending_bytes)
        self.translator: Translation
        if self.pattern == "reqrep":
            if front.family == ANY:
                self.translator = MixedTranslator(back.family, self.table, body_codec_hook())
            else:
                self.translator = Translator(front.family, back.family, self.table,
                                             body_codec_hook())
        else:
            self.translator = PatternTranslator(self.pattern, front.family, back.family,
                                                body_codec_hook(), subscribe=p.subscribe,
                                                sp_pair1=self.sp_pair1)
        self.kinds = (p.front.kind, p.back.kind)
        self.ledger = Ledger(self.name)
        self.implementation = ""
        #: True when the compiled kernel forwards this bridge's usual messages (gateway.kernel)
        self.kernel = False
        self._front: Any = None
        self._back: Any = None
        self._forwarder: Forwarder | None = None
        self._stop: asyncio.Event | None = None
        self._given_front: tuple[Any, str] | None = None

    @property
    def _front_ep(self) -> Endpoint:
        return self.plan.front.ep

    @property
    def _back_ep(self) -> Endpoint:
        return self.plan.back.ep

    @property
    def in_flight(self) -> int:
        return self.ledger.in_flight

    @property
    def peers(self) -> tuple[int, int]:
        """Connected peers of the front and the back (-1: the implementation cannot tell)."""
        return _peers(self._front), _peers(self._back)

    @property
    def waiting(self) -> int:
        """Requests waiting for a back-end peer (:func:`gateway.device.watch.waiting`)."""
        fwd = self._forwarder
        held = fwd.backlog() + getattr(fwd, "held", 0) if fwd is not None else 0
        return waiting(_peers(self._back), held, self.ledger.in_flight)

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self, front: tuple[Any, str] | None = None) -> None:
        """Build, bind and connect both sides and the forwarder (inside the running loop); a
        failure leaves nothing behind (sockets closed, the ledger's cells and gauges released:
        a reload that keeps failing must not grow the registry). ``front``: the front socket
        and its URL of the bridge this one replaces (:meth:`takes_front_of`), used as it is."""
        self._given_front = front
        try:
            self._open()
        except BaseException:
            self.ledger.close()
            raise

    def takes_front_of(self, old: Bridge) -> bool:
        """True when this bridge, a reload's change of ``old``, can take over ``old``'s front
        socket (its listener, its clients' connections and the requests they sent) while
        ``old`` drains its back end: the same front (URL, settings, native engine),
        request-reply (what the old one drains is its replies; pub/sub's subscriptions are its
        translator's), no control or capture endpoint (their ports would be bound twice) and a
        back end that dials (a bound one would be too)."""
        fwd = old._forwarder
        return (self.plan.front == old.plan.front and self.plan.front.adapter is None
                and self.pattern == old.pattern == "reqrep"
                and not self.extras and not old.extras and self.forwarder == old.forwarder
                and self.plan.back.ep.mode != "bind" and isinstance(fwd, AsyncForwarder)
                and not fwd.released and bool(fwd.front.callbacks))

    @property
    def front_side(self) -> tuple[Any, str]:
        """The front socket and its URL (what :meth:`open` takes from the bridge replaced)."""
        return self._front, self.front_url

    def release_front(self) -> None:
        """Hand this bridge's front over to the bridge that replaces it (see
        :meth:`takes_front_of`): from now on this one forwards no request (those it has not
        forwarded wait in the front's inbox for the next one), delivers the replies to those
        in flight, and never closes the front."""
        fwd = self._forwarder
        assert isinstance(fwd, AsyncForwarder)
        fwd.release_front()

    def _open(self) -> None:
        self.translator.body_codec = body_codec_hook()  # plugins registered since __init__
        ledger, p = self.ledger, self.plan
        front_o, back_o = p.front.options, p.back.options
        if self.forwarder == "proxy":
            assert p.front.adapter is not None and p.front.adapter.open_proxy is not None
            proxy = p.front.adapter.open_proxy(front_o, back_o)
            self._front, self._back = proxy.front, proxy.back
            try:
                self.front_url = sides.attach(proxy.front, self._front_ep)
                self.back_url = sides.attach(proxy.back, self._back_ep)
            except BaseException:
                proxy.close()
                raise
            self._forwarder = ProxyForwarder(proxy, ledger)
            self.implementation = f"{p.front.adapter.name} proxy"
        else:
            opener = sides.open_polled if p.polled() else sides.open_async
            front_kind, back_kind = self.kinds
            given = self._given_front
            self._front, self.front_url = given or opener(self._front_ep, front_kind, front_o,
                                                          f"{self.name}/front")
            try:
                self._back, self.back_url = opener(self._back_ep, back_kind, back_o,
                                                   f"{self.name}/back")
            except BaseException:
                if given is None:
                    self._front.close()
                else:
                    self._front = None  # (still the bridge's that gave it)
                raise
            if opener is sides.open_polled:
                self._forwarder = PollForwarder(self._front, self._back, self.translator, ledger,
                                                hwm=back_o.hwm)
                self.implementation = "poller"
            else:
                try:
                    self.tap = self._open_tap()
                    self._forwarder = fwd = AsyncForwarder(self._front, self._back,
                                                           self.translator, ledger, self.tap)
                    if self.extras.control is not None and self.tap is not None:
                        self._control = steer.Control(self.name, self.extras.control, self.tap,
                                                      fwd, self._terminate)
                        self.control_url = self._control.url
                except BaseException:
                    if given is not None:
                        self._front = None  # (still the bridge's that gave it)
                    self.close()  # both sides and the capture endpoint: nothing left bound
                    raise
                self.implementation = "asyncio"
                self.kernel = fwd.kernel is not None
        if isinstance(self.translator, MixedTranslator):  # any+: each client's wire, per message
            self.translator.family_of = self._front.family_of
        ledger.replies_confirmed = self._front.confirms_delivery
        for side, sock in (("front", self._front), ("back", self._back)):
            ledger.gauge("gateway_peers", partial(_peers, sock), side=side)
        ledger.gauge("gateway_pending_tokens", lambda: float(len(self.table)))
        ledger.gauge("gateway_waiting_requests", lambda: float(self.waiting))
        if self.translator.subscriptions is not None:
            subs = self.translator.subscriptions
            ledger.gauge("gateway_subscribed_prefixes", lambda: float(len(subs)))
        log.info("bridge.up", bridge=self.name, front=self.front_url, back=self.back_url,
                 mode=self.mode, pattern=self.pattern, forwarder=self.implementation,
                 kernel=self.kernel, **({"control": self.control_url} if self.control_url else {}),
                 **({"capture": self.capture_url} if self.capture_url else {}),
                 front_backend=sides.backend_of(self._front_ep),
                 back_backend=sides.backend_of(self._back_ep))

    def _open_tap(self) -> Tap | None:
        """The tap of a bridge with a control or capture endpoint (its capture bound)."""
        if not self.extras:
            return None
        capture = None
        if self.extras.capture is not None:
            capture, self.capture_url = steer.open_capture(self.name, self.extras.capture,
                                                           self.capture_format)
        front, back = self.plan.front.ep.family, self.plan.back.ep.family
        sock = self._front

        def front_family(routing_id: bytes) -> str:
            return front if front != ANY else (sock.family_of(routing_id) or "zmtp")

        return Tap(self.name, front_family, back, capture,
                   counting=self.extras.control is not None)

    def _terminate(self) -> None:
        if self.on_terminate is not None:
            self.on_terminate()
        elif self._stop is not None:
            self._stop.set()

    async def run(self, stop: asyncio.Event, force: asyncio.Event | None = None) -> None:
        """Forward until ``stop`` is set, then drain in-flight replies for ``limits.grace``,
        or until ``force`` is set (a second signal): what is still in flight then is dropped
        (``forced-exit``)."""
        if self._forwarder is None:
            self.open()
        assert self._forwarder is not None
        fwd, ledger = self._forwarder, self.ledger
        self._stop = stop
        if self.on_ready is not None:
            self.on_ready(self)
        fwd.start()
        if self._control is not None:
            self._control.start()
        failed = asyncio.ensure_future(fwd.failed())
        stopper = asyncio.ensure_future(stop.wait())
        watcher = asyncio.ensure_future(watch_back(self.name, lambda: _peers(self._back),
                                                   lambda: self.waiting, self.back_url))
        try:
            await asyncio.wait({failed, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if failed.done():
                failed.result()  # forwarding died: raise its error
            fwd.stop_requests()  # no new requests; replies to those in flight still cross
            await self._drain(fwd, force)
            if ledger.in_flight:  # the grace is over: their back-end connections close now
                log.warning("bridge.drain", bridge=self.name, unanswered=ledger.in_flight)
                ledger.dropped("drain-timeout", REPLY, f"no reply within the grace "
                               f"({self.limits.grace:g} s)", ledger.in_flight)
            left = fwd.backlog()
            if left:  # arrived after the stop: never forwarded, never answered
                ledger.dropped("shutdown", REQUEST, "request(s) not forwarded", left)
        finally:
            for task in (failed, stopper, watcher):
                task.cancel()
            await asyncio.gather(failed, stopper, watcher, return_exceptions=True)
            await fwd.close()
            if self._control is not None:
                await self._control.close()
            self.close()

    async def _drain(self, fwd: Forwarder, force: asyncio.Event | None) -> None:
        drain = asyncio.ensure_future(fwd.drain(self.limits.grace))
        forced = asyncio.ensure_future(force.wait()) if force is not None else None
        waits = {drain} if forced is None else {drain, forced}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        if forced is not None and force is not None and force.is_set() and self.in_flight:
            self.ledger.dropped("forced-exit", REPLY, "a second signal ended the drain",
                                self.in_flight)

    def close(self) -> None:
        fwd = self._forwarder
        front = None if isinstance(fwd, AsyncForwarder) and fwd.released else self._front
        for sock in (front, self._back):
            if sock is not None:
                with contextlib.suppress(Exception):
                    sock.close()
        if self._control is not None:
            with contextlib.suppress(Exception):
                self._control.socket.close(0)
        if self.tap is not None:
            self.tap.close()
            self.tap = None
        self.ledger.close()
        log.info("bridge.down", bridge=self.name)


def _peers(sock: Any) -> int:
    """Connected peers of a side (-1: none open yet, or its implementation cannot tell)."""
    return -1 if sock is None else int(sock.peers)


def _plan(spec: BridgeSpec) -> tuple[BridgePlan, Any]:
    """The bridge's plan and its control and capture endpoints'; the mistakes of both at once
    (a bridge whose sides have mistakes still has its extras checked)."""
    errors: list[str] = []
    made: BridgePlan | None = None
    try:
        made = plan(spec)
    except ConfigError as exc:
        errors += str(exc).splitlines()
    try:
        extras = steer.plan_extras(spec, made)
    except ConfigError as exc:
        errors += str(exc).splitlines()
    if errors or made is None:
        raise ConfigError("\n".join(errors))
    return made, extras


def planned(specs: list[BridgeSpec], where: str = "") -> tuple[list[BridgeSpec], list[str]]:
    """Every bridge planned once (its URLs parsed, its files read): the specs carrying their
    plans (:attr:`BridgeSpec.planned`, which :class:`Bridge` takes instead of planning again)
    and every mistake of every bridge (each line naming the bridge and its side), prefixed with
    ``where`` (the file)."""
    errors: list[str] = []
    made: list[BridgeSpec] = []
    at = f"{where}: " if where else ""
    for spec in specs:
        try:
            made.append(replace(spec, planned=_plan(spec)))
        except ConfigError as exc:
            errors.extend(f"{at}{line}" for line in str(exc).splitlines())
            made.append(spec)
    return made, errors


def check(specs: list[BridgeSpec], where: str = "") -> list[str]:
    """Every mistake of every bridge (see :func:`planned`): what ``gateway check``, ``run``
    and ``bridge`` report before anything starts."""
    return planned(specs, where)[1]


__all__ = ["KINDS", "Bridge", "Endpoint", "check", "planned"]
