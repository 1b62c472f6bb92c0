"""Both sides of a bridge as TCP streams in one pcapng file, from its capture records.

A ``records`` capture (:mod:`gateway.device.tap`) carries each forwarded message as the
receiving socket handed it over and as the other side's socket was handed it, not the bytes on
the wire. This module makes the wire bytes again with the project's own sans-IO codecs
(:func:`gateway.wire.zmtp.framing.encode_message`, :class:`gateway.wire.sp.SpCodec`'s framing,
:func:`gateway.wire.zmtp.greeting.signature`/``greeting_rest`` and the READY command of
:mod:`gateway.wire.zmtp.commands`), one synthetic TCP connection per pipe:

* a front pipe: client ``10.1.0.N:4xxxx`` -> gateway ``10.0.0.1:FRONT_PORT``; a back pipe:
  gateway ``10.0.0.1:5xxxx`` -> server ``10.2.0.N:BACK_PORT``;
* each opens with SYN, SYN-ACK, ACK, then the handshake a NULL-mechanism peer of that kind
  sends (ZMTP 3.1 greetings and READY with Socket-Type; SP's 8-byte headers), synthesized:
  the capture did not see it (what CURVE or TLS encrypted is shown in the clear, as NULL);
* then each message as one segment (split at 64,000 bytes), stamped with the time the tap saw
  it, in both directions.

So one file shows the ZeroMQ request and the SP request it became next to each other, framed
exactly as the codecs frame them. The packets are made and written with scapy (``PcapNgWriter``,
maintained, pure Python; the ``[capture]`` extra), not by hand.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gateway.device.tap import REQUEST, Record
from gateway.wire.zmtp.commands import encode_command, encode_properties
from gateway.wire.zmtp.framing import encode_message
from gateway.wire.zmtp.greeting import greeting_rest, signature

GATEWAY_IP = "10.0.0.1"
SEGMENT = 64_000
_U64 = struct.Struct("!Q")
#: SP protocol numbers (nanomsg's sp-*-01 RFCs as they run: 16 * major + minor)
REQ0, REP0 = 0x30, 0x31
NULL_MECHANISM = b"NULL".ljust(20, b"\x00")


def sp_frame(payload: bytes) -> bytes:
    """One SP-over-TCP message: u64 big-endian length, then the payload (``SpCodec``'s)."""
    return _U64.pack(len(payload)) + payload


def sp_header(protocol: int) -> bytes:
    from gateway.wire.sp import sp_header as header

    return header(protocol)


def zmtp_handshake(socket_type: bytes, as_server: bool) -> bytes:
    """A ZMTP 3.1 NULL peer's opening: greeting, then READY (Socket-Type, and Identity for
    the socket types libzmq sends it for)."""
    props = [(b"Socket-Type", socket_type)]
    if socket_type in (b"REQ", b"DEALER", b"ROUTER"):
        props.append((b"Identity", b""))
    return (signature(0) + greeting_rest(NULL_MECHANISM, as_server)
            + encode_command(b"READY", encode_properties(props)))


@dataclass
class Conversation:
    """One synthetic TCP connection (a pipe): addresses and each direction's next sequence."""

    client: tuple[str, int]
    server: tuple[str, int]
    family: str
    seq: dict[bool, int] = field(default_factory=lambda: {True: 1000, False: 5000})


class StreamWriter:
    """Turns records into packets, per pipe, and writes them with scapy's PcapNgWriter."""

    def __init__(self, path: str, front_port: int = 15555, back_port: int = 16000) -> None:
        from scapy.utils import PcapNgWriter

        self.writer = PcapNgWriter(path)
        self.front_port, self.back_port = front_port, back_port
        self.convs: dict[tuple[str, bytes], Conversation] = {}
        #: a request's envelope as sent to the back end -> the back pipe it went to (a reply
        #: comes back with the same envelope: that is its pipe)
        self._back_of: dict[tuple[bytes, ...], bytes] = {}
        self._last_back = b""
        self.packets = 0
        self.messages = {"front": 0, "back": 0}

    # -- packets -------------------------------------------------------------------------------
    def _packet(self, conv: Conversation, from_client: bool, flags: str, payload: bytes,
                when: float) -> None:
        from scapy.layers.inet import IP, TCP
        from scapy.layers.l2 import Ether
        from scapy.packet import Raw

        src, dst = (conv.client, conv.server) if from_client else (conv.server, conv.client)
        seq, ack = conv.seq[from_client], conv.seq[not from_client]
        pkt = (Ether() / IP(src=src[0], dst=dst[0]) /
               TCP(sport=src[1], dport=dst[1], flags=flags, seq=seq, ack=ack, window=65535))
        if payload:
            pkt = pkt / Raw(payload)
        pkt.time = when
        self.writer.write(pkt)
        self.packets += 1
        conv.seq[from_client] = seq + len(payload) + (1 if "S" in flags else 0)

    def _data(self, conv: Conversation, from_client: bool, data: bytes, when: float) -> None:
        for i in range(0, len(data), SEGMENT):
            self._packet(conv, from_client, "PA", data[i:i + SEGMENT], when)

    def _open(self, side: str, pipe: bytes, family: str, client_type: bytes,
              when: float) -> Conversation:
        key = (side, pipe)
        conv = self.convs.get(key)
        if conv is not None:
            return conv
        n = sum(1 for s, _ in self.convs if s == side) + 1
        if side == "front":
            conv = Conversation((f"10.1.{n // 250}.{n % 250 + 1}", 40000 + n % 20000),
                                (GATEWAY_IP, self.front_port), family)
        else:
            conv = Conversation((GATEWAY_IP, 50000 + n % 10000),
                                (f"10.2.{n // 250}.{n % 250 + 1}", self.back_port), family)
        self.convs[key] = conv
        self._packet(conv, True, "S", b"", when)
        self._packet(conv, False, "SA", b"", when)
        self._packet(conv, True, "A", b"", when)
        if family == "sp":
            self._data(conv, True, sp_header(REQ0), when)
            self._data(conv, False, sp_header(REP0), when)
        else:
            server_type = b"ROUTER" if side == "front" else b"REP"
            self._data(conv, True, zmtp_handshake(client_type, False), when)
            self._data(conv, False, zmtp_handshake(server_type, False), when)
        return conv

    @staticmethod
    def _wire(family: str, frames: tuple[bytes, ...]) -> bytes:
        return encode_message(frames) if family == "zmtp" else sp_frame(b"".join(frames))

    # -- records -------------------------------------------------------------------------------
    def add(self, r: Record) -> None:
        when = r.time_ns / 1e9
        if r.direction == REQUEST:
            has_delim = b"" in r.received[1:-1] if r.in_family == "zmtp" else False
            client = b"REQ" if has_delim else b"DEALER"
            front = self._open("front", r.in_pipe, r.in_family, client, when)
            self._data(front, True, self._wire(r.in_family, r.received[1:]), when)
            back = self._open("back", r.out_pipe, r.out_family, b"DEALER", when)
            self._data(back, True, self._wire(r.out_family, r.sent), when)
            self._back_of[r.sent[:-1]] = r.out_pipe
            self._last_back = r.out_pipe
            if len(self._back_of) > 100_000:  # bounded: the oldest go
                self._back_of.pop(next(iter(self._back_of)))
        else:
            pipe = self._back_of.pop(r.received[:-1], self._last_back)
            back = self._open("back", pipe, r.in_family, b"DEALER", when)
            self._data(back, False, self._wire(r.in_family, r.received), when)
            front = self._open("front", r.out_pipe, r.out_family, b"REQ", when)
            self._data(front, False, self._wire(r.out_family, r.sent[1:]), when)
        self.messages["front"] += 1
        self.messages["back"] += 1

    def add_all(self, records: Iterable[Record]) -> None:
        for r in records:
            self.add(r)

    def close(self) -> None:
        import time

        now = time.time()
        for conv in self.convs.values():  # FIN both ways: each stream ends cleanly
            self._packet(conv, True, "FA", b"", now)
            self._packet(conv, False, "FA", b"", now)
        self.writer.close()

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["REP0", "REQ0", "StreamWriter", "sp_frame", "zmtp_handshake"]
