"""REQ, REP, DEALER, ROUTER and raw REQ/REP on the canonical ``Message(hops, body)``.

Sans-IO: the engine tells a pattern which pipe (by routing id) and which wire family a message
came from; the pattern says what to deliver, where a send goes and what goes on the wire. The
walk-through of the seed notes (nanomsg semantics) and libzmq's envelopes both reduce to one
rule per socket kind:

=========  ======================  ==============================  ==========================
kind       recv: hops              send: target                    state
=========  ======================  ==============================  ==========================
DEALER     split                   round-robin                     none
xreq       split                   round-robin                     none
REQ        split, check request    round-robin                     pending request (rid)
ROUTER     pipe id + split         pop first hop                   none
xrep       pipe id + split         pop first hop                   none
REP        pipe id + split         pop first hop of backtrace      backtrace of the request
=========  ======================  ==============================  ==========================

``split`` is per wire: ZMTP keeps the frames up to and including the first empty delimiter as
hops (:func:`split_zmtp`); SP moves 4-byte words from the body to the hops up to the word with
the top bit set, at most ``ttl`` words (:func:`split_sp`).

Deliberate differences from a single reference library, documented once here:

* REQ alternation is libzmq's (a second send before the reply raises ``StateError``) unless
  ``relaxed=True``, which gives nng's and ZMQ_REQ_RELAXED's behaviour: the new request replaces
  the pending one and a late reply to the old one is dropped.
* REP raises ``StateError`` on a second recv before the reply (libzmq); nng would silently
  discard the first request's backtrace.

Timers are sans-IO too (aioquic's ``get_timer``/``handle_timer``): a pattern says when it wants
to act (:meth:`Pattern.resend_deadline`), the engine calls :meth:`Pattern.handle_timer` then and
sends what it returns. Only REQ uses it: nng's resend of the pending SP request after
``resend_interval``, or at once when the pipe it went out on is lost (:meth:`Pattern.on_pipe_lost`).
"""

from __future__ import annotations

import random
from typing import Final

from gateway.errors import ConfigError, Drop, LocalProtocolError, RemoteProtocolError, StateError
from gateway.message import DELIMITER, Message
from gateway.wire.events import Subscription

ZMTP: Final = "zmtp"
SP: Final = "sp"
TOP_BIT: Final = 0x80
_new = tuple.__new__  # Message(...) without the NamedTuple __new__ wrapper (the hot path)


def split_zmtp(frames: tuple[bytes, ...]) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """Split ZMTP frames into (hops, body) at the first empty frame, which stays in the hops."""
    if DELIMITER in frames:  # (two searches in C beat one loop in Python)
        i = frames.index(DELIMITER) + 1
        return frames[:i], frames[i:]
    return (), frames


def split_sp(payload: bytes, ttl: int) -> tuple[tuple[bytes, ...], bytes]:
    """Move 4-byte words from an SP payload into hops, up to the word with the top bit set.

    Raises ``Drop("ttl")`` past ``ttl`` words (nng drops and keeps the pipe: devices can send
    such messages legitimately) and ``RemoteProtocolError`` when the payload ends before a word
    with the top bit set (nng kicks that peer).
    """
    if payload[:1] >= b"\x80" and len(payload) >= 4:  # one word, the request id: the usual
        return (payload[:4],), payload[4:]
    hops: list[bytes] = []
    offset = 0
    size = len(payload)
    while True:
        if len(hops) >= ttl:
            raise Drop("ttl")
        if offset + 4 > size:
            raise RemoteProtocolError("SP backtrace ends before the request id")
        word = payload[offset : offset + 4]
        hops.append(word)
        offset += 4
        if word[0] & TOP_BIT:
            return tuple(hops), payload[offset:]


class Pattern:
    """Raw device semantics; subclasses add the cooked REQ/REP state.

    ``routed`` patterns (ROUTER, xrep, REP) push the pipe's routing id on receive and pop the
    first hop on send to choose the pipe; the others load-balance sends.
    """

    routed = False
    cooked = False
    #: ZMTP frames up to an empty delimiter are hops (request-reply); False: no envelope at all
    #: (pub/sub, pipeline, pair: ``send_multipart`` frames are all body)
    enveloped = True
    #: how the engine's sends choose pipes (:mod:`gateway.engine.send`): ``balanced`` (round
    #: robin), ``routed`` (by the first hop) or ``fanout`` (every matching pipe, never waiting)
    strategy = "balanced"
    #: at most one peer at a time (PAIR): the engine refuses a second one
    exclusive = False

    def __init__(self, kind: str, raw: bool, *, ttl: int = 8) -> None:
        if not 1 <= ttl <= 15:
            raise LocalProtocolError(f"hop limit must be within 1..15, not {ttl}")
        self.kind = kind
        self.raw = raw
        self.ttl = ttl
        # read once a message: an instance attribute is a fast lookup, a class one is not
        self.routed = type(self).routed

    # -- receive ---------------------------------------------------------------------------
    def receive(self, routing_id: bytes, family: str, parts: tuple[bytes, ...]) -> Message | None:
        """A message arrived from the pipe ``routing_id``: the Message to queue for the app
        (``None``: the pattern consumed it, e.g. a subscription or a filtered topic)."""
        if family == SP:
            if self.routed:  # xrep/ROUTER/REP count hops (nng's TTL); xreq moves the whole stack
                hops, body = split_sp(parts[0], self.ttl)
                return _new(Message, ((routing_id, *hops), (body,)))
            hops, body = split_sp(parts[0], len(parts[0]) // 4 + 1)
            return _new(Message, (hops, (body,)))
        if DELIMITER in parts:  # split_zmtp, inline (once per message)
            i = parts.index(DELIMITER) + 1
            hops, frames = parts[:i], parts[i:]
        else:
            hops, frames = (), parts
        if self.routed:
            hops = (routing_id, *hops)
        return _new(Message, (hops, frames))

    def check_recv(self) -> None:
        """Raise ``StateError`` when the app may not receive now."""

    def deliver(self, msg: Message) -> Message | None:
        """The app takes ``msg`` off the queue: what it gets (``None``: drop, take the next)."""
        return msg

    # -- send --------------------------------------------------------------------------------
    def check_send(self) -> None:
        """Raise ``StateError`` when the app may not send now (before waiting for a pipe)."""

    def peek_target(self, msg: Message) -> bytes | None:
        """The routing id ``prepare_send`` would pick, without changing any state."""
        return msg[0][0] if self.routed and msg[0] else None

    def prepare_send(self, msg: Message) -> tuple[bytes | None, Message]:
        """Where ``msg`` goes (a routing id, or ``None`` to load-balance) and what remains."""
        if not self.routed:
            return None, msg
        hops = msg[0]
        if not hops:
            raise LocalProtocolError(f"{self.kind} send needs the peer's routing id as first hop")
        return hops[0], _new(Message, (hops[1:], msg[1]))

    def envelope(self, msg: Message, family: str) -> Message:
        """The message as it goes on a pipe of wire ``family`` (hops + body, in wire order)."""
        return msg

    def sent(self, routing_id: bytes, family: str = ZMTP, now: float = 0.0) -> None:
        """The message went out on pipe ``routing_id`` (of wire ``family``) at time ``now``."""

    # -- timers ------------------------------------------------------------------------------
    def resend_deadline(self) -> float | None:
        """When :meth:`handle_timer` wants to run (the engine's clock); ``None``: no timer."""
        return None

    def handle_timer(self, now: float) -> Message | None:
        """The timer fired: a message to send again (load-balanced, then :meth:`sent`), or
        ``None`` when nothing is due."""
        return None

    def on_pipe_lost(self, routing_id: bytes, family: str) -> bool:
        """The pipe ``routing_id`` is gone; ``True`` when :meth:`handle_timer` is due at once."""
        return False

    # -- peers and subscriptions (pub/sub, pair; request-reply has none) ------------------------
    def attach(self, routing_id: bytes, family: str) -> tuple[Subscription, ...]:
        """A pipe is ready: the subscriptions to send it (a SUB/XSUB's, to a new ZMTP publisher)."""
        return ()

    def detach(self, routing_id: bytes, family: str) -> tuple[Message, ...]:
        """A ready pipe is gone: messages for the app (an XPUB's cancels of what it held)."""
        return ()

    def subscription(self, routing_id: bytes, sub: Subscription) -> Message | None:
        """A ZMTP SUBSCRIBE/CANCEL command arrived: what to deliver to the app (XPUB), if anything.
        Only publishers take subscriptions; anything else drops it."""
        raise Drop("unexpected-message")

    # -- the application's own subscriptions (SUB, XSUB: gateway.patterns.pubsub) ----------------
    def subscribe(self, topic: bytes) -> Subscription:
        """Hold ``topic`` once more; the subscription to send upstream."""
        raise ConfigError(f"{self.kind} has no subscriptions (SUB and XSUB have)")

    def unsubscribe(self, topic: bytes) -> Subscription | None:
        """Hold ``topic`` once less; the cancel to send when nobody holds it any more."""
        raise ConfigError(f"{self.kind} has no subscriptions (SUB and XSUB have)")

    @property
    def topics(self) -> tuple[bytes, ...]:
        """The prefixes held (a SUB's, an XSUB's)."""
        raise ConfigError(f"{self.kind} has no subscriptions (SUB and XSUB have)")


class Req(Pattern):
    """Cooked REQ: one request at a time, matched with its reply.

    On SP the request carries a request id (random start, increments, top bit set); on ZMTP an
    empty delimiter frame, and the reply must come back on the pipe the request went out on.
    """

    cooked = True

    def __init__(self, kind: str, raw: bool, *, ttl: int = 8, relaxed: bool = False,
                 resend_interval: float = 60.0) -> None:
        super().__init__(kind, raw, ttl=ttl)
        self.relaxed = relaxed
        self.resend_interval = resend_interval
        self._next_id = random.getrandbits(31)
        self.pending: bytes | None = None  # the request id in flight
        self.request: Message | None = None  # kept for resends
        self.reply_pipe: bytes | None = None
        self._deadline: float | None = None  # resend time of an SP request

    def check_send(self) -> None:
        if self.pending is not None and not self.relaxed:
            raise StateError("REQ: cannot send another request before the reply (EFSM)")

    def prepare_send(self, msg: Message) -> tuple[bytes | None, Message]:
        self.check_send()
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        self.pending = (self._next_id | 0x80000000).to_bytes(4, "big")
        self.request = Message((), msg.body)
        self.reply_pipe = None
        return None, self.request

    def envelope(self, msg: Message, family: str) -> Message:
        if family == SP:
            assert self.pending is not None
            return Message((self.pending,), msg.body)
        return Message((DELIMITER,), msg.body)

    def sent(self, routing_id: bytes, family: str = ZMTP, now: float = 0.0) -> None:
        self.reply_pipe = routing_id
        # nng resends on SP; libzmq's REQ never resends on ZMTP
        self._deadline = now + self.resend_interval if family == SP else None

    def resend_deadline(self) -> float | None:
        return self._deadline if self.pending is not None else None

    def handle_timer(self, now: float) -> Message | None:
        deadline = self.resend_deadline()
        if deadline is None or now < deadline:
            return None
        return self.request  # due until sent() sets the next deadline

    def on_pipe_lost(self, routing_id: bytes, family: str) -> bool:
        if family == SP and self.pending is not None and routing_id == self.reply_pipe:
            self._deadline = float("-inf")  # as nng does: resend now, on another pipe
            return True
        return False

    def receive(self, routing_id: bytes, family: str, parts: tuple[bytes, ...]) -> Message:
        if self.pending is None:
            raise Drop("unexpected-reply")
        if family == SP:
            payload = parts[0]
            if len(payload) < 4:
                raise RemoteProtocolError("SP reply shorter than a request id")
            rid = payload[:4]
            if rid != self.pending:
                raise Drop("stale-reply")
            return Message((rid,), (payload[4:],))
        if routing_id != self.reply_pipe:
            raise Drop("wrong-pipe")
        if not parts or parts[0] != DELIMITER or len(parts) < 2:
            raise Drop("no-delimiter")
        return Message((DELIMITER,), parts[1:])

    def check_recv(self) -> None:
        if self.pending is None:
            raise StateError("REQ: cannot receive before sending a request (EFSM)")

    def deliver(self, msg: Message) -> Message | None:
        if msg.hops[0] != DELIMITER and msg.hops[0] != self.pending:
            return None  # a reply to a request that was replaced (relaxed mode)
        self.pending = self.request = self.reply_pipe = None
        self._deadline = None
        return Message((), msg.body)


class Rep(Pattern):
    """Cooked REP: keeps the request's backtrace and puts it back on the reply."""

    routed = True
    cooked = True
    strategy = "routed"

    def __init__(self, kind: str, raw: bool, *, ttl: int = 8) -> None:
        super().__init__(kind, raw, ttl=ttl)
        self.backtrace: tuple[bytes, ...] | None = None

    def receive(self, routing_id: bytes, family: str, parts: tuple[bytes, ...]) -> Message:
        msg = super().receive(routing_id, family, parts)
        assert msg is not None  # the base pattern always splits
        if family == ZMTP and (len(msg.hops) < 2 or msg.hops[-1] != DELIMITER or not msg.body):
            raise Drop("no-delimiter")  # libzmq's REP rolls back such a message
        return msg

    def check_recv(self) -> None:
        if self.backtrace is not None:
            raise StateError("REP: cannot receive before replying to the last request (EFSM)")

    def peek_target(self, msg: Message) -> bytes | None:
        return self.backtrace[0] if self.backtrace else None

    def deliver(self, msg: Message) -> Message:
        self.backtrace = msg.hops
        return Message((), msg.body)

    def check_send(self) -> None:
        if self.backtrace is None:
            raise StateError("REP: cannot send a reply before receiving a request (EFSM)")

    def prepare_send(self, msg: Message) -> tuple[bytes | None, Message]:
        self.check_send()
        assert self.backtrace is not None
        hops, self.backtrace = self.backtrace, None
        return hops[0], Message(hops[1:], msg.body)


class Router(Pattern):
    routed = True
    strategy = "routed"


def make_pattern(kind: str, raw: bool = False, *, ttl: int = 8, relaxed: bool = False,
                 resend_interval: float = 60.0) -> Pattern:
    """The pattern for a socket kind; ``raw`` turns REQ/REP into xreq/xrep."""
    kind = kind.upper()
    if kind == "REQ":
        if raw:
            return Pattern(kind, True, ttl=ttl)
        return Req(kind, False, ttl=ttl, relaxed=relaxed, resend_interval=resend_interval)
    if kind == "REP":
        return Router(kind, True, ttl=ttl) if raw else Rep(kind, False, ttl=ttl)
    if kind == "DEALER":
        return Pattern(kind, True, ttl=ttl)
    if kind == "ROUTER":
        return Router(kind, True, ttl=ttl)
    raise LocalProtocolError(f"unknown socket type {kind!r}: use REQ, REP, DEALER or ROUTER")
