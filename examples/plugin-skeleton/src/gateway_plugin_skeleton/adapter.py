"""A third-party adapter in one module: ``?backend=skeleton`` on a ``zmq+`` endpoint.

An adapter gives the gateway another implementation of a bridge side (``gateway/adapter.py``
is the whole contract). This one is small on purpose: the native engine's raw socket, seen
through the adapter interface, counting what crosses it -- the shape a real adapter (a
library binding, a hardware offload, a recording tap) fills in::

    gateway bridge '@zmq+tcp://127.0.0.1:5555?backend=skeleton' '>sp+tcp://127.0.0.1:6000'

It registers only the asyncio face; a bridge with it on a side runs on the asyncio forwarder
and gets the same accounting (forwarded, dropped by reason, hop latency) as every route.
"""

from __future__ import annotations

from typing import Any

import gateway
from gateway.adapter import SideOptions
from gateway.message import Message

__all__ = ["CountingSocket", "gateway_register_adapters"]


class CountingSocket:
    """A raw ZMTP socket (``kind`` "REP": ROUTER-like front, "REQ": DEALER-like back)."""

    # what the forwarders read of every face (gateway.adapter): no callbacks of its own, every
    # send it takes is delivered, it holds no backlog of its own, it does not watch its peers
    callbacks = False
    confirms_delivery = True
    backlog = 0
    on_peer_lost = None

    def __init__(self, kind: str, options: SideOptions) -> None:
        self._sock = gateway.Socket(kind, raw=True, hwm=options.hwm, hop_limit=options.hop_limit,
                                    max_message_size=options.max_message_size,
                                    router_mandatory=options.router_mandatory,
                                    name=f"skeleton-{kind.lower()}")
        self.received = 0
        self.sent = 0

    # adapters are handed the library's URL spelling ("tcp://host:port")
    def bind(self, url: str) -> str:
        return self._sock.bind(f"zmq+{url}")

    def connect(self, url: str) -> None:
        self._sock.connect(f"zmq+{url}")

    async def recv_msg(self) -> Message:
        msg = await self._sock.recv_msg()
        self.received += 1
        return msg

    async def send_msg(self, msg: Message) -> None:
        await self._sock.send_msg(msg)
        self.sent += 1

    @property
    def peers(self) -> int:
        return self._sock.peers

    def close(self, linger: float = 0.5) -> None:
        self._sock.close(linger)


def open_async(kind: str, options: SideOptions) -> CountingSocket:
    return CountingSocket(kind, options)


@gateway.hookimpl
def gateway_register_adapters(register: Any) -> None:
    register("skeleton", "zmtp", open_async)
