"""An example ``gateway_body_codec`` plugin: carry multi-frame ZeroMQ bodies over SP.

SP messages have exactly one body frame, so by default the gateway refuses a ZeroMQ request
with several body frames (logged and counted as ``multi-frame-body``). This plugin packs the
frames into one SP body and unpacks replies that carry the same packing::

    b"GWMF" | u32 count | (u32 length | frame) * count          (big-endian)

The SP server must understand the packing (``unpack``/``pack`` below are what it would use);
a reply that does not start with the magic goes back to ZeroMQ as the single frame it is.

This hook changes what every bridge of the process does with multi-frame bodies, so it is not
loaded automatically. Register it explicitly where you want it::

    import gateway.plugins, body_codec_plugin
    gateway.plugins.manager().register(body_codec_plugin, name="body-codec")
    ...
    gateway.plugins.manager().unregister(name="body-codec")

or ship it as a distribution with ``[project.entry-points.gateway]`` (see
``examples/plugin-skeleton``) when every bridge of your deployment should pack.
"""

from __future__ import annotations

import struct

from gateway.hookspecs import hookimpl

MAGIC = b"GWMF"
_U32 = struct.Struct(">I")


def pack(frames: tuple[bytes, ...] | list[bytes]) -> bytes:
    """Frames -> one body: ``MAGIC | count | (length | frame)*``."""
    parts = [MAGIC, _U32.pack(len(frames))]
    for frame in frames:
        parts += (_U32.pack(len(frame)), frame)
    return b"".join(parts)


def unpack(body: bytes) -> tuple[bytes, ...] | None:
    """One body -> frames; ``None`` when ``body`` is not a well-formed packing."""
    if not body.startswith(MAGIC) or len(body) < 8:
        return None
    (count,) = _U32.unpack_from(body, 4)
    offset, frames = 8, []
    for _ in range(count):
        if offset + 4 > len(body):
            return None
        (size,) = _U32.unpack_from(body, offset)
        offset += 4
        if offset + size > len(body):
            return None
        frames.append(body[offset : offset + size])
        offset += size
    return tuple(frames) if offset == len(body) else None


@hookimpl
def gateway_body_codec(frames: tuple[bytes, ...], direction: str) -> tuple[bytes, ...] | None:
    if direction == "to_sp":  # a ZeroMQ body of several frames -> one SP frame
        return (pack(frames),)
    if direction == "to_zmtp":  # the SP reply's one frame -> the ZeroMQ frames it packs
        return unpack(frames[0]) if len(frames) == 1 else None
    return None
