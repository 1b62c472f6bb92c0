"""The polled face of the pyzmq adapter (:class:`ZmqPolled`): a plain libzmq socket the
device's poller thread drives, never blocking (:class:`gateway.adapter.PolledSocket`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import zmq

from gateway.adapter import SideOptions
from gateway.errors import ConfigError, PeerBusy
from gateway.message import Message

from .frames import KINDS, ZMQ_TYPE, lib_bind, send_error, splitter
from .monitor import PeerWatch
from .options import libzmq_options, pattern_options, start_zap

_NOBLOCK = zmq.NOBLOCK
_Again = zmq.Again


class ZmqPolled:
    """The polled face: a plain libzmq ROUTER (front) or DEALER (back), never blocking.

    :class:`~.proxy.LibzmqProxy` hands ``sock`` to libzmq's proxy instead, which sends
    blocking (zmq_proxy expects that: back-pressure instead of a failed send).
    """

    callbacks = False
    backlog = 0

    def __init__(self, kind: str, options: SideOptions, *, context: Any = None) -> None:
        k = KINDS.get(kind.upper())
        if k is None:
            raise ConfigError(f"pyzmq adapter: no raw socket of kind {kind!r}")
        self.router = k == "ROUTER"
        ctx = context if context is not None else zmq.Context.instance()
        sock: Any = ctx.socket(ZMQ_TYPE[k])
        sock.setsockopt(zmq.SNDHWM, options.hwm)
        sock.setsockopt(zmq.RCVHWM, options.hwm)
        opts = libzmq_options(kind.upper(), options)
        start_zap(ctx, opts)
        for opt, value in opts.items():
            sock.setsockopt(opt, value)
        self.sock = sock
        self.pollable: Any = sock
        self.out_pollable: tuple[Any, int] = (sock, zmq.POLLOUT)
        # created here, before the poller thread owns the socket
        self._watch = PeerWatch(sock, f"pyzmq-{k.lower()}")
        pattern_options(sock, k)
        self._split = splitter(k)
        self.confirms_delivery = k != "XPUB"  # see PyzmqRawSocket

    @property
    def name(self) -> str:
        """The socket's name in log lines and counters (a bridge sets ``bridge/side``)."""
        return self._watch.name

    @name.setter
    def name(self, value: str) -> None:
        self._watch.name = value

    def bind(self, url: str) -> str:
        return lib_bind(self.sock, url)

    def connect(self, url: str) -> None:
        self.sock.connect(url)

    def recv_nowait(self) -> Message | None:
        try:
            return self._split(self.sock.recv_multipart(_NOBLOCK))
        except _Again:
            return None

    def send_nowait(self, msg: Message) -> bool:
        """False when a DEALER has no peer with room; a ROUTER's full peer is :class:`PeerBusy`
        (ROUTER_MANDATORY: libzmq says so instead of dropping), an unknown one :class:`PeerGone`."""
        try:
            self.sock.send_multipart(msg[0] + msg[1], _NOBLOCK)
        except _Again:
            if self.router:
                raise PeerBusy("peer at its high-water mark") from None
            return False
        except zmq.ZMQError as exc:
            raise send_error(exc) from exc
        return True

    @property
    def peers(self) -> int:
        return self._watch.peers

    @property
    def on_peer_lost(self) -> Callable[[], None] | None:
        return self._watch.on_lost

    @on_peer_lost.setter
    def on_peer_lost(self, callback: Callable[[], None] | None) -> None:
        self._watch.on_lost = callback

    def unwatch(self) -> None:
        self._watch.close()

    def close(self) -> None:
        self._watch.close()
        self.sock.close()


def open_polled(kind: str, options: SideOptions) -> ZmqPolled:
    return ZmqPolled(kind, options)


__all__ = ["ZmqPolled", "open_polled"]
