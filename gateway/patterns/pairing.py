"""Pairing rules as data: one table per wire, shared by the engine's handshake and the matrix.

Verified against libzmq 4.3.5 (ZMTP, checked at READY) and nng 1.11 / nanomsg 1.1.5 (SP,
checked on the 8-byte header). The seed note that lists REQ-REQ, REQ-DEALER, REP-REP and
REP-ROUTER as "OK" is wrong; this table is what the libraries do.
"""

from __future__ import annotations

SOCKET_TYPES = ("REQ", "REP", "DEALER", "ROUTER")
#: The socket types beyond request-reply (publish-subscribe, pipeline, exclusive pair) on ZMTP
#: (RFC 29, 30, 31); the raw XPUB/XSUB are announced by raw PUB/SUB.
PATTERN_TYPES = ("PUB", "SUB", "XPUB", "XSUB", "PUSH", "PULL", "PAIR")

#: ZMTP: self type -> the peer Socket-Types libzmq accepts at READY.
ZMTP_PEERS: dict[str, frozenset[str]] = {
    "REQ": frozenset({"REP", "ROUTER"}),
    "REP": frozenset({"REQ", "DEALER"}),
    "DEALER": frozenset({"REP", "DEALER", "ROUTER"}),
    "ROUTER": frozenset({"REQ", "DEALER", "ROUTER"}),
    # RFC 37 "Socket-Type compatibility": PUB/XPUB with SUB/XSUB, PUSH with PULL, PAIR alone
    "PUB": frozenset({"SUB", "XSUB"}),
    "XPUB": frozenset({"SUB", "XSUB"}),
    "SUB": frozenset({"PUB", "XPUB"}),
    "XSUB": frozenset({"PUB", "XPUB"}),
    "PUSH": frozenset({"PULL"}),
    "PULL": frozenset({"PUSH"}),
    "PAIR": frozenset({"PAIR"}),
}

#: ZMTP: the Socket-Types whose READY carries an Identity property (as libzmq sends it).
ZMTP_SENDS_IDENTITY: frozenset[str] = frozenset({"REQ", "DEALER", "ROUTER"})

#: ZMTP has no raw REQ/REP: raw REQ/REP (xreq/xrep, device sockets) announce the sockets
#: ZeroMQ devices use (mirror of SP, where DEALER announces req0).
ZMTP_RAW_TYPES: dict[str, str] = {"REQ": "DEALER", "REP": "ROUTER", "PUB": "XPUB", "SUB": "XSUB"}

#: SP protocol numbers (nng's NNI_PROTO(3, 0) / NNI_PROTO(3, 1)).
SP_REQ0 = 0x30
SP_REP0 = 0x31
SP_PAIR0 = 0x10
SP_PAIR1 = 0x11
SP_PUB0 = 0x20
SP_SUB0 = 0x21
SP_PUSH0 = 0x50
SP_PULL0 = 0x51
SP_NAMES = {SP_REQ0: "req0", SP_REP0: "rep0", SP_PAIR0: "pair0", SP_PAIR1: "pair1",
            SP_PUB0: "pub0", SP_SUB0: "sub0", SP_PUSH0: "push0", SP_PULL0: "pull0"}

#: SP: the protocol a native socket kind announces (raw or not): SP has no DEALER/ROUTER, so
#: DEALER speaks req0 (it is a raw REQ there) and ROUTER rep0.
SP_PROTOCOLS: dict[str, int] = {
    "REQ": SP_REQ0, "DEALER": SP_REQ0, "REP": SP_REP0, "ROUTER": SP_REP0,
    "PUB": SP_PUB0, "SUB": SP_SUB0, "PUSH": SP_PUSH0, "PULL": SP_PULL0,
    "PAIR": SP_PAIR0, "PAIR1": SP_PAIR1,
}

#: SP: self protocol -> the peer protocols accepted (nng: only the declared peer).
SP_PEERS: dict[int, frozenset[int]] = {
    SP_REQ0: frozenset({SP_REP0}),
    SP_REP0: frozenset({SP_REQ0}),
    SP_PAIR0: frozenset({SP_PAIR0}),  # pair0 and pair1 do not interoperate (pair1's header)
    SP_PAIR1: frozenset({SP_PAIR1}),
    SP_PUB0: frozenset({SP_SUB0}),
    SP_SUB0: frozenset({SP_PUB0}),
    SP_PUSH0: frozenset({SP_PULL0}),
    SP_PULL0: frozenset({SP_PUSH0}),
}

#: Native socket kinds, by the names users write (pyzmq's and nng's), as ``(kind, raw)``:
#: XPUB/XSUB are raw PUB/SUB (as nng's raw pub0/sub0); nng's names pick the same kinds.
#: PAIR1 (SP pair1) has no ZMTP counterpart.
KIND_ALIASES: dict[str, tuple[str, bool]] = {
    "XPUB": ("PUB", True), "XSUB": ("SUB", True),
    "PUB0": ("PUB", False), "SUB0": ("SUB", False), "PUSH0": ("PUSH", False),
    "PULL0": ("PULL", False), "PAIR0": ("PAIR", False), "PAIR1": ("PAIR1", False),
    "REQ0": ("REQ", False), "REP0": ("REP", False),
}

#: Kinds a native socket can be (after :func:`canonical_kind`).
NATIVE_KINDS = ("REQ", "REP", "DEALER", "ROUTER", "PUB", "SUB", "PUSH", "PULL", "PAIR", "PAIR1")

#: Kinds that exist on one wire family only.
SP_ONLY_KINDS = frozenset({"PAIR1"})


def canonical_kind(kind: str, raw: bool = False) -> tuple[str, bool]:
    """``(kind, raw)`` for any accepted name: ``canonical_kind("XPUB") == ("PUB", True)``,
    ``canonical_kind("sub0") == ("SUB", False)``; unknown names are returned upper-cased."""
    upper = kind.upper()
    base, forced_raw = KIND_ALIASES.get(upper, (upper, False))
    return base, raw or forced_raw


def zmtp_socket_type(kind: str, raw: bool = False) -> str:
    """The Socket-Type a native socket announces on ZMTP (see ``ZMTP_RAW_TYPES``)."""
    kind, raw = canonical_kind(kind, raw)
    return ZMTP_RAW_TYPES.get(kind, kind) if raw else kind


def sp_protocol(kind: str) -> int:
    """The SP protocol number a native socket announces (see ``SP_PROTOCOLS``)."""
    return SP_PROTOCOLS.get(canonical_kind(kind)[0], SP_REP0)


def zmtp_legal(a: str, b: str) -> bool:
    """True when libzmq lets a socket of type ``a`` talk to one of type ``b`` (symmetric)."""
    return b in ZMTP_PEERS[a] and a in ZMTP_PEERS[b]


def sp_legal(a: int, b: int) -> bool:
    return b in SP_PEERS.get(a, frozenset()) and a in SP_PEERS.get(b, frozenset())
