"""ZMTP frames (RFC 23 "Framing"; RFC 15 for 2.0): the flags, the header forms, the one header
parser the readers share, the
encoding of messages (plain and sealed).

A frame is ``flags(1) size(1 or 8, big-endian) body``: bit 0 MORE, bit 1 LONG (an 8-byte size),
bit 2 COMMAND (3.x only), bits 3-7 reserved (2.0: bits 2-7).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from gateway.errors import LocalProtocolError

MORE = 0x01
LONG = 0x02
COMMAND = 0x04
#: reserved flag bits on ZMTP 3.x, and on 2.0 (RFC 15: no COMMAND flag)
RESERVED = 0xF8
RESERVED_V2 = 0xFC
#: the least a data frame counts toward a message's size limit (``max_message_size``): its
#: short header's bytes, so that empty frames are not free (a message of 200,000 of them is
#: 400,000 bytes, not 0); a frame of more counts its payload
FRAME_FLOOR = 2

U64 = struct.Struct(">Q")
U32 = struct.Struct(">I")
U16 = struct.Struct(">H")
LONG_HDR = struct.Struct(">BQ")
#: their hot methods, bound once: a name imported from here and called as ``U64.unpack_from``
#: costs an attribute lookup and a bound method per call (CPython 3.11 compiles a method call
#: on an imported name as an attribute load); these are one global load
unpack_u64 = U64.unpack_from
pack_long_header = LONG_HDR.pack

#: precomputed short frame headers, indexed by size (0..255)
SHORT_LAST = tuple(bytes((0, n)) for n in range(256))
SHORT_MORE = tuple(bytes((MORE, n)) for n in range(256))


def frame_header(flags: int, size: int) -> bytes:
    """The header of a frame of ``size`` bytes: short up to 255, LONG beyond."""
    if size <= 255:
        return bytes((flags, size))
    return LONG_HDR.pack(flags | LONG, size)


def frame_at(buf: bytes | bytearray, pos: int) -> tuple[int, int, int] | None:
    """The frame header at ``pos``: ``(flags, body start, body size)``, or None until the whole
    header (2 or 9 bytes) is in. It reads the size only; what the flags and the size allow is
    the caller's to check."""
    if len(buf) - pos < 2:
        return None
    flags = buf[pos]
    if flags & LONG:
        if len(buf) - pos < 9:
            return None
        return flags, pos + 9, U64.unpack_from(buf, pos + 1)[0]
    return flags, pos + 2, buf[pos + 1]


def encode_message(parts: tuple[bytes, ...]) -> bytes:
    """One plain message, any shape: MORE on every frame but the last (``ZmtpCodec.send_message``
    writes the common shapes itself; this is their general twin)."""
    if not parts:
        raise LocalProtocolError("a ZMTP message needs at least one frame")
    out: list[bytes] = []
    append = out.append
    last = len(parts) - 1
    for i, p in enumerate(parts):
        size = len(p)
        if size <= 255:
            append(SHORT_MORE[size] if i < last else SHORT_LAST[size])
        else:
            append(LONG_HDR.pack(LONG | MORE if i < last else LONG, size))
        append(p)
    return b"".join(out)


def seal_message(seal: Callable[[int, bytes], bytes], parts: tuple[bytes, ...]) -> bytes:
    """One message after a CURVE handshake: each frame a MESSAGE box (``seal(flags, frame)``),
    sent as a plain frame (flags 0) with the MORE bit inside the box, as libzmq does."""
    if not parts:
        raise LocalProtocolError("a ZMTP message needs at least one frame")
    out: list[bytes] = []
    last = len(parts) - 1
    for i, p in enumerate(parts):
        body = seal(MORE if i < last else 0x00, p)
        out.append(frame_header(0, len(body)))
        out.append(body)
    return b"".join(out)


__all__ = ["COMMAND", "FRAME_FLOOR", "LONG", "MORE", "RESERVED", "RESERVED_V2", "encode_message",
           "frame_at",
           "frame_header", "pack_long_header", "seal_message",
           "unpack_u64"]
