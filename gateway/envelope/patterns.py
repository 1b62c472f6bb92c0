"""Beyond request-reply: what pub/sub, pipeline and pair bridges do to messages, as pure
functions on :class:`~gateway.message.Message` (docs/patterns.md): subscriptions counted
(:class:`Subscriptions`), several ZeroMQ frames toward SP's one (:func:`flatten`,
:func:`relay_to_sp`), pair1's hop-count word (:func:`pair1_strip`, :func:`pair1_add`), and one
direction of a relay put together from them (:func:`relay`).
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.envelope.errors import EnvelopeError
from gateway.message import Message, sp_body_fault

__all__ = ["CANCEL", "PAIR1_HEADER", "SUBSCRIBE", "BodyCodec", "Subscriptions", "cancel",
           "flatten", "pair1_add", "pair1_strip", "relay", "relay_to_sp", "subscription"]

_new = tuple.__new__  # Message(...) without the NamedTuple __new__ wrapper (hot path)

#: ``(frames, direction) -> frames | None``: the ``gateway_body_codec`` hook, or None.
BodyCodec = Callable[[tuple[bytes, ...], str], "tuple[bytes, ...] | None"]

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
    fault = sp_body_fault(body)
    if fault:
        packed = body_codec(body, "to_sp") if body_codec is not None and body else None
        if packed is None:
            raise EnvelopeError(fault, f"{len(body)} frames")
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


def relay(src: str, dst: str, pattern: str, codec: BodyCodec,
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
