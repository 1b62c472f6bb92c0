"""What the ZMTP codec tests share: a peer's greeting and READY as bytes, codecs made as the
engine makes them, and small drivers (imported by name: pytest puts ``tests/`` on ``sys.path``)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st

from gateway.engine.codecs import zmtp_role
from gateway.patterns import pairing
from gateway.wire.events import HandshakeComplete
from gateway.wire.zmtp import ZmtpCodec

GREETING = (
    b"\xff" + b"\x00" * 8 + b"\x7f"  # signature
    + b"\x03\x01"  # version 3.1
    + b"NULL" + b"\x00" * 16  # mechanism, padded to 20
    + b"\x00"  # as-server
    + b"\x00" * 31  # filler
)  # fmt: skip
# What libzmq 4.3.5 sends (captured): padding ends in 01 (its routing id length + 1).
LIBZMQ_GREETING = bytes.fromhex("ff00000000000000017f03014e554c4c") + b"\x00" * 48
#: RFC 37 "Version Negotiation": what goes out first (signature + major), and the rest of the
#: greeting (minor, mechanism, as-server, filler), sent once the peer's major is known.
SIGNATURE = LIBZMQ_GREETING[:11]
REST = LIBZMQ_GREETING[11:]

READY_REP = b"\x04\x19\x05READY\x0bSocket-Type\x00\x00\x00\x03REP"
READY_REQ = b"\x04\x26\x05READY\x0bSocket-Type\x00\x00\x00\x03REQ\x08Identity\x00\x00\x00\x00"


def ready(socket_type: bytes, identity: bytes | None = None, name: bytes = b"Socket-Type") -> bytes:
    props = bytes((len(name),)) + name + len(socket_type).to_bytes(4, "big") + socket_type
    if identity is not None:
        props += b"\x08Identity" + len(identity).to_bytes(4, "big") + identity
    body = b"\x05READY" + props
    return bytes((0x04, len(body))) + body


def zmtp_codec(kind: str, raw: bool = False, **kw: Any) -> ZmtpCodec:
    """A codec with the identity the engine gives a native ``kind`` socket."""
    return ZmtpCodec(zmtp_role(kind, raw), **kw)


def drain(codec: ZmtpCodec) -> list:
    events = []
    while (ev := codec.next_event()) is not None:
        events.append(ev)
    return events


def opened(kind: str = "REQ", peer: bytes = b"REP", **kw) -> ZmtpCodec:
    """A codec past the handshake with a fake peer of type ``peer``."""
    codec = zmtp_codec(kind, **kw)
    codec.initiate()
    codec.receive_data(GREETING + ready(peer))
    [hs] = drain(codec)
    assert isinstance(hs, HandshakeComplete)
    codec.data_to_send()
    return codec


def full_greeting(codec: ZmtpCodec) -> bytes:
    """The whole 64-byte greeting ``codec`` sends to a 3.x peer (it is consumed: use a twin)."""
    first = codec.initiate()
    codec.receive_data(GREETING[:11])
    assert codec.next_event() is None
    return first + codec.data_to_send()


def pump(a: ZmtpCodec, b: ZmtpCodec) -> tuple[list, list]:
    """Run the handshake between two in-memory codecs; return each side's events."""
    ea: list = []
    eb: list = []
    b.receive_data(a.initiate())
    a.receive_data(b.initiate())
    for _ in range(4):
        eb += drain(b)
        ea += drain(a)
        b.receive_data(a.data_to_send())
        a.receive_data(b.data_to_send())
    return ea, eb


#: every (ours, theirs) pair of socket types
PAIRS = list(itertools.product(pairing.SOCKET_TYPES, repeat=2))
#: the pairs libzmq accepts at READY, and the ones it refuses
LEGAL = [(a, b) for a, b in PAIRS if pairing.zmtp_legal(a, b)]
ILLEGAL = [(a, b) for a, b in PAIRS if not pairing.zmtp_legal(a, b)]

#: a message's frames, as hypothesis draws them
frames = st.lists(st.binary(max_size=300), min_size=1, max_size=6).map(tuple)
