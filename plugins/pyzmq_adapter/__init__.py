"""pyzmq adapter: libzmq sockets as bridge sides (family "zmtp"), in all three faces of
:mod:`gateway.adapter`, one module per face as pyzmq itself is laid out:

* :mod:`.frames`: the Message <-> frames mapping (the ZMTP rule of ``gateway.message``);
* :mod:`.options`: libzmq's options from a side's settings, security and its ZAP domain;
* :mod:`.monitor`: connected peers and failed handshakes, from libzmq's monitor events;
* :mod:`.async_face`: the asyncio face (:class:`PyzmqRawSocket`);
* :mod:`.polled`: the poller thread's face (:class:`ZmqPolled`);
* :mod:`.proxy`: libzmq's own proxy (:class:`LibzmqProxy`);
* :mod:`.zap`: the ZAP handler that asks the gateway's auth hook.

This module registers them.
"""

from __future__ import annotations

from gateway.hookspecs import hookimpl

from .async_face import PyzmqRawSocket, open_async
from .options import HONOURED, libzmq_options
from .polled import ZmqPolled, open_polled
from .proxy import LibzmqProxy, open_proxy

__all__ = ["HONOURED", "LibzmqProxy", "PyzmqRawSocket", "ZmqPolled", "gateway_register_adapters",
           "libzmq_options", "open_async", "open_polled", "open_proxy"]


@hookimpl
def gateway_register_adapters(register):  # type: ignore[no-untyped-def]
    register("pyzmq", "zmtp", open_async, polled=open_polled, proxy=open_proxy, options=HONOURED)
