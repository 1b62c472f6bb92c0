"""libzmq's own forwarder as a bridge (:class:`LibzmqProxy`): ``zmq_proxy_steerable`` between
two polled faces with blocking sends, for ``forwarder="proxy"`` (zmq -> zmq)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import zmq

from gateway.adapter import SideOptions

from .polled import ZmqPolled


class LibzmqProxy:
    """zmq -> zmq by libzmq itself: ``zmq_proxy_steerable`` between a ROUTER and a DEALER on a
    context of their own, with a control socket for STATISTICS and TERMINATE.

    The sends block (back-pressure, as zmq_proxy expects: it ends on its first failed send), so
    a reply to a departed client is dropped by libzmq uncounted (ROUTER_MANDATORY off).
    """

    def __init__(self, front: SideOptions, back: SideOptions) -> None:
        self.ctx: Any = zmq.Context()  # its own: terminating it ends only this proxy
        unbounded = replace(front, router_mandatory=False)
        self.front = ZmqPolled("REP", unbounded, context=self.ctx)  # blocking sends (libzmq's
        self.back = ZmqPolled("REQ", back, context=self.ctx)  # own proxy sends, not ours)
        address = f"inproc://gateway-proxy-control-{id(self)}"
        self._control = self.ctx.socket(zmq.REP)  # used by the proxy thread only
        self._control.bind(address)
        self._client = self.ctx.socket(zmq.REQ)  # used by the caller's thread only
        self._client.rcvtimeo = self._client.sndtimeo = 1000
        self._client.linger = 0
        self._client.setsockopt(zmq.REQ_RELAXED, 1)  # a timed-out STATISTICS may be re-asked
        self._client.setsockopt(zmq.REQ_CORRELATE, 1)
        self._client.connect(address)
        self._ran = False

    def run(self) -> None:
        """Blocks (without the GIL) until TERMINATE, or until :meth:`terminate` ends the
        context while the proxy waits in a send to a stalled backend. The proxy thread owns
        the sockets and closes them."""
        self._ran = True
        try:
            zmq.proxy_steerable(self.front.sock, self.back.sock, None, self._control)
        except zmq.ContextTerminated:
            pass
        finally:
            for sock in (self._control, self.front.sock, self.back.sock):
                sock.close(0)

    def statistics(self) -> tuple[int, int] | None:
        """Frames in on the front and out on the front; None while the proxy is blocked."""
        try:
            self._client.send(b"STATISTICS")
            raw = self._client.recv_multipart()
        except zmq.Again:
            return None
        counts = [int.from_bytes(part, "little") for part in raw[0::2]]  # frames, not bytes
        return counts[0], counts[1]

    def terminate(self) -> bool:
        """TERMINATE; if the proxy cannot hear it (blocked in a send), end its context."""
        try:
            self._client.send(b"TERMINATE")
            self._client.recv()
        except zmq.Again:
            stalled = True
        else:
            stalled = False
        self._client.close(0)
        self.front.unwatch()
        self.back.unwatch()
        self.ctx.term()  # returns once the proxy thread has closed its sockets
        return stalled

    def close(self) -> None:
        if not self._ran:  # never started: the sockets are still ours
            self.front.close()
            self.back.close()
            for sock in (self._control, self._client):
                sock.close(0)
            self.ctx.term()


def open_proxy(front: SideOptions, back: SideOptions) -> LibzmqProxy:
    return LibzmqProxy(front, back)


__all__ = ["LibzmqProxy", "open_proxy"]
