"""The polled face of the pynng adapter (:class:`NngPolled`): nng's sockets through its C API,
driven by the device's poller thread and never blocking (:class:`gateway.adapter.PolledSocket`)."""

from __future__ import annotations

from typing import Any

from pynng import ffi, lib

from gateway.adapter import SideOptions
from gateway.errors import LocalProtocolError, TransportError
from gateway.message import Message

from .message import build, outgoing, strerror
from .sockets import (
    RECEIVES,
    SENDS,
    NngFace,
    lib_listen,
    open_socket,
    reconnect_options,
    set_ttl,
    subscribe,
)
from .tls import use_tls

_NONBLOCK = lib.NNG_FLAG_NONBLOCK
_EAGAIN = lib.NNG_EAGAIN


class NngPolled(NngFace):
    """The polled face: nng raw rep0 (front) or raw req0 (back) through nng's C API, never
    blocking; nng's ``recv-fd`` and ``send-fd`` are what the poller waits on."""

    name = ""

    def __init__(self, kind: str, options: SideOptions) -> None:
        k, self._pynng = open_socket(kind, True, options.max_message_size,
                                     send_buffer_size=min(options.hwm, 8192),
                                     tcp_keepalive=options.tcp_keepalive,
                                     recv_buffer_size=min(options.hwm, 8192),
                                     **reconnect_options((options.reconnect_ivl,
                                                          options.reconnect_ivl_max)))
        set_ttl(self._pynng, options.hop_limit if k == "REP" else None)
        self._adopt(k, self._pynng)
        if k == "REQ":
            # replies queue in nng (NNG_OPT_RECVBUF), not one at a time: with nng's default of
            # 1 the pipe reads the next reply only after the poller took the last one (a hop
            # through nng's threads each), so the poller got a reply or two per wake-up while
            # requests went out in batches, and the replies piled up in TCP. Not on the front:
            # there a deep nng queue would be one first-come queue of every client's requests
            self._pynng.recv_buffer_size = min(options.hwm, 8192)
        self._tls = options.tls
        self.sock = self._pynng.socket
        # None where nng has no such fd (pub0 and push0 never receive; sub0 and pull0 never
        # send, and a sub0's (un)subscribe never waits)
        self.pollable = self._pynng.recv_fd if self.kind in RECEIVES else None
        self.out_pollable: tuple[Any, int] | None = (
            (self._pynng.send_fd, 1) if self.kind in SENDS else None)  # zmq.POLLIN on the fd
        self._msgp = ffi.new("nng_msg **")

    def bind(self, url: str) -> str:
        use_tls(self._pynng, self._tls, url, server=True)
        return lib_listen(self._pynng, url)

    def connect(self, url: str) -> None:
        use_tls(self._pynng, self._tls, url, server=False)
        self._pynng.dial(url, block=False)

    def recv_nowait(self) -> Message | None:
        rv = lib.nng_recvmsg(self.sock, self._msgp, _NONBLOCK)
        if rv:
            if rv == _EAGAIN:
                return None
            raise TransportError(strerror(rv))
        return self._takes(self._msgp[0])

    def send_nowait(self, msg: Message) -> bool:
        hops, body = msg
        if len(body) != 1:
            raise LocalProtocolError(f"SP carries exactly one body frame, not {len(body)}")
        if self.kind == "XSUB":
            subscribe(self._pynng, body[0])
            return True
        if self._live is not None:
            self._live.check(hops)
        m = build(self._msgp, outgoing(self.kind, hops), body[0])
        rv = lib.nng_sendmsg(self.sock, m, _NONBLOCK)
        if rv == 0:
            return True
        lib.nng_msg_free(m)
        if rv == _EAGAIN:
            return False
        raise TransportError(strerror(rv))

    def close(self) -> None:
        self._pynng.close()


def open_polled(kind: str, options: SideOptions) -> NngPolled:
    return NngPolled(kind, options)


__all__ = ["NngPolled", "open_polled"]
