"""PUB, XPUB, SUB, XSUB (ZMTP, RFC 29) and pub0, sub0 (SP), sans-IO.

Subscriptions, as libzmq and nng keep them:

* **At the subscriber** (SUB, XSUB, sub0) they are *counted* (RFC 29: additive, not idempotent;
  libzmq's ``trie_t``): subscribing ``a.`` twice takes two unsubscribes. Every subscribe goes
  upstream, a cancel only when the count reaches zero. A new ZMTP publisher gets each held
  prefix once (libzmq's ``xsub_t::xattach_pipe``). SP carries no subscription at all: sub0
  filters locally (nng ``sub.md``).
* **At the publisher** (PUB, XPUB) each ZMTP pipe holds a *set* of prefixes (libzmq's
  ``mtrie_t``: one pipe subscribing twice is held once, and its one cancel removes it); a message
  goes to a ZMTP pipe when its first frame starts with one of them, and to every SP pipe (sub0
  filters itself). Across pipes the publisher counts holders, so an XPUB tells the application
  when a prefix gets its first holder (``01 + prefix``) and loses its last (``00 + prefix``:
  a cancel, or the holder's pipe going away) -- libzmq's default XPUB, which is exactly what a
  device must pass upstream. ``verbose=True`` also reports every repeated subscribe
  (``ZMQ_XPUB_VERBOSE``).

Both subscription forms are accepted on receive: RFC 37 ``SUBSCRIBE``/``CANCEL`` commands (the
codec's :class:`~gateway.wire.events.Subscription` events) and the RFC 23 one-frame messages
``01|00 + prefix``; which form is *sent* is the codec's choice, by the peer's announced version
(``ZmtpCodec.subscription_frame``). A message from a subscriber that is not a subscription goes
to an XPUB application (libzmq passes XSUB's upstream messages) and is dropped by a PUB.

PUB never blocks: the engine drops a message for a pipe past its high-water mark (counted,
``hwm``), as libzmq's ``dist_t`` and nng's pub0 do.

Bounds (libzmq has none): a peer's prefixes at a publisher, and a subscriber's own, are at most
``max_subscriptions`` (10,000) and ``max_subscription_bytes`` (256 KiB) together; past either,
a subscription is dropped and counted (``too-many-subscriptions``). A (un)subscription costs
O(1): the prefix tuples the engine matches with are rebuilt once before the next message that
needs them, not on every change, so a stream of SUBSCRIBE/CANCEL costs no rebuilds.

Deviation from libzmq kept small and documented: only a *one-frame* message is read as an
RFC 23 subscription (libzmq also reads the first frame of a multipart one).
"""

from __future__ import annotations

from gateway.errors import Drop, LocalProtocolError, StateError
from gateway.message import Message
from gateway.patterns.reqrep import SP, ZMTP, Pattern
from gateway.wire.events import Subscription

#: RFC 23 message-form subscription prefixes (``01`` subscribe, ``00`` cancel).
SUBSCRIBE = b"\x01"
CANCEL = b"\x00"
_SUB, _CANCEL = 1, 0
#: what an SP pipe's filter is at the publisher: everything (sub0 filters locally)
_ALL: tuple[bytes, ...] = (b"",)
#: Default bound on the prefixes one peer may hold (publisher side) or a socket may hold.
MAX_SUBSCRIPTIONS = 10_000
#: ... and on their bytes together: what one subscriber can make a publisher hold (a prefix
#: may be as long as a message; without this, 10,000 of them could pin gigabytes)
MAX_SUBSCRIPTION_BYTES = 256 * 1024


def subscription_message(subscribe: bool, topic: bytes) -> Message:
    """The RFC 23 form as the application sees it (XPUB receives, XSUB sends): one frame."""
    return Message((), ((SUBSCRIBE if subscribe else CANCEL) + topic,))


def parse_subscription(parts: tuple[bytes, ...]) -> Subscription | None:
    """A one-frame ``01|00 + topic`` message as a Subscription; ``None`` for anything else."""
    if len(parts) == 1 and parts[0] and parts[0][0] in (_SUB, _CANCEL):
        frame = parts[0]
        return Subscription(subscribe=frame[0] == _SUB, topic=frame[1:])
    return None


def _flat(msg: Message) -> Message:
    """A published message as SP carries it: one body frame (several ZMTP frames, a topic frame
    and a body, concatenated: the topic stays the prefix an SP subscriber matches)."""
    body = msg.body
    if len(body) == 1:
        return Message((), body)
    return Message((), (b"".join(body),))


class Publisher(Pattern):
    """PUB (cooked) and XPUB (raw); pub0 on SP pipes.

    Engine contract: :attr:`filters` maps each ready pipe's routing id to the prefixes it holds
    (``topic.startswith(filters[rid])``); :meth:`attach`/:meth:`detach` keep it; subscriptions
    come in through :meth:`subscription` (commands) and :meth:`receive` (messages).
    """

    enveloped = False
    strategy = "fanout"

    def __init__(self, kind: str, raw: bool, *, ttl: int = 8, verbose: bool = False,
                 max_subscriptions: int = MAX_SUBSCRIPTIONS,
                 max_subscription_bytes: int = MAX_SUBSCRIPTION_BYTES) -> None:
        super().__init__(kind, raw, ttl=ttl)
        self.verbose = verbose
        self.max_subscriptions = max_subscriptions
        self.max_subscription_bytes = max_subscription_bytes
        self._filters: dict[bytes, tuple[bytes, ...]] = {}
        self._held: dict[bytes, set[bytes]] = {}  # ZMTP pipe -> its prefixes
        self._size: dict[bytes, int] = {}  # ZMTP pipe -> the bytes of its prefixes
        self._stale: set[bytes] = set()  # pipes whose filters wait to be rebuilt
        #: prefix -> how many pipes hold it (the union, counted across pipes)
        self.holders: dict[bytes, int] = {}

    @property
    def filters(self) -> dict[bytes, tuple[bytes, ...]]:
        """Ready pipe -> the prefixes it holds (``topic.startswith(filters[rid])``); the tuples
        of pipes whose subscriptions changed are rebuilt here, once for all the changes."""
        if self._stale:
            held, filters = self._held, self._filters
            for rid in self._stale:
                filters[rid] = tuple(held[rid])
            self._stale.clear()
        return self._filters

    # -- peers -------------------------------------------------------------------------------
    def attach(self, routing_id: bytes, family: str) -> tuple[Subscription, ...]:
        if family == SP:
            self._filters[routing_id] = _ALL  # sub0 says nothing and filters itself
        else:
            self._held[routing_id] = set()
            self._size[routing_id] = 0
            self._filters[routing_id] = ()  # a ZMTP subscriber gets nothing until it subscribes
        return ()

    def detach(self, routing_id: bytes, family: str) -> tuple[Message, ...]:
        self._filters.pop(routing_id, None)
        self._size.pop(routing_id, None)
        self._stale.discard(routing_id)
        held = self._held.pop(routing_id, None)
        if not held:
            return ()
        gone = [t for t in sorted(held) if self._release(t)]
        return tuple(subscription_message(False, t) for t in gone) if self.raw else ()

    # -- subscriptions -----------------------------------------------------------------------
    def _release(self, topic: bytes) -> bool:
        n = self.holders[topic] - 1
        if n:
            self.holders[topic] = n
            return False
        del self.holders[topic]
        return True

    def subscription(self, routing_id: bytes, sub: Subscription) -> Message | None:
        held = self._held.get(routing_id)
        if held is None:  # an SP pipe cannot subscribe; a pipe not attached is not ours
            raise Drop("unexpected-message")
        topic = sub.topic
        if sub.subscribe:
            if topic in held:  # one pipe holds a prefix once (libzmq's mtrie)
                notify = self.verbose
            else:
                size = self._size[routing_id] + len(topic)
                if len(held) >= self.max_subscriptions or size > self.max_subscription_bytes:
                    raise Drop("too-many-subscriptions")
                held.add(topic)
                self._size[routing_id] = size
                self._stale.add(routing_id)
                n = self.holders.get(topic, 0)
                self.holders[topic] = n + 1
                notify = n == 0 or self.verbose
        else:
            if topic not in held:
                raise Drop("unknown-cancel")
            held.discard(topic)
            self._size[routing_id] -= len(topic)
            self._stale.add(routing_id)
            notify = self._release(topic)
        return subscription_message(sub.subscribe, topic) if notify and self.raw else None

    def subscribed(self, routing_id: bytes) -> frozenset[bytes]:
        """The prefixes the pipe ``routing_id`` holds (SP pipes: everything, ``{b""}``)."""
        held = self._held.get(routing_id)
        return frozenset(held) if held is not None else frozenset(self._filters.get(routing_id, ()))

    # -- receive: subscriptions in RFC 23 form; XPUB passes other messages up ----------------
    def receive(self, routing_id: bytes, family: str, parts: tuple[bytes, ...]) -> Message | None:
        if family == ZMTP:
            sub = parse_subscription(parts)
            if sub is not None:
                return self.subscription(routing_id, sub)
        if self.raw and family == ZMTP:
            return Message((), parts)  # libzmq's XPUB hands XSUB's upstream messages over
        raise Drop("unexpected-message")  # PUB never receives; sub0 never sends

    def check_recv(self) -> None:
        if not self.raw:
            raise StateError("PUB cannot receive (ENOTSUP); XPUB receives subscriptions")

    # -- send --------------------------------------------------------------------------------
    def prepare_fanout(self, msg: Message) -> tuple[bytes, Message, Message]:
        """``(first frame, ZMTP message, SP message)``: the engine matches the first frame
        against each pipe's :attr:`filters` and writes the message of the pipe's family."""
        body = msg.body
        if not body:
            raise LocalProtocolError("a published message needs at least one frame")
        zmtp = msg if not msg.hops else Message((), body)
        return body[0], zmtp, _flat(zmtp)


class Subscriber(Pattern):
    """SUB (cooked: filters what it receives) and XSUB (raw: passes everything, lets the
    application send ``01|00 + prefix`` subscriptions and upstream messages); sub0 on SP pipes.

    ``filter``: filter received messages by the held prefixes (default: cooked yes, raw no, as
    libzmq's SUB and XSUB, nng's sub0 and raw sub0). A raw socket with ``filter=True`` is a
    device's sub0 that forwards only what its subscribers want.
    """

    enveloped = False
    strategy = "fanout"

    def __init__(self, kind: str, raw: bool, *, ttl: int = 8, filter: bool | None = None,
                 max_subscriptions: int = MAX_SUBSCRIPTIONS,
                 max_subscription_bytes: int = MAX_SUBSCRIPTION_BYTES) -> None:
        super().__init__(kind, raw, ttl=ttl)
        self.filter = (not raw) if filter is None else filter
        self.max_subscriptions = max_subscriptions
        self.max_subscription_bytes = max_subscription_bytes
        #: prefix -> count (counted: two subscribes take two unsubscribes)
        self.counts: dict[bytes, int] = {}
        self._size = 0  # bytes of the prefixes held
        self._prefixes: tuple[bytes, ...] = ()
        self._stale = False  # counts changed: _prefixes is rebuilt before the next match
        #: ready pipes -> what an upstream (non-subscription) message may go to: ZMTP pipes
        self.filters: dict[bytes, tuple[bytes, ...]] = {}
        #: received messages no held prefix matched (a filter is no failure: not a drop)
        self.filtered = 0

    @property
    def topics(self) -> tuple[bytes, ...]:
        """The prefixes held, sorted (each once, whatever its count)."""
        return tuple(sorted(self.counts))

    # -- the application's subscriptions -----------------------------------------------------
    def subscribe(self, topic: bytes) -> Subscription:
        """Hold ``topic`` once more; the subscription to send to every ZMTP publisher."""
        n = self.counts.get(topic, 0)
        if n == 0:
            if len(self.counts) >= self.max_subscriptions:
                raise LocalProtocolError(f"more than {self.max_subscriptions} subscriptions")
            if self._size + len(topic) > self.max_subscription_bytes:
                raise LocalProtocolError(f"subscriptions over {self.max_subscription_bytes} "
                                         "bytes")
            self._size += len(topic)
            self._stale = True
        self.counts[topic] = n + 1
        return Subscription(subscribe=True, topic=topic)

    def unsubscribe(self, topic: bytes) -> Subscription | None:
        """Hold ``topic`` once less; the cancel to send when nobody holds it any more (``None``
        while a count remains). A prefix not held raises ``Drop("unknown-cancel")``."""
        n = self.counts.get(topic, 0)
        if n == 0:
            raise Drop("unknown-cancel")
        if n > 1:
            self.counts[topic] = n - 1
            return None
        del self.counts[topic]
        self._size -= len(topic)
        self._stale = True
        return Subscription(subscribe=False, topic=topic)

    def _fresh(self) -> tuple[bytes, ...]:
        """The prefixes to match with, rebuilt once after any number of changes."""
        if self._stale:
            self._prefixes = tuple(self.counts)
            self._stale = False
        return self._prefixes

    def prefixes(self) -> tuple[bytes, ...]:
        """The prefixes a received message's first frame is matched against (``filter``)."""
        return self._fresh()

    def matches(self, frame: bytes) -> bool:
        return frame.startswith(self._fresh())

    # -- peers -------------------------------------------------------------------------------
    def attach(self, routing_id: bytes, family: str) -> tuple[Subscription, ...]:
        if family == SP:
            self.filters[routing_id] = ()  # pub0 takes nothing from us
            return ()
        self.filters[routing_id] = _ALL
        return tuple(Subscription(subscribe=True, topic=t) for t in sorted(self.counts))

    def detach(self, routing_id: bytes, family: str) -> tuple[Message, ...]:
        self.filters.pop(routing_id, None)
        return ()

    # -- receive -----------------------------------------------------------------------------
    def receive(self, routing_id: bytes, family: str, parts: tuple[bytes, ...]) -> Message | None:
        if self.filter and not parts[0].startswith(
                self._prefixes if not self._stale else self._fresh()):
            self.filtered += 1
            return None
        return Message((), parts)

    # -- send: XSUB's subscriptions and upstream messages ------------------------------------
    def check_send(self) -> None:
        if not self.raw:
            raise StateError("SUB cannot send (ENOTSUP): use subscribe() / unsubscribe()")

    def prepare_fanout(self, msg: Message) -> (Subscription | tuple[bytes, Message, Message]
                                                | None):
        """XSUB: a one-frame ``01|00 + prefix`` message is a subscription (counted; ``None``
        when a cancel leaves a count); anything else goes upstream to every ZMTP pipe (as a
        publisher's plan: first frame, the message for ZMTP and for SP pipes; :attr:`filters`
        sends it to the ZMTP ones only)."""
        self.check_send()
        sub = parse_subscription(msg.body) if not msg.hops else None
        if sub is None:
            if not msg.body:
                raise LocalProtocolError("an XSUB message needs at least one frame")
            up = Message((), msg.body)
            return up.body[0], up, up
        return self.subscribe(sub.topic) if sub.subscribe else self.unsubscribe(sub.topic)


__all__ = ["CANCEL", "MAX_SUBSCRIPTIONS", "MAX_SUBSCRIPTION_BYTES", "SUBSCRIBE", "Publisher", "Subscriber",
           "parse_subscription", "subscription_message"]
