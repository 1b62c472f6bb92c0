"""Z85 (rfc.zeromq.org spec 32): the text form of CURVE keys, 32 bytes <-> 40 characters.

The engine does not import pyzmq (an optional backend's dependency, and a C extension the
pure-Python engine must not need), so this is the spec's 20 lines; ``tests/test_z85.py`` checks
it against the spec's test vector and against ``zmq.utils.z85``.
"""

from __future__ import annotations

import struct

__all__ = ["Z85Error", "decode", "encode"]

_ALPHABET = (b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
             b".-:+=^!/*?&<>()[]{}@%$#")
_INDEX = {c: i for i, c in enumerate(_ALPHABET)}
_U32 = struct.Struct(">I")


class Z85Error(ValueError):
    """Text that is not Z85, or bytes whose length is not a multiple of 4."""


def encode(data: bytes) -> str:
    """Bytes (a multiple of 4 long) -> Z85 text (5 characters per 4 bytes)."""
    if len(data) % 4:
        raise Z85Error(f"Z85 encodes a multiple of 4 bytes, not {len(data)}")
    out = bytearray()
    for (value,) in _U32.iter_unpack(data):
        chunk = bytearray(5)
        for i in range(4, -1, -1):
            value, chunk[i] = divmod(value, 85)
        out += bytes(_ALPHABET[c] for c in chunk)
    return out.decode("ascii")


def decode(text: str | bytes) -> bytes:
    """Z85 text (a multiple of 5 characters) -> bytes."""
    raw = text.encode("ascii", "replace") if isinstance(text, str) else bytes(text)
    if len(raw) % 5:
        raise Z85Error(f"Z85 text is a multiple of 5 characters long, not {len(raw)}")
    out = bytearray()
    for pos in range(0, len(raw), 5):
        value = 0
        for c in raw[pos:pos + 5]:
            digit = _INDEX.get(c)
            if digit is None:
                raise Z85Error(f"not a Z85 character: {chr(c)!r}")
            value = value * 85 + digit
        if value > 0xFFFFFFFF:
            raise Z85Error("Z85 group out of range")
        out += _U32.pack(value)
    return bytes(out)
