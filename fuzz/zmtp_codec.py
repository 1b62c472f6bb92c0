"""Harness ``zmtp_codec``: the ZMTP codec (``gateway.wire.zmtp``, NULL mechanism) against the
batch-vs-reference oracle and the rules a peer cannot break.

Input: ``kind prelude peer size limit ncuts cuts[2 bytes each] stream``. ``kind`` picks the
socket this end is (REQ ... PAIR, raw or not), ``prelude`` what goes before ``stream``: nothing
(0), a libzmq 4.3.5 greeting (3.1) with the READY of ``peer`` (1), the same as 3.0 (2), a ZMTP
2.0 greeting with the socket-type byte and identity frame (3); ``size`` picks
``max_message_size``, ``limit`` the batch size of ``next_messages``; the whole stream is cut at
``ncuts`` offsets.

Oracles:

* :func:`gateway.testing.codec_checks.same_in_batches`: a codec read with ``next_event`` only
  and its twin read the engine's way (``next_messages`` first) give the same events, frame
  types and error; ``next_messages`` never raises; no exception other than a
  ``ProtocolError`` leaves ``next_event``; the event stream of one chunk ends;
* a read with ``next_event`` alone: no message before ``HandshakeComplete``, which comes once
  and only with a peer type the role accepts; no message over ``max_message_size``; every
  message has at least one frame of ``bytes``; an error ends the stream for good;
* every message received, sent back by a codec of the same role and read by a fresh one, comes
  out the same (encoder and decoder agree on every frame size).
"""

from __future__ import annotations

from gateway.engine.codecs import zmtp_role
from gateway.testing.codec_checks import chunked, same_in_batches
from gateway.wire.events import HandshakeComplete
from gateway.wire.zmtp import ZMTP2_SOCKET_TYPES, ZmtpCodec, encode_command, encode_properties

from ._codec import read_all, round_trip
from ._data import Data, Finding, Writer

NAME = "zmtp_codec"

#: (kind, raw) of every ZMTP socket the engine makes
KINDS: tuple[tuple[str, bool], ...] = (
    ("REQ", False), ("REP", False), ("DEALER", False), ("ROUTER", False), ("REQ", True),
    ("REP", True), ("PUB", False), ("SUB", False), ("PUB", True), ("SUB", True),
    ("PUSH", False), ("PULL", False), ("PAIR", False),
)
PEER_TYPES = ("REQ", "REP", "DEALER", "ROUTER", "PUB", "SUB", "XPUB", "XSUB", "PUSH", "PULL",
              "PAIR")
SIZES = (1 << 20, 64, 255, 256, 1000, 65536)
#: libzmq 4.3.5's greeting, as captured (padding ends in 01: its routing id length + 1)
LIBZMQ_SIGNATURE = bytes.fromhex("ff00000000000000017f")
_TYPE_CODES = {name: code for code, name in ZMTP2_SOCKET_TYPES.items()}


def greeting(minor: int = 1, mechanism: bytes = b"NULL", as_server: bool = False) -> bytes:
    """A 3.x greeting as libzmq sends it."""
    return (LIBZMQ_SIGNATURE + bytes((3, minor)) + mechanism.ljust(20, b"\x00")
            + bytes((int(as_server),)) + bytes(31))


def ready(peer: str) -> bytes:
    """The READY libzmq's ``peer`` socket sends (Identity for REQ, DEALER, ROUTER)."""
    props = [(b"Socket-Type", peer.encode())]
    if peer in ("REQ", "DEALER", "ROUTER"):
        props.append((b"Identity", b""))
    return encode_command(b"READY", encode_properties(props))


def prelude(which: int, peer: str) -> bytes:
    if which == 1:
        return greeting(1) + ready(peer)
    if which == 2:
        return greeting(0) + ready(peer)
    if which == 3:  # ZMTP 2.0 (RFC 15): revision 1, socket type, an empty identity frame
        return LIBZMQ_SIGNATURE + bytes((1, _TYPE_CODES.get(peer, 0))) + b"\x00\x00"
    return b""


def encode_input(*, kind: int = 0, prelude: int = 1, peer: int = 0, size: int = 0,
                 limit: int = 4, cuts: tuple[int, ...] = (), stream: bytes = b"") -> bytes:
    """An input in this harness's layout (the seeds are written with it)."""
    w = Writer().byte(kind).byte(prelude).byte(peer).byte(size).byte(limit).byte(len(cuts))
    for cut in cuts:
        w.uint(cut, 2)
    return w.raw(stream).bytes()


def _open(kind: str, raw: bool, peer: str, max_size: int) -> ZmtpCodec:
    """A codec of ``kind`` whose handshake with a 3.1 ``peer`` is done."""
    codec = ZmtpCodec(zmtp_role(kind, raw), max_message_size=max_size)
    codec.receive_data(greeting(1) + ready(peer))
    codec.next_event()
    return codec


def one_input(buf: bytes, strict: bool = False) -> None:
    data = Data(buf)
    kind, raw = data.choice(KINDS)
    which = data.byte() % 4
    peer = data.choice(PEER_TYPES)
    max_size = data.choice(SIZES)
    limit = 1 + data.byte() % 16
    cuts = [data.uint(2) for _ in range(data.byte() % 16)]
    stream = prelude(which, peer) + data.rest()
    chunks = chunked(stream, cuts)
    role = zmtp_role(kind, raw)

    def make() -> ZmtpCodec:
        return ZmtpCodec(role, max_message_size=max_size)

    def check(ev: object) -> None:
        if isinstance(ev, HandshakeComplete) and ev.peer_type not in role.accepts:
            raise Finding(f"handshake with {ev.peer_type!r}, which {role.socket_type} does not "
                          "accept")

    same_in_batches(make, chunks, limit)
    events = read_all(make(), chunks, check)
    messages = [ev for ev in events if type(ev) is tuple]
    hs = next((ev for ev in events if isinstance(ev, HandshakeComplete)), None)
    if hs is not None and hs.version >= (3, 0):
        peer_type = hs.peer_type
        round_trip(lambda: _open(kind, raw, peer_type, max_size), messages[:64])
