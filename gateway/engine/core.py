"""The asyncio engine's socket core: a small coordinator over its collaborators (the
pyzmq-style face on top is :mod:`gateway.engine.socket`).

* endpoints: :meth:`Socket.bind` listens through the transport (its limits are the
  :class:`~gateway.engine.listener.Admission`'s), :meth:`Socket.connect` starts a
  :class:`~gateway.engine.dialer.Dialer`; both make :class:`~gateway.engine.pipe.Pipe` s with
  the wire codec the registry and the transport say;
* pipes tell the socket what happens (``PipeOwner``); ready ones are in the
  :class:`~gateway.engine.send.Routing` the send strategy shares;
* receiving: pipe -> pattern -> the observer (:class:`~gateway.engine.hooks.SocketHooks`, a
  device), a waiting ``recv``, or the bounded inbox; sending: the pattern's strategy
  (:mod:`gateway.engine.send`), chosen once;
* the pattern's timer (REQ's resend) is run here, sans-IO: the pattern says when and what.

Bounds: each pipe may have at most ``hwm`` messages in the inbox (then its reading is paused:
TCP back-pressure reaches the peer); each pipe's write buffer stops at ``hwm`` messages
(``hwm * 1 KiB``, or ``hwm`` times its largest message past 1 KiB: ``Writes.fit_mark``): load
balancing skips such a pipe (``send_msg`` waits), a routed send to it drops the message
(``PeerBusy`` with ``router_mandatory``).
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from typing import Any

from gateway import kernel
from gateway.engine.endpoints import Endpoints
from gateway.engine.failures import PipeFailure
from gateway.engine.hooks import SocketHooks
from gateway.engine.inbox import Inbox
from gateway.engine.listener import Admission, HandshakeReports
from gateway.engine.options import SocketOptions, socket_options
from gateway.engine.pipe import Pipe
from gateway.engine.send import Balanced, Routing, strategy_for
from gateway.engine.timer import PatternTimer
from gateway.errors import Closed, ConfigError, Drop
from gateway.logging import get_logger
from gateway.message import Message
from gateway.metrics import METRICS
from gateway.patterns.kinds import make_pattern
from gateway.patterns.pairing import canonical_kind
from gateway.patterns.reqrep import SP, Pattern, Router
from gateway.wire.events import HandshakeComplete

log = get_logger("gateway.engine")

_RUNNING_PIPE_IDS = [random.getrandbits(31)]


def _next_sp_pipe_id() -> bytes:
    _RUNNING_PIPE_IDS[0] = (_RUNNING_PIPE_IDS[0] + 1) & 0x7FFFFFFF or 1
    return _RUNNING_PIPE_IDS[0].to_bytes(4, "big")


class _Gone:
    """Stands for a pipe that went away in the inbox (an XPUB's cancels when a subscriber
    leaves): its messages hold back no reading."""

    def enqueued(self) -> None:
        pass

    def dequeued(self) -> None:
        pass


_GONE: Any = _Gone()
_NO_HOOKS = SocketHooks()


class SocketCore(Inbox):
    """The engine's socket without its pyzmq-style face (:class:`gateway.Socket` is both):
    endpoints, the pipes' events, the inbox, ``send_msg``/``recv_msg`` and close."""

    def __init__(self, kind: str, raw: bool = False, *, options: SocketOptions | None = None,
                 **settings: Any) -> None:
        opts = socket_options(options, settings)
        given = kind.upper()
        self.kind, raw = canonical_kind(kind, raw)
        self.raw = raw
        self.name = name = opts.name or (
            f"x{self.kind}" if raw and self.kind in ("REQ", "REP", "PUB", "SUB") else self.kind)
        self.options = opts = _loaded(opts, name)
        self.pattern: Pattern = make_pattern(
            self.kind, raw, ttl=opts.hop_limit, relaxed=opts.relaxed,
            resend_interval=opts.resend_interval, verbose=opts.verbose, filter=opts.filter,
            max_subscriptions=opts.max_subscriptions,
            max_subscription_bytes=opts.max_subscription_bytes)
        if opts.subscribe:
            if self.pattern.strategy != "fanout" or self.kind != "SUB":
                raise ConfigError(f"subscribe is a SUB/XSUB setting, not {given}'s")
            for topic in opts.subscribe:
                self.pattern.subscribe(topic)
        self.hwm = opts.hwm
        self.closed = False
        self.routing: Routing = kernel.twin("Routing")(name)
        #: messages received and not yet taken, in order (the compiled kernel forwards only
        #: while it is empty: what waits goes first)
        self.inbox: deque[tuple[Pipe, Message]] = deque()
        self._recv_waiter: asyncio.Future[tuple[Pipe, Message]] | None = None
        self._pipe_waiters: list[asyncio.Future[None]] = []
        self.timer = PatternTimer(self.pattern, self.routing)
        self.admission = Admission(name, opts.allow, opts.max_connections)
        self.reports = HandshakeReports(name)
        self.endpoints = Endpoints(self, self.kind, raw, opts, self.admission)
        self.hooks: SocketHooks = _NO_HOOKS
        self._take = _NO_HOOKS.message
        self._last_zmtp_id = random.getrandbits(32)
        self.sender = strategy_for(self.pattern, self.routing,
                                   router_mandatory=opts.router_mandatory,
                                   dropped=self._dropped, after_send=self.timer.after_send)
        #: ``send_now(msg)``: send without waiting (``send_msg`` awaits): the routing id of the
        #: pipe it went to, None when a load-balanced socket has no writable pipe (see
        #: ``_send_general``); the strategy's fast twin where the pattern keeps no state
        self.send_now = (self.sender.raw_sender() if type(self.pattern) in _STATELESS
                         else self._send_general)

    # -- the observer ------------------------------------------------------------------------
    def observe(self, hooks: SocketHooks | None) -> None:
        """Report to ``hooks`` (None: back to the socket's own behaviour)."""
        self.hooks = hooks or _NO_HOOKS
        self._take = self.hooks.message
        for pipe in self.routing.out:
            pipe.fast, pipe.fast_read = self.hooks.fast, self.hooks.fast_read

    # -- endpoints -------------------------------------------------------------------------
    def bind(self, url: str) -> str:
        """Listen on ``url`` now; return it with the real address (``:0`` -> the real port)."""
        self._check_open()
        return self.endpoints.bind(url)

    def connect(self, url: str) -> None:
        """Dial ``url`` in the background, redialling with backoff until closed."""
        self._check_open()
        self.endpoints.connect(url)

    def family_of(self, routing_id: bytes) -> str | None:
        """The wire family (``"zmtp"``, ``"sp"``) of the ready pipe with ``routing_id``, or
        None when there is none (an ``any+`` listener's pipes differ)."""
        pipe = self.routing.routes.get(routing_id)
        return None if pipe is None else pipe.family

    # -- pipe events (gateway.engine.pipe.PipeOwner) -----------------------------------------
    def pipe_ready(self, pipe: Pipe, event: HandshakeComplete) -> bytes | None:
        pattern, routes = self.pattern, self.routing.routes
        if pattern.exclusive and routes:  # PAIR: one peer (libzmq, nng pair0/pair1)
            pipe.abort("pair-busy", f"{self.kind} already has its peer")
            return None
        if pipe.family == SP:
            rid = _next_sp_pipe_id()
        elif event.identity and pattern.routed:
            rid = event.identity
            old = routes.get(rid)
            if old is not None:
                if not self.options.router_handover:
                    pipe.abort("duplicate-identity", repr(rid)[:80])
                    return None
                if old.authenticated_as != pipe.authenticated_as:
                    # with CURVE/PLAIN only the same client key or user may take a routing id
                    # over: another client would receive the replies to the first one's requests
                    pipe.abort("duplicate-identity", f"{rid!r}"[:80] + " is another client's")
                    return None
                self._hand_over(old, pipe)
        else:
            rid = self._zmtp_id()
        routes[rid] = pipe
        self.routing.add(pipe)
        pipe.fast, pipe.fast_read = self.hooks.fast, self.hooks.fast_read
        log.info("pipe.up", endpoint=pipe.endpoint, peer=pipe.peer, peer_type=event.peer_type,
                 socket=self.name,
                 **({"zmtp": f"{event.version[0]}.{event.version[1]}"} if pipe.family != SP else {}))
        for sub in pattern.attach(rid, pipe.family):  # a SUB's subscriptions to a new publisher
            pipe.write_subscription(sub)
        self._wake_senders()
        self.hooks.peers_changed()  # (an nng sub0 takes a PUB's sends from now: no SUBSCRIBE)
        return rid

    def _zmtp_id(self) -> bytes:
        self._last_zmtp_id = (self._last_zmtp_id + 1) & 0xFFFFFFFF
        return b"\x00" + self._last_zmtp_id.to_bytes(4, "big")

    def _hand_over(self, old: Pipe, new: Pipe) -> None:
        """ROUTER_HANDOVER as libzmq does it (router.cpp ``identify_peer``): the old pipe gets a
        fresh integral id (so that its loss touches nothing of the routing id's) and is closed;
        the caller gives the routing id to ``new``."""
        rid = old.routing_id
        routes = self.routing.routes
        del routes[rid]
        old.routing_id = self._zmtp_id()
        routes[old.routing_id] = old
        self.routing.discard(old)  # nothing more goes out on it
        old.abort("handover", f"routing id {rid!r} taken over by {new.peer or 'a new peer'}")

    def pipe_lost(self, pipe: Pipe, failure: PipeFailure | None) -> None:
        self.endpoints.pipes.discard(pipe)
        self.admission.release(pipe)
        if not pipe.ready:
            if failure is not None and not self.closed:
                self.reports.report(pipe, failure)
            return
        routes = self.routing.routes
        if routes.get(pipe.routing_id) is pipe:
            del routes[pipe.routing_id]
        self.routing.discard(pipe)
        if self.closed:
            return
        log.info("pipe.down", endpoint=pipe.endpoint, peer=pipe.peer,
                 reason=pipe.close_reason or "peer-closed", socket=self.name)
        self.hooks.pipe_lost(pipe.routing_id)
        self.hooks.peers_changed()
        for note in self.pattern.detach(pipe.routing_id, pipe.family):
            self._deliver(_GONE, note)  # an XPUB's cancels of what the peer held
        if self.pattern.on_pipe_lost(pipe.routing_id, pipe.family):
            self.timer.fire_soon()

    def pipe_writable(self, pipe: Pipe) -> None:
        self.routing.recount()
        if pipe.writable:
            self._wake_senders()
        self.hooks.peers_changed()

    def _wake_senders(self) -> None:
        waiters, self._pipe_waiters = self._pipe_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def pipe_unsent(self, pipe: Pipe, reason: str, count: int) -> bool:
        """``count`` messages for ``pipe`` were lost (``Writes.dropped``): True when the
        observer counted them."""
        return self.hooks.unsent(reason, pipe.endpoint, count)

    def _dropped(self, drop: Drop, endpoint: str) -> None:
        if self.hooks.dropped(drop, endpoint):  # a device accounts for its own sockets
            return
        METRICS.inc("gateway_socket_dropped_messages_total", reason=drop.reason)
        log.info("drop", reason=drop.reason, endpoint=endpoint, socket=self.name)

    def _send_general(self, msg: Message) -> bytes | None:
        """Send without waiting; return the routing id of the pipe it went to, or None when a
        load-balanced socket has no writable pipe. Routed sockets (ROUTER, xrep, REP) always
        return the target's id, like libzmq's ROUTER: the message went out, or it was dropped
        and counted because its peer is gone (``unroutable``) or at its mark (``hwm``); with
        ``router_mandatory`` those raise ``PeerGone`` / ``PeerBusy`` instead."""
        self._check_open()
        return self.sender.send_now(msg)

    async def send_msg(self, msg: Message) -> bytes:
        """Send one message; return the routing id of the pipe it went to. Raw/ROUTER sockets
        route by ``msg.hops``; REQ/DEALER load-balance over writable pipes, waiting for one
        when there is none (as libzmq blocks)."""
        self._check_open()  # a closed socket says Closed, whatever the pattern's state
        self.pattern.check_send()
        sent = self.sender.send_now(msg)
        if sent is None:
            pipe = await self.wait_writable()
            assert isinstance(self.sender, Balanced)
            self.sender.send_on(pipe, msg)
            return pipe.routing_id
        return sent

    async def wait_writable(self) -> Pipe:
        """Until a pipe is writable (a balanced send can go out); that pipe."""
        loop = asyncio.get_running_loop()
        while True:
            self._check_open()
            fut: asyncio.Future[None] = loop.create_future()
            self._pipe_waiters.append(fut)
            await fut
            pipe = self.routing.pick()
            if pipe is not None:
                return pipe

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def peers(self) -> int:
        """How many pipes finished their handshake."""
        return len(self.routing.routes)

    def _check_open(self) -> None:
        self.routing.check_open()

    def close(self, linger: float | None = None) -> None:
        """Close listeners, dialers and pipes. Pending writes get ``linger`` seconds; never hangs."""
        if self.closed:
            return
        self.closed = self.routing.closed = True
        self.timer.cancel()
        self.endpoints.close(self.options.linger if linger is None else linger)
        exc = Closed(f"{self.name} socket is closed")
        if self._recv_waiter is not None and not self._recv_waiter.done():
            self._recv_waiter.set_exception(exc)
        for fut in self._pipe_waiters:
            if not fut.done():
                fut.set_exception(exc)
        self._pipe_waiters = []

    def __repr__(self) -> str:
        return (f"<gateway.Socket {self.name} pipes={len(self.routing.routes)}"
                f"{' closed' if self.closed else ''}>")


#: patterns that keep no state and leave the envelope as it is (raw REQ/DEALER, raw REP/ROUTER):
#: their sends take the strategy's fast twin
_STATELESS: frozenset[type] = frozenset({Pattern, Router})


def _loaded(opts: SocketOptions, name: str) -> SocketOptions:
    """The options with the security and TLS material loaded from the files they name (once,
    when the socket is made), unless given as ``security=``/``tls=``."""
    from dataclasses import replace

    from gateway.settings.checks import SECURITY_FIELDS, TLS_FIELDS

    changes: dict[str, Any] = {}
    if opts.security is None and any(getattr(opts, f) not in (None, False)
                                     for f in SECURITY_FIELDS):
        from gateway.security import security_of

        changes["security"] = security_of(opts)
    if opts.tls is None and any(getattr(opts, f) is not None for f in TLS_FIELDS):
        from gateway.tls import tls_of

        changes["tls"] = tls_of(opts)
    if name != opts.name:
        changes["name"] = name
    return replace(opts, **changes) if changes else opts


__all__ = ["SocketCore"]
