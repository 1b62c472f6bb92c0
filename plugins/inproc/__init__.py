"""In-process transport: ``inproc://name``. Bytes still go through the wire codecs, so an
inproc pipe behaves exactly like a TCP one; delivery is a ``call_soon`` on the same loop."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from gateway.hookspecs import hookimpl
from gateway.transport import PipeProtocol, ProtocolFactory

_LISTENERS: dict[str, InprocListener] = {}


class InprocPipeTransport(asyncio.Transport):
    """One end of an in-memory byte stream (a minimal ``asyncio.Transport``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: PipeProtocol, name: str) -> None:
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self._peer: InprocPipeTransport | None = None
        self._paused = False
        self._held: deque[bytes] = deque()
        self._closing = False
        self._extra = {"peername": f"inproc://{name}"}
        # write-side flow control, as a socket transport has: bytes we wrote that the peer's
        # protocol has not taken yet (in flight, or held while the peer's reading is paused)
        self._unread = 0
        self._high = 64 * 1024
        self._low = 16 * 1024
        self._writing_paused = False

    # called by the peer: deliver incoming bytes to our protocol
    def _feed(self, data: bytes) -> None:
        if self._closing:
            return
        if self._paused:
            self._held.append(data)
        else:
            self._deliver(data)

    def _deliver(self, data: bytes) -> None:
        peer = self._peer
        if peer is not None:
            peer._taken(len(data))
        self._protocol.data_received(data)

    # called by the peer: its protocol took ``n`` of the bytes we wrote
    def _taken(self, n: int) -> None:
        self._unread -= n
        if self._writing_paused and self._unread <= self._low:
            self._writing_paused = False
            self._protocol.resume_writing()

    def write(self, data: Any) -> None:
        peer = self._peer
        if self._closing or peer is None:
            return
        data = bytes(data)
        self._unread += len(data)
        self._loop.call_soon(peer._feed, data)
        if not self._writing_paused and self._unread > self._high:
            self._writing_paused = True
            self._protocol.pause_writing()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._loop.call_soon(self._protocol.connection_lost, None)
        peer = self._peer
        if peer is not None:
            self._loop.call_soon(peer.close)

    def abort(self) -> None:
        self.close()

    def pause_reading(self) -> None:
        self._paused = True

    def resume_reading(self) -> None:
        self._paused = False
        while self._held and not self._paused:
            self._deliver(self._held.popleft())

    def is_reading(self) -> bool:
        return not self._paused

    def get_write_buffer_size(self) -> int:
        return self._unread

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        """As asyncio's: the protocol pauses at once when we hold more than ``high``."""
        self._high = 64 * 1024 if high is None else high
        self._low = self._high // 4 if low is None else low
        if not self._writing_paused and self._unread > self._high:
            self._writing_paused = True
            self._protocol.pause_writing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)


class InprocListener:
    def __init__(self, name: str, protocol_factory: ProtocolFactory) -> None:
        self.address = name
        self.protocol_factory = protocol_factory

    def close(self) -> None:
        if _LISTENERS.get(self.address) is self:
            del _LISTENERS[self.address]


class InprocTransport:
    scheme = "inproc"

    def listen(self, address: str, protocol_factory: ProtocolFactory, *,
               backlog: int | None = None) -> InprocListener:  # no queue: backlog ignored
        if address in _LISTENERS:
            raise OSError(98, f"inproc://{address} is already bound")
        listener = _LISTENERS[address] = InprocListener(address, protocol_factory)
        return listener

    async def dial(self, address: str, protocol_factory: ProtocolFactory) -> None:
        listener = _LISTENERS.get(address)
        if listener is None:
            raise ConnectionRefusedError(111, f"nothing bound at inproc://{address}")
        loop = asyncio.get_running_loop()
        ours, theirs = protocol_factory(), listener.protocol_factory()
        a = InprocPipeTransport(loop, ours, address)
        b = InprocPipeTransport(loop, theirs, address)
        a._peer, b._peer = b, a
        theirs.connection_made(b)
        ours.connection_made(a)


@hookimpl
def gateway_register_transports(register) -> None:  # type: ignore[no-untyped-def]
    register("inproc", InprocTransport())
