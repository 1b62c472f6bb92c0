"""Socket patterns (REQ, REP, DEALER, ROUTER, raw REQ/REP) as sans-IO state machines."""

from gateway.patterns.pairing import SOCKET_TYPES, SP_PEERS, ZMTP_PEERS, sp_legal, zmtp_legal
from gateway.patterns.reqrep import (
    SP,
    ZMTP,
    Pattern,
    make_pattern,
    split_sp,
    split_zmtp,
)

__all__ = [
    "SOCKET_TYPES", "SP", "SP_PEERS", "ZMTP", "ZMTP_PEERS", "Pattern", "make_pattern",
    "sp_legal", "split_sp", "split_zmtp", "zmtp_legal",
]
