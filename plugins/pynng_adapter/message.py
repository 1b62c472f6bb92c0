"""The pynng adapter's Message <-> nng_msg mapping: the header codec.

The nng message *header* is the backtrace, split into 4-byte words (outermost first), the nng
*body* is the single body frame. nng's raw rep0 builds the header as
``[pipe id (top bit clear)][hops...][request id (top bit set)]`` and raw req0 moves the whole
backtrace up to the request id into the header on receive (nng 1.11; nanomsg moves 4 bytes
only -- same wire bytes). Should a header ever stop short of the top-bit word, the adapter
keeps moving words from the body, so both conventions give the same Message. On send the hops
are joined into the header and the one body frame is the body; raw rep0 pops the pipe id from
the header to pick the pipe (unknown pipe: nng drops the message), raw req0 writes
header + body to the next ready pipe untouched. The other patterns' messages are the body
only, but pair1's hop count, when nng leaves it in the header.
"""

from __future__ import annotations

from typing import Any

import pynng
from pynng import ffi, lib

from gateway.message import Message

#: the raw (req/rep) kinds, whose header is the backtrace
RAW = frozenset({"REP", "REQ"})
_new = tuple.__new__


def to_message(hdr: bytes, body: bytes) -> Message:
    n = len(hdr)
    if n == 8:  # the common case: one hop (pipe id or token) + request id
        hops: tuple[bytes, ...] = (hdr[:4], hdr[4:])
    elif n == 4:
        hops = (hdr,)
    else:
        hops = tuple(hdr[i : i + 4] for i in range(0, n, 4))
    if not hops or not hops[-1][0] & 0x80:
        # nanomsg-style: only part of the backtrace in the header; keep moving words
        extra = []
        while len(body) >= 4:
            word, body = body[:4], body[4:]
            extra.append(word)
            if word[0] & 0x80:
                break
        hops += tuple(extra)
    return _new(Message, (hops, (body,)))


def build(msg_p: Any, hops: tuple[bytes, ...], body: bytes) -> Any:
    """An nng_msg with ``hops`` as its header and ``body`` as its body (the caller owns it)."""
    rv = lib.nng_msg_alloc(msg_p, 0)
    if rv:
        raise MemoryError(strerror(rv))
    m = msg_p[0]
    hdr = b"".join(hops)
    if lib.nng_msg_header_append(m, hdr, len(hdr)) or lib.nng_msg_append(m, body, len(body)):
        lib.nng_msg_free(m)
        raise MemoryError("nng_msg_append failed")
    return m


def take(m: Any) -> Message:
    """The Message of a received nng_msg, which is freed."""
    try:
        return to_message(ffi.buffer(lib.nng_msg_header(m), lib.nng_msg_header_len(m))[:],
                           ffi.buffer(lib.nng_msg_body(m), lib.nng_msg_len(m))[:])
    finally:
        lib.nng_msg_free(m)


def take_plain(m: Any) -> Message:
    """A pub/sub, pipeline or pair0 message: the body only."""
    try:
        return _new(Message, ((), (ffi.buffer(lib.nng_msg_body(m), lib.nng_msg_len(m))[:],)))
    finally:
        lib.nng_msg_free(m)


def take_pair1(m: Any) -> Message:
    """A pair1 message: its hop-count word (when nng left it in the header) is the one hop."""
    try:
        hdr = ffi.buffer(lib.nng_msg_header(m), lib.nng_msg_header_len(m))[:]
        return _new(Message, ((hdr,) if hdr else (), (ffi.buffer(lib.nng_msg_body(m),
                                                                 lib.nng_msg_len(m))[:],)))
    finally:
        lib.nng_msg_free(m)


TAKERS = {"REP": take, "REQ": take, "PAIR1": take_pair1}


def recv_raw(sock: Any) -> Message:
    """One message from a raw pynng socket (``Req0``/``Rep0`` opened raw), its header words as
    hops (the one nng header codec: :func:`to_message`); blocks up to the socket's
    ``recv_timeout`` and raises what pynng raises (``pynng.Timeout``, ``pynng.Closed``)."""
    msg_p = ffi.new("nng_msg **")
    rv = lib.nng_recvmsg(sock.socket, msg_p, 0)
    if rv:
        pynng.exceptions.check_err(rv)
    return take(msg_p[0])


def send_raw(sock: Any, hops: tuple[bytes, ...], body: bytes) -> None:
    """Send ``hops`` (the header, on the wire as is) and ``body`` on a raw pynng socket."""
    msg_p = ffi.new("nng_msg **")
    m = build(msg_p, hops, body)
    rv = lib.nng_sendmsg(sock.socket, m, 0)
    if rv:
        lib.nng_msg_free(m)
        pynng.exceptions.check_err(rv)


def outgoing(kind: str, hops: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """The header a send carries: the backtrace for req/rep, nothing for the cooked faces
    (nng's cooked pair1 writes its own hop count; a header on the others would reach the wire)."""
    return hops if kind in RAW else ()


def strerror(rv: int) -> str:
    return ffi.string(lib.nng_strerror(rv)).decode(errors="replace")


__all__ = ["RAW", "TAKERS", "build", "outgoing", "recv_raw", "send_raw", "strerror", "take",
           "take_pair1", "take_plain", "to_message"]
