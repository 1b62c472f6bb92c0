"""The ZMTP codec's states and one reader per framing mode (h11's ``READERS``): the codec calls
the reader its state names (``codec.READERS``); each reads what its mode allows and stops before
anything else.

========================  ===================================================================
state                     reader
========================  ===================================================================
``GREETING``              the peer's signature and major version (the codec, ``greeting``)
``GREETING_REST``         the rest of a 3.x greeting (the codec, ``greeting``)
``V2_IDENTITY``           a 2.0 peer's socket type and identity (the codec, ``greeting``)
``AWAIT_READY``           :func:`read_handshake`: command frames only (READY, or the security
                          mechanism's), each at most ``HANDSHAKE_FRAME_LIMIT``
``OPEN``                  :func:`read_open`: plain data frames (through the batch reader),
                          commands between messages
``SEALED``                :func:`read_sealed`: CURVE MESSAGE boxes (RFC 26), one frame each
``CLOSED``                nothing
========================  ===================================================================

:func:`next_messages`, the batch reader (the codec's ``next_messages``), parses whole plain
messages in one call and stops before anything else, never raising; :func:`read_open` is built
on it, so a message is parsed by one loop whichever way it is asked for. The batch reader has a
fast twin for the usual read (a ``bytes`` chunk that cannot hold a message over the size
limit): the same frames, fewer checks (``gateway.testing.codec_checks.same_in_batches`` and
``tests/test_wire_zmtp_readers.py`` hold them equal).
"""

from __future__ import annotations

from typing import Protocol

from gateway.errors import MessageTooLarge, RemoteProtocolError
from gateway.wire._buffer import COPY_VIA_VIEW, ReceiveBuffer
from gateway.wire.events import Event
from gateway.wire.zmtp.framing import (
    COMMAND,
    FRAME_FLOOR,
    LONG,
    MORE,
    RESERVED,
    frame_at,
    unpack_u64,
)
from gateway.wire.zmtp_mechanism import Mechanism

__all__ = [
    "AWAIT_READY",
    "CLOSED",
    "GREETING",
    "GREETING_REST",
    "HANDSHAKE_FRAME_LIMIT",
    "OPEN",
    "SEALED",
    "V2_IDENTITY",
    "Stream",
    "next_messages",
    "read_handshake",
    "read_open",
    "read_sealed",
]

# The codec's states, in the order a connection goes through them (a state only moves forward).
GREETING = 0
GREETING_REST = 1
V2_IDENTITY = 2
AWAIT_READY = 3
OPEN = 4
SEALED = 5
CLOSED = 6

#: the largest frame accepted before the handshake completes (a greeting is 64 bytes, a CURVE
#: HELLO 200, READY/INITIATE metadata a few hundred): what an unauthenticated peer can make a
#: connection hold is this, not ``max_message_size``
HANDSHAKE_FRAME_LIMIT = 64 * 1024

#: what a sealed frame adds to its payload: nonce, MAC and flags
_BOX_OVERHEAD = 64 + 1 + 32


class Stream(Protocol):
    """What the readers use of the codec: its receive state and its command dispatch."""

    _rx: ReceiveBuffer
    _state: int
    #: frames of the message being read (MORE seen), and their total size
    _parts: list[bytes]
    #: the kernel seam: open, no error, no multipart message begun (``not _parts``): the
    #: readers keep it as ``_parts`` fills and empties
    streaming: bool
    _msg_size: int  # (each frame counted as :func:`counted`: at least FRAME_FLOOR)
    #: the reserved flag bits of the peer's version (``framing.RESERVED`` or ``RESERVED_V2``)
    _reserved: int
    max_message_size: int
    security: Mechanism | None

    def _command(self, body: bytes) -> Event | None:
        """One received command frame's body: its event, or None (consumed, nothing to say)."""
        ...


def counted(size: int) -> int:
    """What a frame of ``size`` bytes counts toward the message size limit."""
    return size if size > FRAME_FLOOR else FRAME_FLOOR


def next_messages(self: Stream, limit: int) -> list[tuple[bytes, ...]]:
    """Up to ``limit`` whole messages, parsed in one call: the batch form of ``next_event`` for
    plain data frames. It stops before anything else (a command, a frame it would refuse, a
    message over the size limit, bytes still missing, a state other than open and unsealed)
    and never raises: ``next_event`` then takes over from exactly there, with the same result as
    if it had parsed everything itself."""
    out: list[tuple[bytes, ...]] = []
    if self._state != OPEN or limit <= 0:
        return out
    rx = self._rx
    buf = rx.data  # the read as it came (bytes), or a tail and what followed (bytearray)
    whole = type(buf) is bytes
    pos = rx.pos
    end = len(buf)
    parts = self._parts
    limit_size = self.max_message_size
    msg_size = self._msg_size
    if whole and msg_size + end - pos <= limit_size:
        # the fast twin, for the usual read: no message in it can pass the size limit (a frame
        # counts no more than its bytes on the wire), and frames are slices
        while end - pos >= 2:
            flags = buf[pos]
            if flags < 2:  # a short frame, last or MORE
                start = pos + 2
                stop = start + buf[pos + 1]
            elif flags & 0xFC or end - pos < 9:  # a command, a reserved bit: next_event's
                break
            else:
                start = pos + 9
                stop = start + unpack_u64(buf, pos + 1)[0]
            if stop > end:
                break
            # (parts.append, not a bound local: CPython 3.11 specializes a list.append call)
            parts.append(buf[start:stop])  # type: ignore[arg-type]
            pos = stop
            if flags & MORE:
                continue
            out.append(tuple(parts))
            parts.clear()
            if len(out) >= limit:
                break
        rx.pos = pos
        self._msg_size = sum(map(counted, map(len, parts))) if parts else 0  # (what it counts)
        self.streaming = not parts
        return out
    while end - pos >= 2:
        flags = buf[pos]
        if flags & 0xFC:  # a command or a reserved bit: next_event's business
            break
        if flags & LONG:
            if end - pos < 9:
                break
            (size,) = unpack_u64(buf, pos + 1)
            start = pos + 9
        else:
            size = buf[pos + 1]
            start = pos + 2
        stop = start + size
        cost = size if size > FRAME_FLOOR else FRAME_FLOOR  # (counted, inline)
        if stop > end or msg_size + cost > limit_size:
            break
        msg_size += cost
        if whole:  # a slice of the read (bytes) is the frame's one copy
            parts.append(buf[start:stop])  # type: ignore[arg-type]
        else:
            parts.append(bytes(buf[start:stop]) if size < COPY_VIA_VIEW
                         else rx.copy(start, stop))
        pos = stop
        if flags & MORE:
            continue
        out.append(tuple(parts))
        parts.clear()
        msg_size = 0
        if len(out) >= limit:
            break
    rx.pos = pos
    self._msg_size = msg_size
    self.streaming = not parts
    return out


def read_open(codec: Stream) -> Event | None:
    """The open state, plain frames (``next_event``): the next message, through the batch
    reader, or else what stopped it: a command between messages, a frame refused, or bytes
    still missing (None)."""
    rx = codec._rx
    while True:
        batch = next_messages(codec, 1)
        if batch:
            return batch[0]
        pos = rx.pos
        event = _command_frame(codec, True)
        if event is not None or rx.pos == pos:  # an event, or bytes still missing
            return event
        # a command with nothing to say (an unknown one, skipped): read on


def read_handshake(codec: Stream) -> Event | None:
    """After a 3.x greeting: command frames only (READY, or the mechanism's HELLO, WELCOME,
    INITIATE...), until one of them completes the handshake."""
    rx = codec._rx
    while True:
        pos = rx.pos
        event = _command_frame(codec, False)
        if event is not None or rx.pos == pos:  # an event, or bytes still missing
            return event
        # a mechanism's step with nothing to say yet: read on


def _command_frame(codec: Stream, is_open: bool) -> Event | None:
    """The frame at ``rx.pos`` when it is no data frame the batch reader takes: a command
    (consumed and dispatched), or a refusal (raised); None when its bytes are not all in."""
    rx = codec._rx
    buf = rx.data
    header = frame_at(buf, rx.pos)
    if header is None:
        return None
    flags, start, size = header
    limit = codec.max_message_size
    if is_open and not flags & 0xFC:
        # a data frame the batch reader left: over the size limit, or not all in yet
        msg_size = codec._msg_size + counted(size)
        if msg_size > limit:
            raise MessageTooLarge(f"ZMTP message of {msg_size}+ bytes (limit {limit})")
        return None
    if flags & codec._reserved:
        raise RemoteProtocolError(f"reserved ZMTP frame flag bits set: {flags:#04x}")
    if not flags & COMMAND:
        raise RemoteProtocolError("ZMTP data frame before READY")
    if flags & MORE or codec._parts:
        raise RemoteProtocolError("ZMTP command inside a multipart message")
    if size > limit:
        raise MessageTooLarge(f"ZMTP command of {size} bytes (limit {limit})")
    if not is_open and size > HANDSHAKE_FRAME_LIMIT:
        raise RemoteProtocolError(f"ZMTP handshake command of {size} bytes (at most "
                                  f"{HANDSHAKE_FRAME_LIMIT} before the handshake is done)")
    stop = start + size
    if stop > len(buf):
        return None
    rx.pos = stop
    return codec._command(bytes(buf[start:stop]))


def read_sealed(codec: Stream) -> Event | None:
    """After a CURVE handshake: every frame is a MESSAGE box (RFC 26) holding one frame, the
    MORE and COMMAND bits inside the box."""
    security = codec.security
    assert security is not None
    open_box = security.open
    rx = codec._rx
    buf = rx.data
    parts = codec._parts
    limit = codec.max_message_size
    box_limit = limit + _BOX_OVERHEAD
    while (header := frame_at(buf, rx.pos)) is not None:
        flags, start, size = header
        # the MORE bit that counts is the one inside the box (RFC 26); some implementations
        # also set it on the outer frame, which libzmq ignores as well. COMMAND and the
        # reserved bits stay refused.
        if flags & (RESERVED | COMMAND):
            raise RemoteProtocolError(f"bad CURVE MESSAGE frame flags: {flags:#04x}")
        if size > box_limit:
            raise MessageTooLarge(f"CURVE MESSAGE of {size} bytes (limit {box_limit})")
        stop = start + size
        if stop > len(buf):
            break
        rx.pos = stop
        inner_flags, payload = open_box(bytes(buf[start:stop]))
        if inner_flags & 0x02:  # a command inside the box (PING, PONG, ERROR ...)
            if inner_flags & 0x01 or parts:
                raise RemoteProtocolError("ZMTP command inside a multipart message")
            event = codec._command(payload)
            if event is not None:
                return event
            continue
        codec._msg_size += counted(len(payload))
        if codec._msg_size > limit:
            raise MessageTooLarge(f"ZMTP message of {codec._msg_size}+ bytes (limit {limit})")
        parts.append(payload)
        if inner_flags & 0x01:
            codec.streaming = False
            continue
        codec._msg_size = 0
        msg = tuple(parts)
        parts.clear()
        codec.streaming = True
        return msg
    return None
