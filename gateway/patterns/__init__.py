"""Socket patterns as sans-IO state machines: REQ, REP, DEALER, ROUTER, raw REQ/REP
(:mod:`~gateway.patterns.reqrep`); PUB, SUB, XPUB, XSUB, pub0, sub0
(:mod:`~gateway.patterns.pubsub`); PUSH, PULL, PAIR, pair0, pair1
(:mod:`~gateway.patterns.pipeline`); the pairing tables (:mod:`~gateway.patterns.pairing`)."""

from gateway.patterns.kinds import make_pattern
from gateway.patterns.pairing import (
    PATTERN_TYPES,
    SOCKET_TYPES,
    SP_PEERS,
    ZMTP_PEERS,
    canonical_kind,
    sp_legal,
    zmtp_legal,
)
from gateway.patterns.pipeline import Pair, Pair1, Pull, Push
from gateway.patterns.pubsub import Publisher, Subscriber
from gateway.patterns.reqrep import (
    SP,
    ZMTP,
    Pattern,
    split_sp,
    split_zmtp,
)

__all__ = [
    "PATTERN_TYPES", "SOCKET_TYPES", "SP", "SP_PEERS", "ZMTP", "ZMTP_PEERS", "Pair", "Pair1",
    "Pattern", "Publisher", "Pull", "Push", "Subscriber", "canonical_kind", "make_pattern",
    "sp_legal", "split_sp", "split_zmtp", "zmtp_legal",
]
