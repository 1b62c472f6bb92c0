"""How a native socket's sends choose pipes: one strategy per socket, named by its pattern
(``Pattern.strategy``, the mangos habit: the protocol owns its send strategy).

=========  ==========================================  =====================================
strategy   sockets                                     a send
=========  ==========================================  =====================================
balanced   REQ, DEALER, xreq, PUSH, PAIR               the next writable pipe, round robin;
                                                       none writable: ``send_now`` says None
                                                       (``send_msg`` waits, as libzmq blocks)
routed     ROUTER, xrep, REP                           the pipe named by the first hop; gone
                                                       or at its mark: dropped and counted
                                                       (``router_mandatory``: raised)
fanout     PUB, XPUB, XSUB                             every matching pipe, never waiting; a
                                                       pipe at its mark loses the message
=========  ==========================================  =====================================

Each strategy has ``send_now(msg)``, the general path through the pattern, and for a raw
request-reply socket (a pattern that keeps no state and leaves the envelope as it is) a fast
twin with the same results in fewer calls, made once by ``raw_sender()`` (a device's hot path;
a test pins the two together).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from gateway.engine.pipe import Pipe
from gateway.engine.writes import check_body
from gateway.errors import Closed, Drop, LocalProtocolError, PeerBusy, PeerGone
from gateway.message import Message, one_body
from gateway.metrics import METRICS
from gateway.patterns.pubsub import Publisher, Subscriber
from gateway.patterns.reqrep import SP, Pattern
from gateway.wire.events import Subscription


class Routing:
    """A socket's ready pipes: by routing id (``routes``) and in round-robin order (``out``);
    ``rr`` is where the next balanced send starts. Shared by the socket and its strategy. The
    reference twin of the compiled kernel's ``Routing`` (:data:`gateway.kernel.TWINS`)."""

    __slots__ = ("closed", "name", "out", "room", "routes", "rr")

    def __init__(self, name: str) -> None:
        self.name = name
        self.routes: dict[bytes, Pipe] = {}
        self.out: list[Pipe] = []
        self.rr = 0
        self.closed = False
        #: ``room[0]``: :meth:`has_room`, kept current by the socket (:meth:`recount`) in a
        #: cell that a device reads once a request without a call
        self.room = [False]

    def pick(self) -> Pipe | None:
        """The next writable pipe, round robin (None: none is)."""
        out = self.out
        n = len(out)
        for i in range(n):
            idx = (self.rr + i) % n
            pipe = out[idx]
            if pipe.writable:
                self.rr = idx + 1
                return pipe
        return None

    def has_room(self) -> bool:
        """True when a balanced send would go out now (a pipe is writable)."""
        for pipe in self.out:  # a loop, not any(genexpr): once per forwarded request
            if pipe.writable:
                return True
        return False

    def recount(self) -> None:
        """Bring :attr:`room` up to date: ``out`` or a pipe's writability changed."""
        self.room[0] = self.has_room()

    def add(self, pipe: Pipe) -> None:
        """A pipe is ready: sends may go out on it."""
        self.out.append(pipe)
        self.recount()

    def discard(self, pipe: Pipe) -> None:
        """Nothing more goes out on ``pipe`` (if it was one of ``out``)."""
        with contextlib.suppress(ValueError):
            self.out.remove(pipe)
        self.recount()

    def check_open(self) -> None:
        if self.closed:
            raise Closed(f"{self.name} socket is closed")


class Balanced:
    """Round robin over writable pipes."""

    def __init__(self, routing: Routing, pattern: Pattern,
                 sent: Callable[[Pipe], None]) -> None:
        self.routing = routing
        self.pattern = pattern
        self._sent = sent  # the socket's after-send step (a cooked REQ's resend timer)

    def send_now(self, msg: Message) -> bytes | None:
        pipe = self.routing.pick()
        if pipe is None:
            return None
        self.send_on(pipe, msg)
        return pipe.routing_id

    def send_on(self, pipe: Pipe, msg: Message) -> None:
        pattern = self.pattern
        check_body(pipe, msg)  # a refused send must not leave REQ waiting for a reply
        _, rest = pattern.prepare_send(msg)
        pipe.write(pattern.envelope(rest, pipe.family))
        self._sent(pipe)

    def raw_sender(self) -> Callable[[Message], bytes | None]:
        """``send_now`` for a raw REQ/DEALER (a pattern with no state of its own), inline: a
        closure, made once (the pure path calls it once a message)."""
        routing = self.routing
        out = routing.out

        def send_raw(msg: Message) -> bytes | None:
            if routing.closed:
                raise Closed(f"{routing.name} socket is closed")
            n = len(out)
            rr = routing.rr
            for i in range(n):
                idx = (rr + i) % n
                pipe = out[idx]
                if pipe.writable:
                    body = msg[1]
                    one_body(pipe.family, body)
                    routing.rr = idx + 1
                    hops = msg[0]
                    pipe.write_frames(hops + body if hops else body)
                    return pipe.routing_id
            return None

        return send_raw


class Routed:
    """To the pipe the first hop names; never buffered past the mark (libzmq's ROUTER)."""

    def __init__(self, routing: Routing, pattern: Pattern, mandatory: bool) -> None:
        self.routing = routing
        self.pattern = pattern
        self.mandatory = mandatory

    def send_now(self, msg: Message) -> bytes:
        pattern = self.pattern
        target = pattern.peek_target(msg)
        pipe = self.routing.routes.get(target) if target is not None else None
        if pipe is not None:
            check_body(pipe, msg)  # before the pattern's state changes
            if not pipe.writable and self.mandatory:
                raise PeerBusy(f"peer {target!r} is at its high-water mark")
        target, rest = pattern.prepare_send(msg)
        assert target is not None
        if pipe is None:
            if self.mandatory:
                raise PeerGone(f"no peer with routing id {target!r}")
            METRICS.inc("gateway_socket_dropped_messages_total", reason="unroutable")
            return target
        if not pipe.writable:  # never buffer past the mark (libzmq's ROUTER drops too)
            pipe.dropped("hwm")
            return target
        pipe.write(pattern.envelope(rest, pipe.family))
        pattern.sent(pipe.routing_id, pipe.family)
        return target

    def raw_sender(self) -> Callable[[Message], bytes | None]:
        """``send_now`` for a raw REP/ROUTER, inline: a closure, made once."""
        routing, kind, mandatory = self.routing, self.pattern.kind, self.mandatory
        routes = routing.routes

        def send_raw(msg: Message) -> bytes:
            if routing.closed:
                raise Closed(f"{routing.name} socket is closed")
            hops, body = msg
            if not hops:
                raise LocalProtocolError(f"{kind} send needs the peer's routing id as first hop")
            target = hops[0]
            pipe = routes.get(target)
            if pipe is None:
                if mandatory:
                    raise PeerGone(f"no peer with routing id {target!r}")
                METRICS.inc("gateway_socket_dropped_messages_total", reason="unroutable")
                return target
            one_body(pipe.family, body)
            if not pipe.writable:
                if mandatory:
                    raise PeerBusy(f"peer {target!r} is at its high-water mark")
                pipe.dropped("hwm")
                return target
            pipe.write_frames(hops[1:] + body)
            return target

        return send_raw


class Fanout:
    """To every pipe whose prefixes match (PUB, XPUB), or XSUB's subscriptions to every ZMTP
    publisher and its other messages upstream; never waits, never buffers past a mark."""

    def __init__(self, routing: Routing, pattern: Publisher | Subscriber,
                 dropped: Callable[[Drop, str], None]) -> None:
        self.routing = routing
        self.pattern = pattern
        self._dropped = dropped

    def send_now(self, msg: Message) -> bytes:
        try:
            plan = self.pattern.prepare_fanout(msg)
        except Drop as drop:
            self._dropped(drop, "")
            return b""
        if plan is None:  # a cancel that leaves a count: nothing to tell anyone
            return b""
        if isinstance(plan, Subscription):
            self.subscription(plan)
            return b""
        first, zmsg, smsg = plan
        filters = self.pattern.filters
        for pipe in self.routing.out:
            if first.startswith(filters.get(pipe.routing_id, ())):
                if pipe.writable:
                    pipe.write(smsg if pipe.family == SP else zmsg)
                else:  # never block, never buffer past the mark: this subscriber loses it
                    pipe.dropped("hwm")
        return b""

    def raw_sender(self) -> Callable[[Message], bytes | None]:
        return self.send_now  # (a fan-out has no faster twin)

    def subscription(self, sub: Subscription) -> None:
        """A subscription or cancel to every ZMTP publisher (SP pub/sub has none)."""
        for pipe in self.routing.out:
            if pipe.family != SP:
                pipe.write_subscription(sub)


Strategy = Balanced | Routed | Fanout


def strategy_for(pattern: Pattern, routing: Routing, *, router_mandatory: bool,
                 dropped: Callable[[Drop, str], None],
                 after_send: Callable[..., None]) -> Strategy:
    """The send strategy ``pattern.strategy`` names, over ``routing``'s pipes."""
    if pattern.strategy == "routed":
        return Routed(routing, pattern, router_mandatory)
    if pattern.strategy == "fanout":
        return Fanout(routing, pattern, dropped)  # type: ignore[arg-type]
    return Balanced(routing, pattern, after_send)

__all__ = ["Balanced", "Fanout", "Routed", "Routing", "Strategy", "strategy_for"]
