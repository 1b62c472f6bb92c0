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

#: ZMTP: the Socket-Types whose READY carries an Identity property (as libzmq sends it).
ZMTP_SENDS_IDENTITY: frozenset[str] = frozenset({"REQ", "DEALER", "ROUTER"})

#: ZMTP has no raw REQ/REP: raw REQ/REP (xreq/xrep, device sockets) announce the sockets
#: ZeroMQ devices use (mirror of SP, where DEALER announces req0).
ZMTP_RAW_TYPES: dict[str, str] = {"REQ": "DEALER", "REP": "ROUTER"}

#: SP protocol numbers (nng's NNI_PROTO(3, 0) / NNI_PROTO(3, 1)).
SP_REQ0 = 0x30
SP_REP0 = 0x31
SP_NAMES = {SP_REQ0: "req0", SP_REP0: "rep0"}

#: SP: the protocol a native socket kind announces (raw or not): SP has no DEALER/ROUTER, so
#: DEALER speaks req0 (it is a raw REQ there) and ROUTER rep0.
SP_PROTOCOLS: dict[str, int] = {"REQ": SP_REQ0, "DEALER": SP_REQ0, "REP": SP_REP0, "ROUTER": SP_REP0}

#: SP: self protocol -> the peer protocols accepted (nng: only the declared peer).
SP_PEERS: dict[int, frozenset[int]] = {
    SP_REQ0: frozenset({SP_REP0}),
    SP_REP0: frozenset({SP_REQ0}),
}


def zmtp_socket_type(kind: str, raw: bool = False) -> str:
    """The Socket-Type a native socket announces on ZMTP (see ``ZMTP_RAW_TYPES``)."""
    return ZMTP_RAW_TYPES.get(kind, kind) if raw else kind


def sp_protocol(kind: str) -> int:
    """The SP protocol number a native socket announces (see ``SP_PROTOCOLS``)."""
    return SP_PROTOCOLS.get(kind, SP_REP0)


def zmtp_legal(a: str, b: str) -> bool:
    """True when libzmq lets a socket of type ``a`` talk to one of type ``b`` (symmetric)."""
    return b in ZMTP_PEERS[a] and a in ZMTP_PEERS[b]


def sp_legal(a: int, b: int) -> bool:
    return b in SP_PEERS.get(a, frozenset()) and a in SP_PEERS.get(b, frozenset())
