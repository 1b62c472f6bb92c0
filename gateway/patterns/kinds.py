"""Which pattern serves which socket kind: the one factory the engine uses.

Request-reply kinds come from :mod:`gateway.patterns.reqrep`, publish-subscribe from
:mod:`gateway.patterns.pubsub`, pipeline and pair from :mod:`gateway.patterns.pipeline`. Names
are pyzmq's or nng's (``XPUB``, ``sub0``, ``pair1``: :func:`gateway.patterns.pairing.canonical_kind`).
"""

from __future__ import annotations

from gateway.errors import LocalProtocolError
from gateway.patterns import reqrep
from gateway.patterns.pairing import NATIVE_KINDS, canonical_kind
from gateway.patterns.pipeline import Pair, Pair1, Pull, Push
from gateway.patterns.pubsub import (
    MAX_SUBSCRIPTION_BYTES,
    MAX_SUBSCRIPTIONS,
    Publisher,
    Subscriber,
)
from gateway.patterns.reqrep import Pattern


def make_pattern(kind: str, raw: bool = False, *, ttl: int = 8, relaxed: bool = False,
                 resend_interval: float = 60.0, verbose: bool = False,
                 filter: bool | None = None,
                 max_subscriptions: int = MAX_SUBSCRIPTIONS,
                 max_subscription_bytes: int = MAX_SUBSCRIPTION_BYTES) -> Pattern:
    """The pattern for a socket kind. ``raw``: REQ/REP -> xreq/xrep, PUB/SUB -> XPUB/XSUB
    (raw pub0/sub0), PAIR1 keeps its hop-count word; PUSH, PULL and PAIR have no raw variant
    that differs. ``verbose``: XPUB reports repeated subscribes too; ``filter``: SUB/XSUB filter
    received messages by their prefixes (default: cooked yes, raw no)."""
    kind, raw = canonical_kind(kind, raw)
    if kind in ("REQ", "REP", "DEALER", "ROUTER"):
        return reqrep.make_pattern(kind, raw, ttl=ttl, relaxed=relaxed,
                                   resend_interval=resend_interval)
    if kind == "PUB":
        return Publisher(kind, raw, ttl=ttl, verbose=verbose, max_subscriptions=max_subscriptions,
                         max_subscription_bytes=max_subscription_bytes)
    if kind == "SUB":
        return Subscriber(kind, raw, ttl=ttl, filter=filter, max_subscriptions=max_subscriptions,
                          max_subscription_bytes=max_subscription_bytes)
    if kind == "PUSH":
        return Push(kind, raw, ttl=ttl)
    if kind == "PULL":
        return Pull(kind, raw, ttl=ttl)
    if kind == "PAIR":
        return Pair(kind, raw, ttl=ttl)
    if kind == "PAIR1":
        return Pair1(kind, raw, ttl=ttl)
    raise LocalProtocolError(f"unknown socket type {kind!r}: use one of {', '.join(NATIVE_KINDS)} "
                             f"(or XPUB, XSUB, pub0, sub0, push0, pull0, pair0)")


__all__ = ["make_pattern"]
