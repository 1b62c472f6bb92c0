"""pynng adapter: nng's sockets as bridge sides (family "sp"): raw rep0 / raw req0 (xrep / xreq)
for request-reply, nng's cooked sockets for the other patterns, in the asyncio face and the
polled face of :mod:`gateway.adapter`, one module per face:

* :mod:`.message`: the Message <-> nng_msg mapping (the one nng header codec, which the
  tools' raw nng peers use too: ``recv_raw``, ``send_raw``);
* :mod:`.sockets`: which nng socket serves a side, its options, listening, connected pipes;
* :mod:`.tls`: nng's TLS from a side's ``tls_*`` settings;
* :mod:`.async_face`: the asyncio face (:class:`PynngRawSocket`);
* :mod:`.polled`: the poller thread's face (:class:`NngPolled`).

nng's raw rep0 gives every pipe a 64-message send queue and *drops* a reply when it is full
(``nni_msgq_tryput`` in xrep.c), silently and without any counter we could read: a client that
pipelines far more than 64 requests without reading replies loses some (both faces declare it:
``confirms_delivery = False``).

This module registers them.
"""

from __future__ import annotations

from gateway.hookspecs import hookimpl

from .async_face import PynngRawSocket, open_async
from .message import recv_raw, send_raw, to_message
from .polled import NngPolled, open_polled
from .sockets import HONOURED

__all__ = ["HONOURED", "NngPolled", "PynngRawSocket", "gateway_register_adapters", "open_async",
           "open_polled", "recv_raw", "send_raw", "to_message"]


@hookimpl
def gateway_register_adapters(register):  # type: ignore[no-untyped-def]
    register("pynng", "sp", open_async, polled=open_polled, options=HONOURED)
