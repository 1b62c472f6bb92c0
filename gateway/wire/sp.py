"""SP over TCP (nanomsg sp-tcp-mapping), sans-IO.

An 8-byte header each way (``00 53 50 00``, protocol u16 BE, two reserved bytes that must be
zero: nng's tcp/ipc/tls transports close a pipe whose bytes 6-7 are not), then
messages as u64 BE length + payload. There is no multipart on this wire: the parts handed to
``send_message`` (hop words + body) are concatenated, and a received message is a 1-tuple.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.errors import (
    LocalProtocolError,
    MessageTooLarge,
    PairingError,
    RemoteProtocolError,
    SpHeaderError,
    WrongWireError,
)
from gateway.wire._buffer import COPY_VIA_VIEW, Receiving, new_buffer
from gateway.wire.events import Event, HandshakeComplete

__all__ = ["HEADER_SIZE", "SpCodec", "SpRole", "sp_header"]

HEADER_SIZE = 8
_MAGIC = b"\x00SP\x00"
_U64 = struct.Struct(">Q")
_HEADER = struct.Struct(">4sHH")

# States.
_HEADER_WAIT = 0
_OPEN = 1


def sp_header(protocol: int) -> bytes:
    """The 8-byte SP/TCP connection header for ``protocol`` (e.g. 0x30 for req0)."""
    return _HEADER.pack(_MAGIC, protocol, 0)


@dataclass(frozen=True, slots=True)
class SpRole:
    """Who this end is on SP, as data (the engine takes it from the pairing tables)."""

    protocol: int  # announced in the header (req0 0x30, rep0 0x31)
    accepts: frozenset[int]  # peer protocols accepted
    names: Mapping[int, str] = field(default_factory=dict, hash=False)  # for peer_type and errors

    def name(self, protocol: int) -> str:
        return self.names.get(protocol, f"{protocol:#06x}")


class SpCodec(Receiving):
    """SP codec for one connection (the TCP mapping; ``message_prefix`` gives the IPC one).

    ``message_prefix``: bytes before each message's u64 length. nng's and nanomsg's IPC mapping
    writes a message-type byte (``b"\\x01"``); TCP has none. The 8-byte header is the same.
    """

    family = "sp"

    def __init__(
        self,
        role: SpRole,
        *,
        max_message_size: int = 1 << 20,
        message_prefix: bytes = b"",
    ) -> None:
        self.role = role
        self._prefix = bytes(message_prefix)
        self._skip = len(self._prefix)
        self.protocol = role.protocol
        self.max_message_size = max_message_size
        self.handshake_done = False
        self.peer_type: str | None = None
        self.peer_protocol: int | None = None
        self._accepted = role.accepts
        self._state = _HEADER_WAIT
        self._rx = new_buffer()
        self._error: RemoteProtocolError | None = None
        #: the kernel seam (:class:`gateway.wire.KernelSeam`): True in the open state (after
        #: the header), until the codec refuses. A reader may then take whole messages straight
        #: from :attr:`rx` (moving ``rx.pos`` past them) and stop before anything else, exactly
        #: as :meth:`next_messages` does. A plain attribute, kept where the state changes (the
        #: kernel reads it on every read: a property's frame cost more than the rest of it)
        self.streaming = False

    def initiate(self) -> bytes:
        """Our 8-byte header, to write as soon as the connection exists."""
        return sp_header(self.protocol)

    def data_to_send(self) -> bytes:
        """SP never queues anything of its own."""
        return b""

    def send_message(self, parts: tuple[bytes, ...]) -> bytes:
        """Length prefix + all parts concatenated."""
        if not self.handshake_done:
            raise LocalProtocolError("SP handshake not complete")
        n = len(parts)
        prefix = self._prefix
        if n == 1:
            p = parts[0]
            return prefix + _U64.pack(len(p)) + p
        if n == 2:  # request id + body: the common case
            p0, p1 = parts
            return b"".join((prefix, _U64.pack(len(p0) + len(p1)), p0, p1))
        return b"".join((prefix, _U64.pack(sum(map(len, parts))), *parts))

    @property
    def message_prefix(self) -> bytes:
        """The bytes before each message's length (IPC: ``b"\x01"``; TCP: none)."""
        return self._prefix

    @property
    def kernel_framing(self) -> str:
        """The kernel seam (:class:`gateway.wire.KernelSeam`): ``sp``, ``sp-ipc`` (nng's ipc
        prefix), or ``""`` for another prefix, which the kernel leaves to this codec."""
        prefix = self._prefix
        return "sp" if not prefix else "sp-ipc" if prefix == b"\x01" else ""

    @property
    def partial(self) -> bool:
        """True when received bytes that are no complete event yet are buffered: part of a
        message (or of the header). Exact once ``next_event()`` returned ``None``; while
        complete messages wait to be taken, it is True too. O(1), no parsing."""
        rx = self._rx
        return len(rx.data) > rx.pos

    def next_event(self) -> Event | None:
        """``HandshakeComplete``, then ``(payload,)`` per message; ``None`` for more bytes."""
        if self._error is not None:
            raise self._error
        try:
            if self._state == _OPEN:
                rx = self._rx
                buf = rx.data
                pos = rx.pos
                end = len(buf)
                skip = self._skip
                if end - pos < 8 + skip:
                    return None
                if skip and buf[pos : pos + skip] != self._prefix:
                    raise RemoteProtocolError(f"unknown SP/IPC message type {buf[pos]}")
                (size,) = _U64.unpack_from(buf, pos + skip)
                if size > self.max_message_size:
                    raise MessageTooLarge(
                        f"SP message of {size} bytes (limit {self.max_message_size})"
                    )
                start = pos + skip + 8
                stop = start + size
                if stop > end:
                    return None
                rx.pos = stop
                return (bytes(buf[start:stop]) if size < COPY_VIA_VIEW else rx.copy(start, stop),)
            return self._read_header()
        except RemoteProtocolError as exc:
            self._error = exc
            self.streaming = False
            raise

    def next_messages(self, limit: int) -> list[tuple[bytes, ...]]:
        """Up to ``limit`` whole messages in one call (the batch form of :meth:`next_event`).
        It stops before anything unusual (the header, a wrong IPC prefix, a message over the
        size limit, bytes still missing) and never raises: :meth:`next_event` then takes over
        from exactly there."""
        out: list[tuple[bytes, ...]] = []
        if self._state != _OPEN or self._error is not None or limit <= 0:
            return out
        rx = self._rx
        buf = rx.data
        whole = type(buf) is bytes  # the read as it came (see ReceiveBuffer)
        pos = rx.pos
        end = len(buf)
        skip = self._skip
        prefix = self._prefix
        head = 8 + skip
        limit_size = self.max_message_size
        unpack = _U64.unpack_from
        while end - pos >= head:
            if skip and buf[pos : pos + skip] != prefix:
                break
            (size,) = unpack(buf, pos + skip)
            start = pos + head
            stop = start + size
            if size > limit_size or stop > end:
                break
            if whole:  # a slice of the read (bytes) is the payload's one copy
                out.append((buf[start:stop],))  # type: ignore[arg-type]
            else:
                out.append((bytes(buf[start:stop]) if size < COPY_VIA_VIEW
                            else rx.copy(start, stop),))
            pos = stop
            if len(out) >= limit:
                break
        rx.pos = pos
        return out

    def _read_header(self) -> HandshakeComplete | None:
        rx = self._rx
        buf = rx.data
        pos = rx.pos
        have = len(buf) - pos
        n = min(have, 4)
        if buf[pos : pos + n] != _MAGIC[:n]:
            if buf[pos] == 0xFF:  # a ZMTP signature starts with 0xFF, an SP header never does
                raise WrongWireError("a ZeroMQ (ZMTP) greeting on an SP endpoint")
            raise RemoteProtocolError(f"bad SP header {bytes(buf[pos : pos + n]).hex()}")
        if have < HEADER_SIZE:
            return None
        _, proto, reserved = _HEADER.unpack_from(buf, pos)
        if reserved:
            raise SpHeaderError(f"SP header reserved bytes {reserved:04x} (must be 0000)")
        name = self.role.name(proto)
        if proto not in self._accepted:
            ours = self.role.name(self.protocol)
            raise PairingError(f"SP peer mismatch: {ours} cannot talk to {name}", ours=ours,
                               theirs=name)
        rx.pos = pos + HEADER_SIZE
        self.peer_protocol = proto
        self.peer_type = name
        self.handshake_done = True
        self._state = _OPEN
        self.streaming = True
        return HandshakeComplete(peer_type=name, version=(0, 0))


if TYPE_CHECKING:  # the codec meets the contract of gateway.wire (mypy checks these lines)
    from gateway.wire import BatchReading, KernelSeam, SpCodecFactory, WireCodec

    _factory: SpCodecFactory = SpCodec

    def _faces(c: SpCodec) -> tuple[WireCodec, BatchReading, KernelSeam]:
        return c, c, c
