"""One bridge's translation, both directions: the :class:`Translation` every forwarder drives,
and its three implementations, each standing alone (no inheritance):

=====================  ========================================================================
class                  for
=====================  ========================================================================
:class:`Translator`    a request-reply bridge between two given families
:class:`MixedTranslator`  a request-reply bridge whose front takes both wires (``any+``)
:class:`PatternTranslator`  a pub/sub, pipeline or pair bridge
=====================  ========================================================================

Pure: the clock is passed in; every refusal is an exception with its reason (see
:mod:`gateway.envelope`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gateway.envelope import reqrep
from gateway.envelope.errors import EnvelopeError
from gateway.envelope.patterns import BodyCodec, Subscriptions, relay
from gateway.envelope.tokens import TokenTable
from gateway.errors import PeerGone
from gateway.message import Message

__all__ = ["MixedTranslator", "PatternTranslator", "Translation", "Translator"]

_new = tuple.__new__  # Message(...) without the NamedTuple __new__ wrapper (hot path)


class Translation(Protocol):
    """What a forwarder drives: ``request`` front -> back, ``reply`` back -> front (each
    ``(msg, now) -> msg``; ``request`` may return None: nothing to send), chosen once."""

    #: ``"front->back"`` families, e.g. ``"zmtp->sp"`` (``"any->sp"`` for an ``any+`` front)
    mode: str
    #: ``"reqrep"``, ``"pubsub"``, ``"pipeline"`` or ``"pair"``
    pattern: str
    #: which directions carry messages (front -> back, back -> front)
    up: bool
    down: bool
    #: whether a message back answers one sent forth (the device tracks requests in flight)
    pairs_replies: bool
    #: pub/sub: the union of the subscribers' prefixes (else None)
    subscriptions: Subscriptions | None
    #: the bridge's token table: its limits (``max_entries``, ``ttl``) also bound the device's
    #: requests in flight and pace its expiry; only a ZeroMQ -> SP request mints tokens in it
    table: TokenTable
    #: the ``gateway_body_codec`` hook (None: none); settable once plugins are registered
    body_codec: BodyCodec | None
    request: Callable[[Message, float], Message | None]
    reply: Callable[[Message, float], Message]

    def initial(self) -> list[Message]:
        """Messages for the back end once it is open (pub/sub: the standing subscriptions)."""
        ...

    def forget(self, sent: list[tuple[bytes, ...]]) -> None:
        """Requests (by the hops they were sent with) counted lost elsewhere: their tokens go."""
        ...

    def expire(self, now: float) -> int:
        """Expire due tokens; how many requests expired that the device did not count."""
        ...


class Translator:
    """A request-reply bridge's translation, chosen once from its two families:

    =============  ==========================  ==========================================
    front -> back  :meth:`request`             :meth:`reply`
    =============  ==========================  ==========================================
    same family    untouched                   untouched (must carry a routing hop)
    zmtp -> sp     envelope -> minted token    token -> envelope (bounded table, TTL)
    sp -> zmtp     backtrace -> 4-byte frames  4-byte frames -> backtrace (validated)
    =============  ==========================  ==========================================

    SP carries one body frame: a ZeroMQ body of several goes through ``body_codec`` (the
    ``gateway_body_codec`` hook) or is refused as ``multi-frame-body``.
    """

    pattern = "reqrep"
    up = down = pairs_replies = True
    subscriptions: Subscriptions | None = None

    def __init__(self, front: str, back: str, table: TokenTable | None = None,
                 body_codec: BodyCodec | None = None) -> None:
        self.mode = f"{front}->{back}"
        self.table = table if table is not None else TokenTable()
        self._expired_seen = self.table.expired_total
        self.request: Callable[[Message, float], Message | None]
        self.reply: Callable[[Message, float], Message]
        self.body_codec = body_codec  # (chooses request and reply)

    @property
    def body_codec(self) -> BodyCodec | None:
        """The ``gateway_body_codec`` hook (None: none); setting it chooses the translation
        functions again."""
        return self._body_codec

    @body_codec.setter
    def body_codec(self, codec: BodyCodec | None) -> None:
        self._body_codec = codec
        table = self.table
        if codec is None:  # the common case: the envelope functions themselves
            to_sp, from_sp = reqrep.zmtp_to_sp_request, reqrep.sp_to_zmtp_reply
            cross: dict[str, tuple[Callable[..., Message], Callable[..., Message]]] = {
                "zmtp->sp": (lambda msg, now: to_sp(msg, table, now),
                             lambda msg, now: from_sp(msg, table, now)),
                "sp->zmtp": (reqrep.sp_to_zmtp, reqrep.zmtp_to_sp_reply),
            }
        else:
            cross = {"zmtp->sp": (self._request_to_sp, self._reply_from_sp),
                     "sp->zmtp": (self._request_from_sp, self._reply_to_sp)}
        same = (reqrep.same_family, reqrep.same_family_reply)
        plan = {**cross, "zmtp->zmtp": same, "sp->sp": same}.get(self.mode)
        if plan is None:
            raise ValueError(f"no translation for {self.mode}")
        self.request, self.reply = plan

    def initial(self) -> list[Message]:
        """Messages the back end gets once it is open (none for request-reply)."""
        return []

    def _to_sp_body(self, msg: Message) -> Message:
        if len(msg[1]) > 1:  # none at all: no-body, from the functions above
            packed = self.body_codec(msg[1], "to_sp") if self.body_codec is not None else None
            if packed is None:
                raise EnvelopeError("multi-frame-body", f"{len(msg[1])} frames")
            return _new(Message, (msg[0], packed))
        return msg

    def _to_zmtp_body(self, msg: Message) -> Message:
        if self.body_codec is None:
            return msg
        unpacked = self.body_codec(msg[1], "to_zmtp")
        return msg if unpacked is None else _new(Message, (msg[0], unpacked))

    def _request_to_sp(self, msg: Message, now: float) -> Message:
        return reqrep.zmtp_to_sp_request(self._to_sp_body(msg), self.table, now)

    def _reply_from_sp(self, msg: Message, now: float) -> Message:
        return self._to_zmtp_body(reqrep.sp_to_zmtp_reply(msg, self.table, now))

    def _request_from_sp(self, msg: Message, now: float) -> Message:
        return self._to_zmtp_body(reqrep.sp_to_zmtp(msg))

    def _reply_to_sp(self, msg: Message, now: float) -> Message:
        return reqrep.zmtp_to_sp_reply(self._to_sp_body(msg))

    def forget(self, sent: list[tuple[bytes, ...]]) -> None:
        """Requests (by the hops they were sent with) counted lost elsewhere: their tokens go."""
        if self.mode == "zmtp->sp":
            for hops in sent:
                self.table.discard(hops[0])

    def expire(self, now: float) -> int:
        """Expire due tokens; return how many requests expired since the last call (including
        those :meth:`TokenTable.mint` expired to make room and late replies to expired ones)."""
        self.table.expire(now)
        total = self.table.expired_total
        expired, self._expired_seen = total - self._expired_seen, total
        return expired


class MixedTranslator:
    """The translation of a request-reply bridge whose front listens for both wires
    (``any+tcp://``): each request is translated as its client's wire says (``family_of``:
    the front's routing id -> ``"zmtp"``/``"sp"``, None when the client left), and each reply
    finds its way back:

    ==========  =============================================================================
    back        reply from the back end -> which translation
    ==========  =============================================================================
    sp          one hop: a minted token (a ZeroMQ client); more: an SP backtrace (an SP client)
    zmtp        the first hop is the front's routing id: its pipe's wire says
    ==========  =============================================================================

    One token table serves the ZeroMQ clients; tokens have the top bit set and SP pipe ids
    never do, so the two cannot be mistaken. Expiry is counted per request by the device's
    in-flight table, for both kinds of client alike: :meth:`expire` only frees tokens.
    """

    pattern = "reqrep"
    up = down = pairs_replies = True
    subscriptions: Subscriptions | None = None

    def __init__(self, back: str, table: TokenTable | None = None,
                 body_codec: BodyCodec | None = None) -> None:
        self.mode = f"any->{back}"
        self.back = back
        self.table = table if table is not None else TokenTable()
        #: one request-reply translation per client wire, sharing the table
        self.by_family = {f: Translator(f, back, self.table, body_codec) for f in ("zmtp", "sp")}
        self._body_codec = body_codec
        #: the front's routing id -> its pipe's wire family (the bridge sets it once open)
        self.family_of: Callable[[bytes], str | None] = lambda rid: None
        self.request: Callable[[Message, float], Message | None] = self._request
        self.reply: Callable[[Message, float], Message] = (
            self._reply_sp if back == "sp" else self._reply_zmtp)

    @property
    def body_codec(self) -> BodyCodec | None:
        """The ``gateway_body_codec`` hook (None: none), handed to both wires' translations."""
        return self._body_codec

    @body_codec.setter
    def body_codec(self, codec: BodyCodec | None) -> None:
        self._body_codec = codec
        for t in self.by_family.values():
            t.body_codec = codec

    def initial(self) -> list[Message]:
        """Messages the back end gets once it is open (none for request-reply)."""
        return []

    def _client(self, rid: bytes) -> Translator:
        family = self.family_of(rid)
        if family is None:
            raise PeerGone(f"no client pipe {rid.hex()}")
        return self.by_family[family]

    def _request(self, msg: Message, now: float) -> Message | None:
        if not msg[0]:
            raise EnvelopeError("no-envelope", "request without a routing hop")
        return self._client(msg[0][0]).request(msg, now)

    def _reply_sp(self, msg: Message, now: float) -> Message:
        return self.by_family["zmtp" if len(msg[0]) == 1 else "sp"].reply(msg, now)

    def _reply_zmtp(self, msg: Message, now: float) -> Message:
        if not msg[0]:
            raise EnvelopeError("no-envelope", "reply without a routing hop")
        return self._client(msg[0][0]).reply(msg, now)

    def forget(self, sent: list[tuple[bytes, ...]]) -> None:
        """Requests counted lost elsewhere: their tokens go (a token only matches a token:
        its top bit is set)."""
        self.by_family["zmtp"].forget(sent)

    def expire(self, now: float) -> int:
        """Free due tokens; the device's in-flight table counts the expiry (0 here)."""
        self.table.expire(now)
        return 0


class PatternTranslator:
    """The translation of a pub/sub, pipeline or pair bridge (``front -> back`` families).

    ``request`` is front -> back and ``reply`` back -> front, as for request-reply; which of
    them runs follows from the pattern (:attr:`up`, :attr:`down`):

    ========  ==============================  ===========================================
    pattern   front -> back (``request``)     back -> front (``reply``)
    ========  ==============================  ===========================================
    pubsub    a ZeroMQ front's subscriptions  the publisher's messages; toward SP frames
              counted (:class:`Subscriptions`) are concatenated (:func:`flatten`)
              -> the union's changes
    pipeline  the messages, straight          (nothing: PUSH never receives)
    pair      the messages, straight          the messages, straight
    ========  ==============================  ===========================================

    ``sp_pair1``: the SP side speaks pair1 (its hop-count word is stripped and added).
    ``request`` returns None when a subscription changed nothing upstream. ``table``: the
    bridge's token table (no token is minted: its limits bound and pace the device's
    bookkeeping, as for request-reply).
    """

    pairs_replies = False

    def __init__(self, pattern: str, front: str, back: str,
                 body_codec: BodyCodec | None = None, *, subscribe: tuple[bytes, ...] | None = None,
                 sp_pair1: bool = False, table: TokenTable | None = None) -> None:
        self.mode = f"{front}->{back}"
        self.pattern = pattern
        self.table = table if table is not None else TokenTable()
        #: the ``gateway_body_codec`` hook (None: none); the relays read it per message
        self.body_codec = body_codec
        codec = self._codec
        to_back = relay(front, back, pattern, codec, sp_pair1)
        to_front = relay(back, front, pattern, codec, sp_pair1)
        self.subscriptions: Subscriptions | None = None
        self.request: Callable[[Message, float], Message | None]
        self.reply: Callable[[Message, float], Message]
        if pattern == "pubsub":
            standing = subscribe if subscribe is not None else ((b"",) if front == "sp" else ())
            self.subscriptions = subscriptions = Subscriptions(standing)
            self.up = front == "zmtp"  # an SP front (pub0) tells nothing
            self.down = True
            self.request = lambda msg, now: subscriptions.apply(msg)
            self.reply = to_front
        elif pattern in ("pipeline", "pair"):
            self.up, self.down = True, pattern == "pair"
            self.request, self.reply = to_back, to_front
        else:
            raise ValueError(f"no pattern translation for {pattern!r}")

    def _codec(self, frames: tuple[bytes, ...], direction: str) -> tuple[bytes, ...] | None:
        return self.body_codec(frames, direction) if self.body_codec is not None else None

    def initial(self) -> list[Message]:
        """Messages for the back end once it is open (the standing subscriptions)."""
        return self.subscriptions.initial() if self.subscriptions is not None else []

    def forget(self, sent: list[tuple[bytes, ...]]) -> None:
        """(No request waits for an answer: nothing to forget.)"""

    def expire(self, now: float) -> int:
        """(No token: nothing expires.)"""
        return 0
