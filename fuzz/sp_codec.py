"""Harness ``sp_codec``: the SP codec (``gateway.wire.sp``, TCP and IPC framing) against the
batch-vs-reference oracle and the rules a peer cannot break.

Input: ``kind ipc prelude size limit ncuts cuts[2 bytes each] stream``. ``kind`` picks the
socket this end is, ``ipc`` the framing (odd: nng's IPC, a ``0x01`` byte before each length),
``prelude`` what goes before ``stream``: nothing (0) or the header of the first protocol the
role accepts (1; what nng sends); ``size`` picks ``max_message_size``, ``limit`` the batch of
``next_messages``; the stream is cut at ``ncuts`` offsets.

Oracles: :func:`gateway.testing.codec_checks.same_in_batches` (as for ZMTP), then a read with
``next_event`` alone: one ``HandshakeComplete``, with a protocol the role accepts, before any
message; every message a 1-tuple of ``bytes`` within ``max_message_size``; nothing after an
error; every message, sent back by a codec of the same role and read by a fresh one, unchanged.
"""

from __future__ import annotations

from gateway.engine.codecs import sp_role
from gateway.testing.codec_checks import chunked, same_in_batches
from gateway.wire.events import HandshakeComplete
from gateway.wire.sp import SpCodec, sp_header

from ._codec import read_all, round_trip
from ._data import Data, Finding, Writer

NAME = "sp_codec"

KINDS = ("REQ", "REP", "DEALER", "ROUTER", "PUB", "SUB", "PUSH", "PULL", "PAIR", "PAIR1")
SIZES = (1 << 20, 64, 255, 256, 1000, 65536)


def encode_input(*, kind: int = 0, ipc: bool = False, prelude: int = 1, size: int = 0,
                 limit: int = 4, cuts: tuple[int, ...] = (), stream: bytes = b"") -> bytes:
    w = Writer().byte(kind).byte(int(ipc)).byte(prelude).byte(size).byte(limit)
    w.byte(len(cuts))
    for cut in cuts:
        w.uint(cut, 2)
    return w.raw(stream).bytes()


def one_input(buf: bytes, strict: bool = False) -> None:
    data = Data(buf)
    kind = data.choice(KINDS)
    prefix = b"\x01" if data.flag() else b""
    which = data.byte() % 2
    max_size = data.choice(SIZES)
    limit = 1 + data.byte() % 16
    cuts = [data.uint(2) for _ in range(data.byte() % 16)]
    role = sp_role(kind)
    head = sp_header(min(role.accepts)) if which else b""
    chunks = chunked(head + data.rest(), cuts)

    def make() -> SpCodec:
        return SpCodec(role, max_message_size=max_size, message_prefix=prefix)

    def check(ev: object) -> None:
        if isinstance(ev, HandshakeComplete):
            if codec.peer_protocol not in role.accepts:
                raise Finding(f"handshake with protocol {codec.peer_protocol}, which "
                              f"{role.protocol:#x} does not accept")
        elif type(ev) is not tuple:
            raise Finding(f"an SP codec event of type {type(ev).__name__}")
        elif len(ev) != 1:
            raise Finding(f"an SP message of {len(ev)} parts: {ev!r:.80}")

    def opened() -> SpCodec:
        c = make()
        c.receive_data(sp_header(codec.peer_protocol or 0))
        c.next_event()
        return c

    same_in_batches(make, chunks, limit)
    codec = make()
    events = read_all(codec, chunks, check)
    round_trip(opened, [ev for ev in events if type(ev) is tuple][:64])
