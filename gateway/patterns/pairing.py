"""Pairing rules as data: one table per wire, shared by the engine's handshake and the matrix.

Verified against libzmq 4.3.5 (ZMTP, checked at READY) and nng 1.11 / nanomsg 1.1.5 (SP,
checked on the 8-byte header). The seed note that lists REQ-REQ, REQ-DEALER, REP-REP and
REP-ROUTER as "OK" is wrong; this table is what the libraries do.
"""

from __future__ import annotations

SOCKET_TYPES = ("REQ", "REP", "DEALER", "ROUTER")

#: ZMTP: self type -> the peer Socket-Types libzmq accepts at READY.
ZMTP_PEERS: dict[str, frozenset[str]] = {
    "REQ": frozenset({"REP", "ROUTER"}),
    "REP": frozenset({"REQ", "DEALER"}),
    "DEALER": frozenset({"REP", "DEALER", "ROUTER"}),
    "ROUTER": frozenset({"REQ", "DEALER", "ROUTER"}),
}

#: SP protocol numbers (nng's NNI_PROTO(3, 0) / NNI_PROTO(3, 1)).
SP_REQ0 = 0x30
SP_REP0 = 0x31
SP_NAMES = {SP_REQ0: "req0", SP_REP0: "rep0"}

#: SP: self protocol -> the peer protocols accepted (nng: only the declared peer).
SP_PEERS: dict[int, frozenset[int]] = {
    SP_REQ0: frozenset({SP_REP0}),
    SP_REP0: frozenset({SP_REQ0}),
}


def zmtp_socket_type(kind: str, raw: bool = False) -> str:
    """The Socket-Type a native socket announces on ZMTP.

    Raw REQ/REP (xreq/xrep) are device sockets; ZMTP has no raw REQ/REP, so they announce the
    sockets ZeroMQ devices use: DEALER and ROUTER (mirror of SP, where DEALER announces req0).
    """
    if raw:
        return {"REQ": "DEALER", "REP": "ROUTER"}.get(kind, kind)
    return kind


def sp_protocol(kind: str) -> int:
    """The SP protocol number a native socket announces: REQ/xreq/DEALER req0, the rest rep0."""
    return SP_REQ0 if kind in ("REQ", "DEALER") else SP_REP0


def zmtp_legal(a: str, b: str) -> bool:
    """True when libzmq lets a socket of type ``a`` talk to one of type ``b`` (symmetric)."""
    return b in ZMTP_PEERS[a] and a in ZMTP_PEERS[b]


def sp_legal(a: int, b: int) -> bool:
    return b in SP_PEERS.get(a, frozenset()) and a in SP_PEERS.get(b, frozenset())
