"""A bridge: two endpoints, the implementation of each side, one forwarder, one ledger.

Like pyzmq's devices, a :class:`Bridge` records its endpoints and builds the sockets only in
:meth:`Bridge.open` (or :meth:`Bridge.run`). Which forwarder runs follows from what the two
sides' implementations offer (:mod:`gateway.adapter`):

==============================================  ==========================================
sides                                           forwarder
==============================================  ==========================================
a library proxy on both sides, asked for        :class:`ProxyForwarder` (libzmq's proxy)
  (``forwarder="proxy"``; same family)
a polled face on both sides (library backends)  :class:`PollForwarder` (one thread)
anything else (the native engine on a side)     :class:`AsyncForwarder` (asyncio; callbacks
                                                when both sides are native)
==============================================  ==========================================

Translation is :class:`gateway.envelope.Translator`'s, accounting the :class:`Ledger`'s: the
same for every forwarder and every pattern.

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

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from gateway import options
from gateway.adapter import SideOptions
from gateway.config import Limits
from gateway.device import sides
from gateway.device.forward_async import AsyncForwarder
from gateway.device.forward_poll import PollForwarder
from gateway.device.forward_proxy import ProxyForwarder
from gateway.device.ledger import REPLY, REQUEST, Ledger
from gateway.envelope import MixedTranslator, PatternTranslator, TokenTable, Translator
from gateway.errors import ConfigError, Drop
from gateway.logging import get_logger
from gateway.metrics import METRICS
from gateway.plugins import AdapterSpec, body_codec_hook, registry
from gateway.url import Endpoint, parse
from gateway.wire.sniff import ANY

log = get_logger("gateway.device")

FRONT_KIND, BACK_KIND = "REP", "REQ"  # raw: ROUTER-like front, DEALER-like back
#: pattern -> (front kind, back kind) handed to the side's implementation
KINDS = {"reqrep": (FRONT_KIND, BACK_KIND), "pubsub": ("XPUB", "XSUB"),
         "pipeline": ("PULL", "PUSH"), "pair": ("PAIR", "PAIR")}


def pattern_of(name: str, front: Endpoint, back: Endpoint) -> tuple[str, bool]:
    """The bridge's pattern from its two endpoints' ``pattern`` settings (either side may
    say it; both must agree), and whether the SP side speaks pair1."""
    said = {side: ep.settings.get("pattern", "") for side, ep in (("front", front),
                                                                   ("back", back))}
    pair1 = False
    for side, ep in (("front", front), ("back", back)):
        if said[side] == "pair1":
            if ep.family != "sp":
                raise ConfigError(f"bridge {name} {side}: pattern=pair1 is SP's pair1; a "
                                  f"ZeroMQ endpoint speaks pair ({ep.url})")
            pair1, said[side] = True, "pair"
    given = {p for p in said.values() if p}
    if len(given) > 1:
        raise ConfigError(f"bridge {name}: the front says pattern={said['front']}, the back "
                          f"pattern={said['back']}; say one")
    pattern = given.pop() if given else "reqrep"
    if pair1 and front.family == back.family == "zmtp":  # unreachable: refused above
        raise ConfigError(f"bridge {name}: pattern=pair1 needs an SP side")
    return pattern, pair1


class Forwarder(Protocol):
    def start(self) -> None: ...
    async def failed(self) -> None:
        """Returns (raising) only when forwarding died on its own."""
    def stop_requests(self) -> None: ...
    async def drain(self, grace: float) -> None: ...
    def backlog(self) -> int: ...
    async def close(self) -> None: ...


@dataclass
class Bridge:
    """One bridge. ``front`` defaults to bind, ``back`` to connect (CZMQ ``@``/``>`` override)."""

    front: str
    back: str
    name: str = "bridge"
    limits: Limits = field(default_factory=Limits)
    on_ready: Callable[[Bridge], None] | None = None
    forwarder: str = "auto"  # "auto", or "proxy" for the library's own (zmtp->zmtp, pyzmq)
    front_url: str = ""
    back_url: str = ""
    #: per-side settings beyond the URL's (``{SideOptions field: value}``, from TOML's
    #: ``front_options``/``back_options`` read by :func:`gateway.options.read`)
    front_options: dict[str, Any] = field(default_factory=dict)
    back_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        transports = frozenset(registry().transports)
        parsed, errors = [], []
        for url in (self.front, self.back):
            try:
                parsed.append(parse(url, transports=transports))
            except ConfigError as exc:
                errors.append(str(exc))
        if errors:  # both sides' mistakes at once
            raise ConfigError("\n".join(errors))
        front, back = parsed
        self._front_table = options.merged(front.settings, self.front_options,
                                           f"bridge {self.name} front")
        self._back_table = options.merged(back.settings, self.back_options,
                                          f"bridge {self.name} back")
        self.pattern, self.sp_pair1 = pattern_of(
            self.name, replace(front, options=tuple(self._front_table.items())),
            replace(back, options=tuple(self._back_table.items())))
        front, back = sides.default_backends(front, back)
        self._front_ep = front if front.mode else replace(front, mode="bind")
        self._back_ep = back if back.mode else replace(back, mode="connect")
        self._front_spec = sides.adapter_for(self._front_ep)
        self._back_spec = sides.adapter_for(self._back_ep)
        self._settings = {
            side: self._side_settings(side, ep, table, spec)
            for side, ep, table, spec in (
                ("front", self._front_ep, self.front_options, self._front_spec),
                ("back", self._back_ep, self.back_options, self._back_spec))}
        if self.forwarder not in ("auto", "proxy"):
            raise ConfigError(f"bridge {self.name}: forwarder must be auto or proxy, "
                              f"not {self.forwarder!r}")
        if self.forwarder == "proxy" and not self._proxy_capable():
            raise ConfigError(f"bridge {self.name}: forwarder=proxy needs the same family and "
                              f"one adapter with a proxy on both sides (e.g. backend=pyzmq)")
        self.mode = f"{front.family}->{back.family}"
        self.table = TokenTable(self.limits.pending_tokens, self.limits.token_ttl)
        if self.forwarder == "proxy" and self.pattern != "reqrep":
            raise ConfigError(f"bridge {self.name}: forwarder=proxy serves reqrep only")
        self.translator: Translator
        self._check_any(front, back)
        if self.pattern == "reqrep":
            if "subscribe" in self._front_table or "subscribe" in self._back_table:
                raise ConfigError(f"bridge {self.name}: subscribe is a pubsub setting")
            if front.family == ANY:
                self.translator = MixedTranslator(back.family, self.table, body_codec_hook())
            else:
                self.translator = Translator(front.family, back.family, self.table,
                                             body_codec_hook())
        else:
            subscribe = self._subscribe()
            self.translator = PatternTranslator(self.pattern, front.family, back.family,
                                                body_codec_hook(), subscribe=subscribe,
                                                sp_pair1=self.sp_pair1)
        self.kinds = KINDS[self.pattern]  # sp -> sp pair1: both sides pair1
        if self.sp_pair1:
            self.kinds = tuple("PAIR1" if ep.family == "sp" else "PAIR"  # type: ignore[assignment]
                               for ep in (front, back))
        self.ledger = Ledger(self.name)
        self.implementation = ""
        self._front: Any = None
        self._back: Any = None
        self._forwarder: Forwarder | None = None

    def _check_any(self, front: Endpoint, back: Endpoint) -> None:
        """``any+`` (one port, both wires) is a request-reply front the native engine binds."""
        if back.family == ANY:
            raise ConfigError(f"bridge {self.name} back: any+ is for a front (one port for "
                              f"both wires' clients); the back says zmq+ or sp+: {back.url}")
        if front.family != ANY:
            return
        if self.pattern != "reqrep":
            raise ConfigError(f"bridge {self.name} front: any+ serves request-reply, not "
                              f"pattern={self.pattern}: {front.url}")
        if self._front_ep.mode != "bind":
            raise ConfigError(f"bridge {self.name} front: any+ listens; it cannot dial "
                              f"{front.url}")

    def _subscribe(self) -> tuple[bytes, ...] | None:
        given: list[tuple[bytes, ...]] = [
            t["subscribe"] for t in (self._front_table, self._back_table)
            if t.get("subscribe") is not None]
        if given and self.pattern != "pubsub":
            raise ConfigError(f"bridge {self.name}: subscribe is a pubsub setting, not "
                              f"{self.pattern}")
        if not given:
            return None
        return tuple(dict.fromkeys(t for topics in given for t in topics))

    def _proxy_capable(self) -> bool:
        f, b = self._front_spec, self._back_spec
        return (f is not None and f is b and f.open_proxy is not None
                and self._front_ep.family == self._back_ep.family)

    def _polled(self) -> bool:
        f, b = self._front_spec, self._back_spec
        return (f is not None and b is not None
                and f.open_polled is not None and b.open_polled is not None)

    def _side_settings(self, side: str, ep: Endpoint, table: dict[str, Any],
                       spec: AdapterSpec | None) -> dict[str, Any]:
        where = f"bridge {self.name} {side}"
        settings = options.merged(ep.settings, table, where)
        options.check_family(settings, ep.family, where)
        if side == "back" and "router_handover" in settings:
            raise ConfigError(f"{where}: router_handover applies to the front (the ROUTER side "
                              f"clients connect to), not to the back")
        if spec is not None and spec.options is not None:
            ignored = set(settings) - spec.options - options.BRIDGE_FIELDS
            if ignored:
                raise ConfigError(f"{where}: backend {spec.name} does not support "
                                  f"{options.describe(ignored)} (it supports: "
                                  f"{options.describe(spec.options) or 'none'})")
        return settings

    def _options(self, front: bool) -> SideOptions:
        lim = self.limits
        base = SideOptions(max_message_size=lim.max_message_size, hop_limit=lim.hop_limit,
                           router_mandatory=front,
                           message_timeout=lim.message_timeout,
                           backlog=lim.backlog or None)
        return replace(base, **self._settings["front" if front else "back"],
                       router_mandatory=front and self.pattern == "reqrep")

    @property
    def in_flight(self) -> int:
        return self.ledger.in_flight

    @property
    def peers(self) -> tuple[int, int]:
        """Connected peers of the front and the back (-1: the implementation cannot tell)."""
        return sides.peers_of(self._front), sides.peers_of(self._back)

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        """Build, bind and connect both sides and the forwarder (inside the running loop); a
        failure leaves nothing behind (sockets closed, the ledger's cells and gauges released:
        a reload that keeps failing must not grow the registry)."""
        try:
            self._open()
        except BaseException:
            self.ledger.close()
            raise

    def _open(self) -> None:
        self.translator.body_codec = body_codec_hook()  # plugins registered since __init__
        ledger = self.ledger
        front_o, back_o = self._options(True), self._options(False)
        if self.forwarder == "proxy":
            assert self._front_spec is not None and self._front_spec.open_proxy is not None
            proxy = self._front_spec.open_proxy(front_o, back_o)
            self._front, self._back = proxy.front, proxy.back
            try:
                self.front_url = sides.attach(proxy.front, self._front_ep)
                self.back_url = sides.attach(proxy.back, self._back_ep)
            except BaseException:
                proxy.close()
                raise
            self._forwarder = ProxyForwarder(proxy, ledger)
            self.implementation = f"{self._front_spec.name} proxy"
        else:
            opener = sides.open_polled if self._polled() else sides.open_async
            front_kind, back_kind = self.kinds
            self._front, self.front_url = opener(self._front_ep, front_kind, front_o,
                                                 f"{self.name}/front")
            try:
                self._back, self.back_url = opener(self._back_ep, back_kind, back_o,
                                                   f"{self.name}/back")
            except BaseException:
                self._front.close()
                raise
            if opener is sides.open_polled:
                self._forwarder = PollForwarder(self._front, self._back, self.translator, ledger,
                                                hwm=back_o.hwm)
                self.implementation = "poller"
            else:
                self._forwarder = AsyncForwarder(self._front, self._back, self.translator, ledger)
                self.implementation = "asyncio"
        if isinstance(self.translator, MixedTranslator):  # any+: each client's wire, per message
            self.translator.family_of = self._front.socket.family_of
        ledger.replies_confirmed = getattr(self._front, "confirms_delivery", True)
        for sock, direction in ((self._front, REQUEST), (self._back, REPLY)):
            if isinstance(sock, sides.NativeRaw):  # its pattern's drops are this bridge's
                sock.socket.on_drop = partial(self._pattern_drop, direction)
        for side, sock in (("front", self._front), ("back", self._back)):
            METRICS.gauge("gateway_peers", partial(sides.peers_of, sock), bridge=self.name,
                          side=side)
        METRICS.gauge("gateway_pending_tokens", lambda: float(len(self.table)), bridge=self.name)
        if self.translator.subscriptions is not None:
            subs = self.translator.subscriptions
            METRICS.gauge("gateway_subscribed_prefixes", lambda: float(len(subs)), bridge=self.name)
        log.info("bridge.up", bridge=self.name, front=self.front_url, back=self.back_url,
                 mode=self.mode, pattern=self.pattern, forwarder=self.implementation,
                 front_backend=sides.backend_of(self._front_ep),
                 back_backend=sides.backend_of(self._back_ep))

    def _pattern_drop(self, direction: str, drop: Drop, endpoint: str) -> None:
        self.ledger.dropped(drop.reason, direction, drop.detail, peer=endpoint)

    async def run(self, stop: asyncio.Event) -> None:
        """Forward until ``stop`` is set, then drain in-flight replies for ``limits.grace``."""
        if self._forwarder is None:
            self.open()
        assert self._forwarder is not None
        fwd, ledger = self._forwarder, self.ledger
        if self.on_ready is not None:
            self.on_ready(self)
        fwd.start()
        failed = asyncio.ensure_future(fwd.failed())
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({failed, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if failed.done():
                failed.result()  # forwarding died: raise its error
            fwd.stop_requests()  # no new requests; replies to those in flight still cross
            await fwd.drain(self.limits.grace)
            if ledger.in_flight:
                log.warning("bridge.drain", bridge=self.name, unanswered=ledger.in_flight)
            left = fwd.backlog()
            if left:  # arrived after the stop: never forwarded, never answered
                ledger.dropped("shutdown", REQUEST, "request(s) not forwarded", left)
        finally:
            for task in (failed, stopper):
                task.cancel()
            await asyncio.gather(failed, stopper, return_exceptions=True)
            await fwd.close()
            self.close()

    def close(self) -> None:
        for sock in (self._front, self._back):
            if sock is not None:
                with contextlib.suppress(Exception):
                    sock.close()
        self.ledger.close()
        log.info("bridge.down", bridge=self.name)


__all__ = ["KINDS", "Bridge", "Endpoint", "pattern_of"]
