"""Envelope translation between the ZMTP and SP worlds (docs/design.md, "Translation"). Pure: no I/O.

Four functions and one table, all working on :class:`~gateway.message.Message`:

SP clients -> ZMTP servers (stateless)
    :func:`sp_to_zmtp` turns the SP backtrace ``[pipe;...;rid]`` into one 4-byte frame per hop
    plus the empty delimiter; :func:`zmtp_to_sp_reply` checks the envelope a ZeroMQ server sends
    back (every frame 4 bytes, top bit clear except on the last one, then the delimiter) and
    drops the delimiter again.

ZMTP clients -> SP servers (bounded state)
    :func:`zmtp_to_sp_request` parks the ZeroMQ envelope (ROUTER identity, any app envelope
    frames, and the delimiter when there was one) in a :class:`TokenTable` under a freshly
    minted 4-byte token with the top bit set, and sends ``[token]`` + body on SP;
    :func:`sp_to_zmtp_reply` restores the envelope from the token of the reply.

Every refusal is an :class:`EnvelopeError` (a :class:`~gateway.errors.RemoteProtocolError`)
whose ``reason`` is a short stable string the device uses as a counter label:

=================  ===========================================================================
reason             meaning
=================  ===========================================================================
no-delimiter       a ZMTP reply without the empty delimiter frame
no-request-id      no hop at all, or the last SP hop lacks its top bit
not-4-bytes        an SP hop (or ZMTP reply envelope frame) that is not exactly 4 bytes
bad-backtrace      a hop before the request id with its top bit set; or a token reply with
                   more than one hop
multi-frame-body   a body of several frames where SP carries exactly one
no-body            a body of zero frames where SP needs one
probe              the empty message a ZeroMQ DEALER with ZMQ_PROBE_ROUTER sends on connect
table-full         :class:`TableFull`: the pending-token table is full even after expiry
unknown-token      :class:`UnknownToken`: a reply for a token the table does not hold
expired-token      :class:`UnknownToken`: the token was still held but its deadline passed
=================  ===========================================================================

Time is always passed in (``now``, seconds of a monotonic clock, e.g. ``time.monotonic()``);
nothing here reads a clock, so the table is fully deterministic under test.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable

from gateway.errors import PeerGone, RemoteProtocolError
from gateway.message import DELIMITER, Message

__all__ = [
    "EnvelopeError",
    "TableFull",
    "UnknownToken",
    "TokenTable",
    "sp_to_zmtp",
    "zmtp_to_sp_reply",
    "zmtp_to_sp_request",
    "sp_to_zmtp_reply",
    "Translator",
    "MixedTranslator",
]

_new = tuple.__new__  # Message(...) without the NamedTuple __new__ wrapper (hot path)
_TOP = 0x80
_COUNTER_MASK = 0x7FFF_FFFF
_TOKEN_BIT = 0x8000_0000


class EnvelopeError(RemoteProtocolError):
    """An envelope that cannot cross families. ``reason`` is a short label for counters."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class TableFull(EnvelopeError):
    """No room for one more pending request, even after expiring the old ones."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("table-full", detail)


class UnknownToken(EnvelopeError):
    """A reply whose token is unknown (never minted, already answered, expired)."""

    def __init__(self, reason: str = "unknown-token", detail: str = "") -> None:
        super().__init__(reason, detail)


# ---------------------------------------------------------------------------------------------
# SP clients -> ZMTP servers (stateless)


def sp_to_zmtp(msg: Message, now: float = 0.0) -> Message:
    """An SP request ``([pipe;...;rid][body])`` as ZMTP frames ``pipe, ..., rid, "", body``.

    >>> sp_to_zmtp(Message((b"\\x00\\x00\\x00\\x01", b"\\x80\\x00\\x00\\x07"), (b"hi",)))
    Message(hops=(b'\\x00\\x00\\x00\\x01', b'\\x80\\x00\\x00\\x07', b''), body=(b'hi',))

    The raw SP socket already guarantees the backtrace shape; only the request id is checked
    (cheaply) so that a caller mixing up families fails loudly.
    """
    hops = msg[0]
    if not hops:
        raise EnvelopeError("no-request-id", "empty SP backtrace")
    rid = hops[-1]
    if len(rid) != 4 or not rid[0] & _TOP:
        raise EnvelopeError("no-request-id", f"last hop {rid!r}")
    return _new(Message, (hops + (DELIMITER,), msg[1]))


def zmtp_to_sp_reply(msg: Message, now: float = 0.0) -> Message:
    """A ZeroMQ server's reply ``pipe, ..., rid, "", body`` back to ``([pipe;...;rid][body])``.

    The envelope must be what :func:`sp_to_zmtp` produced: 4-byte words, top bit clear on all
    but the last, top bit set on the last, then the delimiter; the body exactly one frame.
    Anything else is bad input from the server (:class:`EnvelopeError`).
    """
    hops, body = msg
    if len(hops) == 3 and len(body) == 1:  # one pipe id and the request id: the usual
        pipe, rid, delimiter = hops
        if (delimiter == DELIMITER and len(pipe) == 4 and len(rid) == 4
                and not pipe[0] & _TOP and rid[0] & _TOP):
            return _new(Message, ((pipe, rid), body))
    if len(body) > 1:  # (before the envelope: the reason it always had)
        raise EnvelopeError("multi-frame-body", f"{len(body)} frames")
    if not hops or hops[-1] != DELIMITER:
        raise EnvelopeError("no-delimiter", f"envelope {hops!r}")
    words = hops[:-1]
    if not words:
        raise EnvelopeError("no-request-id", "no envelope frame before the delimiter")
    last = len(words) - 1
    for i, w in enumerate(words):
        if len(w) != 4:
            raise EnvelopeError("not-4-bytes", f"envelope frame {i} is {len(w)} bytes")
        if i == last:
            if not w[0] & _TOP:
                raise EnvelopeError("no-request-id", f"last envelope frame {w!r}")
        elif w[0] & _TOP:
            raise EnvelopeError("bad-backtrace", f"frame {i} {w!r} has the top bit set")
    if len(body) != 1:
        if not body:
            raise EnvelopeError("no-body")
        raise EnvelopeError("multi-frame-body", f"{len(body)} frames")
    return _new(Message, (words, body))


# ---------------------------------------------------------------------------------------------
# ZMTP clients -> SP servers (bounded state)


class TokenTable:
    """Pending requests of ZeroMQ clients: token -> (ZeroMQ hops, deadline).

    Tokens are 4 bytes big-endian with the top bit set (so they are a valid SP request id);
    the low 31 bits are a counter that starts at a random value (or ``start``) and skips any
    token still in the table. ``ttl`` is constant, so insertion order is deadline order as long
    as ``now`` never goes back: :meth:`expire` pops from the front of an ``OrderedDict`` while
    the front is expired -- O(1) per removed entry and O(1) when nothing is due.

    The table never reads a clock and never expires entries behind the caller's back except in
    :meth:`mint` when it is full; every removal by expiry is counted in ``expired_total``
    (and returned by :meth:`expire`) so the device can log and count it.
    """

    __slots__ = ("max_entries", "ttl", "_entries", "_counter", "expired_total")

    def __init__(
        self, max_entries: int = 100_000, ttl: float = 60.0, *, start: int | None = None
    ) -> None:
        if not 1 <= max_entries <= _COUNTER_MASK:
            raise ValueError(f"max_entries must be in 1..{_COUNTER_MASK}, not {max_entries}")
        if not ttl > 0:
            raise ValueError(f"ttl must be > 0, not {ttl}")
        self.max_entries = max_entries
        self.ttl = float(ttl)
        self._entries: OrderedDict[bytes, tuple[tuple[bytes, ...], float]] = OrderedDict()
        self._counter = (random.getrandbits(31) if start is None else start) & _COUNTER_MASK
        self.expired_total = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, token: object) -> bool:
        return token in self._entries

    def mint(self, hops: tuple[bytes, ...], now: float) -> bytes:
        """Park ``hops`` until ``now + ttl``; return the new 4-byte token (top bit set)."""
        entries = self._entries
        if len(entries) >= self.max_entries:
            self.expire(now)
            if len(entries) >= self.max_entries:
                raise TableFull(f"{len(entries)} pending requests")
        c = self._counter
        token = (c | _TOKEN_BIT).to_bytes(4, "big")
        while token in entries:  # terminates: fewer than 2**31 entries
            c = (c + 1) & _COUNTER_MASK
            token = (c | _TOKEN_BIT).to_bytes(4, "big")
        self._counter = (c + 1) & _COUNTER_MASK
        entries[token] = (hops, now + self.ttl)
        return token

    def pop(self, token: bytes, now: float) -> tuple[bytes, ...]:
        """Remove and return the hops parked under ``token``; :class:`UnknownToken` if none."""
        try:
            hops, deadline = self._entries.pop(token)
        except KeyError:
            raise UnknownToken("unknown-token", f"token {token!r}") from None
        if deadline <= now:
            self.expired_total += 1  # removed by expiry, like the ones expire() sweeps
            raise UnknownToken("expired-token", f"token {token!r}")
        return hops

    def discard(self, token: bytes) -> None:
        """Forget ``token`` (its request was counted lost some other way)."""
        self._entries.pop(token, None)

    def expire(self, now: float) -> int:
        """Drop every entry whose deadline is ``<= now``; return how many were dropped."""
        entries = self._entries
        n = 0
        while entries:
            token = next(iter(entries))
            if entries[token][1] > now:
                break
            entries.popitem(last=False)
            n += 1
        self.expired_total += n
        return n

    def entries(self) -> list[tuple[bytes, tuple[bytes, ...], float]]:
        """``[(token, hops, deadline)]`` in insertion order (what tests compare)."""
        return [(token, hops, deadline) for token, (hops, deadline) in self._entries.items()]

    def __repr__(self) -> str:
        return f"TokenTable({len(self)}/{self.max_entries}, ttl={self.ttl})"


def zmtp_to_sp_request(msg: Message, table: TokenTable, now: float) -> Message:
    """A ZeroMQ request (hops = ROUTER identity, app envelope, delimiter if any) as SP.

    Returns ``([token][body])``; the hops wait in ``table`` for the reply. The body must be
    one frame (the device asks the ``gateway_body_codec`` hook first).
    """
    hops, body = msg
    if len(body) != 1:
        if not body:
            if hops[-1:] == (b"",) and len(hops) == 2:  # [identity][empty]: ZMQ_PROBE_ROUTER
                raise EnvelopeError("probe", "an empty probe message (ZMQ_PROBE_ROUTER)")
            raise EnvelopeError("no-body")
        raise EnvelopeError("multi-frame-body", f"{len(body)} frames")
    return _new(Message, ((table.mint(hops, now),), body))


def sp_to_zmtp_reply(msg: Message, table: TokenTable, now: float) -> Message:
    """An SP reply ``([token][body])`` back to the ZeroMQ envelope parked under ``token``.

    A DEALER client that sent no delimiter gets back exactly its identity + body frames, as it
    sent them: the parked hops simply hold no delimiter.
    """
    hops, body = msg
    if len(hops) != 1:
        if not hops:
            raise EnvelopeError("no-request-id", "reply without a token")
        raise EnvelopeError("bad-backtrace", f"{len(hops)} hops where one token was expected")
    token = hops[0]
    if len(token) != 4:
        raise EnvelopeError("not-4-bytes", f"token {token!r}")
    if not token[0] & _TOP:
        raise EnvelopeError("no-request-id", f"token {token!r} lacks the top bit")
    return _new(Message, (table.pop(token, now), body))


# ---------------------------------------------------------------------------------------------
# one bridge's translation, both directions

#: ``(frames, direction) -> frames | None``: the ``gateway_body_codec`` hook, or None.
BodyCodec = Callable[[tuple[bytes, ...], str], "tuple[bytes, ...] | None"]


class Translator:
    """What a bridge does to each message, chosen once from its two families:

    =============  ==========================  ==========================================
    front -> back  :meth:`request`             :meth:`reply`
    =============  ==========================  ==========================================
    same family    untouched                   untouched (must carry a routing hop)
    zmtp -> sp     envelope -> minted token    token -> envelope (bounded table, TTL)
    sp -> zmtp     backtrace -> 4-byte frames  4-byte frames -> backtrace (validated)
    =============  ==========================  ==========================================

    SP carries one body frame: a ZeroMQ body of several goes through ``body_codec`` (the
    ``gateway_body_codec`` hook) or is refused as ``multi-frame-body``. Pure: the clock is
    passed in; every refusal is an :class:`EnvelopeError` with its reason.
    """

    def __init__(self, front: str, back: str, table: TokenTable | None = None,
                 body_codec: BodyCodec | None = None) -> None:
        self.mode = f"{front}->{back}"
        self.pattern = "reqrep"
        #: which directions carry messages (front -> back, back -> front); whether a message
        #: back answers one sent forth (the ledger's requests in flight)
        self.up = self.down = self.pairs_replies = True
        self.subscriptions: Subscriptions | None = None
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
        self._plan()

    def _plan(self) -> None:
        table = self.table
        if self._body_codec is None:  # the common case: the envelope functions themselves
            cross: dict[str, tuple[Callable[..., Message], Callable[..., Message]]] = {
                "zmtp->sp": (lambda msg, now: zmtp_to_sp_request(msg, table, now),
                             lambda msg, now: sp_to_zmtp_reply(msg, table, now)),
                "sp->zmtp": (sp_to_zmtp, zmtp_to_sp_reply),
            }
        else:
            cross = {"zmtp->sp": (self._request_to_sp, self._reply_from_sp),
                     "sp->zmtp": (self._request_from_sp, self._reply_to_sp)}
        plan = {**cross, "zmtp->zmtp": (same_family, _same_reply),
                "sp->sp": (same_family, _same_reply)}.get(self.mode)
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
        return zmtp_to_sp_request(self._to_sp_body(msg), self.table, now)

    def _reply_from_sp(self, msg: Message, now: float) -> Message:
        return self._to_zmtp_body(sp_to_zmtp_reply(msg, self.table, now))

    def _request_from_sp(self, msg: Message, now: float) -> Message:
        return self._to_zmtp_body(sp_to_zmtp(msg))

    def _reply_to_sp(self, msg: Message, now: float) -> Message:
        return zmtp_to_sp_reply(self._to_sp_body(msg))

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


class MixedTranslator(Translator):
    """The translation of a bridge whose front listens for both wires (``any+tcp://``): each
    request is translated as its client's wire says (``family_of``: the front's routing id ->
    ``"zmtp"``/``"sp"``, None when the client left), and each reply finds its way back:

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

    def __init__(self, back: str, table: TokenTable | None = None,
                 body_codec: BodyCodec | None = None) -> None:
        super().__init__(back, back, table, body_codec)
        self.mode = f"any->{back}"
        self.back = back
        self.by_family = {f: Translator(f, back, self.table, body_codec) for f in ("zmtp", "sp")}
        #: the front's routing id -> its pipe's wire family (the bridge sets it once open)
        self.family_of: Callable[[bytes], str | None] = lambda rid: None
        self.request = self._request
        self.reply = self._reply_sp if back == "sp" else self._reply_zmtp

    @property  # type: ignore[override]
    def body_codec(self) -> BodyCodec | None:
        return self._body_codec

    @body_codec.setter
    def body_codec(self, codec: BodyCodec | None) -> None:
        self._body_codec = codec
        for t in getattr(self, "by_family", {}).values():
            t.body_codec = codec

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
        self.by_family["zmtp"].forget(sent)  # a token only matches a token (top bit set)

    def expire(self, now: float) -> int:
        self.table.expire(now)
        return 0


def same_family(msg: Message, now: float) -> Message:
    """A request between two peers of one family: untouched (a forwarder may skip the call)."""
    return msg


def _same_reply(msg: Message, now: float) -> Message:
    if not msg[0]:  # same family: the front routes by the first hop
        raise EnvelopeError("no-envelope", "reply without a routing hop")
    return msg


# ---------------------------------------------------------------------------------------------
# beyond request-reply: pub/sub, pipeline, pair (docs/patterns.md)

#: ZMTP 3.0 (RFC 29 / RFC 23) subscription messages: one frame, 0x01 + prefix subscribes,
#: 0x00 + prefix cancels. ZMTP 3.1 SUBSCRIBE/CANCEL commands reach the bridge in the same form
#: (libzmq's XPUB and the native engine hand both to the application as these messages).
SUBSCRIBE, CANCEL = b"\x01", b"\x00"
#: the hop-count word a message entering SP pair1 carries (nng adds one as it sends; the
#: gateway originates the message on the SP side: hop count 0, as nng's cooked pair1 does)
PAIR1_HEADER = b"\x00\x00\x00\x00"


def subscription(topic: bytes) -> Message:
    """The message that subscribes to ``topic`` (sent to an XSUB-like face)."""
    return _new(Message, ((), (SUBSCRIBE + topic,)))


def cancel(topic: bytes) -> Message:
    return _new(Message, ((), (CANCEL + topic,)))


class Subscriptions:
    """The union of a bridge's subscribers' prefixes, counted (RFC 29: subscriptions are
    additive and not idempotent: subscribing ``a.`` twice takes two cancels).

    ``standing`` prefixes are held by the bridge itself (``?subscribe=``) and never cancelled.
    :meth:`apply` takes one subscription or cancel message and returns the message to send
    upstream when the union changed (the first subscriber of a prefix, the last to leave), or
    None when it did not.
    """

    __slots__ = ("counts", "standing")

    def __init__(self, standing: tuple[bytes, ...] = ()) -> None:
        self.standing = tuple(dict.fromkeys(standing))
        self.counts: dict[bytes, int] = {t: 1 for t in self.standing}

    def __len__(self) -> int:
        return len(self.counts)

    def union(self) -> list[bytes]:
        return sorted(self.counts)

    def initial(self) -> list[Message]:
        """What the subscribing side sends once it is open: the standing prefixes."""
        return [subscription(t) for t in self.standing]

    def apply(self, msg: Message) -> Message | None:
        body = msg[1]
        if len(body) != 1 or not body[0] or body[0][:1] not in (SUBSCRIBE, CANCEL):
            shown = body[0][:16] if len(body) == 1 else f"{len(body)} frames"
            raise EnvelopeError("not-a-subscription", f"{shown!r}")
        frame = body[0]
        topic = frame[1:]
        counts = self.counts
        if frame[:1] == SUBSCRIBE:
            n = counts.get(topic, 0)
            counts[topic] = n + 1
            return subscription(topic) if n == 0 else None
        n = counts.get(topic, 0)
        if n == 0 or (n == 1 and topic in self.standing):
            raise EnvelopeError("unknown-subscription", f"cancel {topic[:32]!r}")
        if n == 1:
            del counts[topic]
            return cancel(topic)
        counts[topic] = n - 1
        return None


def flatten(msg: Message, body_codec: BodyCodec | None = None) -> Message:
    """Pub/sub toward SP: a ZeroMQ message of several frames (topic frame + body frames) as the
    one SP body, the frames concatenated (so ``topic`` stays the prefix an SP subscriber
    matches), unless the ``gateway_body_codec`` hook packs them its own way. No hops."""
    body = msg[1]
    if len(body) == 1:
        return _new(Message, ((), body))
    if not body:
        raise EnvelopeError("no-body")
    packed = body_codec(body, "to_sp") if body_codec is not None else None
    return _new(Message, ((), packed if packed is not None else (b"".join(body),)))


def relay_to_sp(msg: Message, body_codec: BodyCodec | None = None) -> Message:
    """Pipeline and pair toward SP: the one body frame, no hops; several frames go through the
    body codec or are refused (``multi-frame-body``): a straight relay never merges frames."""
    body = msg[1]
    if len(body) != 1:
        packed = body_codec(body, "to_sp") if body_codec is not None and body else None
        if packed is None:
            if not body:
                raise EnvelopeError("no-body")
            raise EnvelopeError("multi-frame-body", f"{len(body)} frames")
        body = packed
    return _new(Message, ((), body))


def pair1_strip(msg: Message) -> Message:
    """SP pair1 -> elsewhere: drop the hop-count word (nng checked it against its TTL)."""
    hops = msg[0]
    if len(hops) > 1 or (hops and len(hops[0]) != 4):
        raise EnvelopeError("bad-hop-header", f"{len(hops)} hop word(s) {hops!r}")
    return _new(Message, ((), msg[1]))


def pair1_add(msg: Message) -> Message:
    """Elsewhere -> SP pair1: the gateway originates the message, hop count 0."""
    return _new(Message, ((PAIR1_HEADER,), msg[1]))


class PatternTranslator(Translator):
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
    ``request`` returns None when a subscription changed nothing upstream.
    """

    def __init__(self, pattern: str, front: str, back: str,
                 body_codec: BodyCodec | None = None, *, subscribe: tuple[bytes, ...] | None = None,
                 sp_pair1: bool = False) -> None:
        self.mode = f"{front}->{back}"
        self.pattern = pattern
        self.table = TokenTable(1)
        self.body_codec = body_codec
        self._expired_seen = 0
        self.pairs_replies = False
        codec = self._codec
        to_back = _passer(front, back, pattern, codec, sp_pair1)
        to_front = _passer(back, front, pattern, codec, sp_pair1)
        if pattern == "pubsub":
            standing = subscribe if subscribe is not None else ((b"",) if front == "sp" else ())
            self.subscriptions = Subscriptions(standing)
            self.up = front == "zmtp"  # an SP front (pub0) tells nothing
            self.down = True
            apply = self.subscriptions.apply
            self.request = lambda msg, now: apply(msg)
            self.reply = to_front
        elif pattern in ("pipeline", "pair"):
            self.subscriptions = None
            self.up, self.down = True, pattern == "pair"
            self.request, self.reply = to_back, to_front
        else:
            raise ValueError(f"no pattern translation for {pattern!r}")

    def _plan(self) -> None:
        """(The passers read the body codec per message: nothing to choose.)"""

    def _codec(self, frames: tuple[bytes, ...], direction: str) -> tuple[bytes, ...] | None:
        return self.body_codec(frames, direction) if self.body_codec is not None else None

    def initial(self) -> list[Message]:
        """Messages for the back end once it is open (the standing subscriptions)."""
        return self.subscriptions.initial() if self.subscriptions is not None else []

    def forget(self, sent: list[tuple[bytes, ...]]) -> None:
        return None

    def expire(self, now: float) -> int:
        return 0


def _passer(src: str, dst: str, pattern: str, codec: BodyCodec,
            sp_pair1: bool) -> Callable[[Message, float], Message]:
    """One direction of a straight relay (or of pub/sub data) from family ``src`` to ``dst``."""
    strip = sp_pair1 and src == "sp"
    add = sp_pair1 and dst == "sp"
    if dst == "sp" and src == "zmtp":
        shape: Callable[[Message], Message] = (
            (lambda m: flatten(m, codec)) if pattern == "pubsub" else (lambda m: relay_to_sp(m, codec)))
    elif dst == "zmtp" and src == "sp":
        def shape(m: Message) -> Message:
            unpacked = codec(m[1], "to_zmtp")
            return _new(Message, ((), unpacked if unpacked is not None else m[1]))
    else:
        def shape(m: Message) -> Message:
            return m if not m[0] else _new(Message, ((), m[1]))

    if strip and add:  # pair1 -> pair1: the hop count goes on (nng adds one as it sends)
        return lambda m, now: m if m[0] else pair1_add(m)
    if strip:
        return lambda m, now: shape(pair1_strip(m))
    if add:
        return lambda m, now: pair1_add(shape(m))
    return lambda m, now: shape(m)


__all__ += ["CANCEL", "PAIR1_HEADER", "SUBSCRIBE", "PatternTranslator", "Subscriptions",
            "cancel", "flatten", "pair1_add", "pair1_strip", "relay_to_sp", "subscription"]
