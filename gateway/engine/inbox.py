"""A socket's receiving side: pipe -> pattern -> the observer (a device's
:class:`~gateway.engine.hooks.SocketHooks`), a waiting ``recv_msg``, or the bounded inbox.

Each pipe may have at most ``hwm`` messages in the inbox (then its reading is paused: TCP
back-pressure reaches the peer, see :class:`gateway.engine.reading.Reading`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from gateway.engine.hooks import SocketHooks
from gateway.engine.pipe import Pipe
from gateway.engine.timer import PatternTimer
from gateway.errors import Drop
from gateway.message import Message
from gateway.patterns.reqrep import Pattern
from gateway.wire.events import Subscription


class Inbox:
    """The receiving half of :class:`~gateway.engine.core.SocketCore` (a mixin: the hot path
    pays no extra attribute lookup). The socket sets the attributes declared here."""

    pattern: Pattern
    timer: PatternTimer
    hooks: SocketHooks
    #: messages received and not yet taken, in order (the compiled kernel forwards only while
    #: it is empty: what waits goes first)
    inbox: deque[tuple[Pipe, Message]]
    _recv_waiter: asyncio.Future[tuple[Pipe, Message]] | None
    _take: Callable[[Message], bool]  # the observer's (False: not taken)

    def _dropped(self, drop: Drop, endpoint: str) -> None:
        raise NotImplementedError

    def _check_open(self) -> None:
        raise NotImplementedError

    def pipe_messages(self, pipe: Pipe, batch: list[tuple[bytes, ...]]) -> None:
        receive = self.pattern.receive
        rid, family = pipe.routing_id, pipe.family
        inbox, take = self.inbox, self._take
        for parts in batch:
            if pipe.close_reason:  # closed by what came before: the rest goes with it
                return
            try:
                msg = receive(rid, family, parts)
            except Drop as drop:
                self._dropped(drop, pipe.endpoint)
                continue
            if msg is None:
                continue
            if not inbox and take(msg):  # (_deliver, inline: once per message)
                continue
            waiter = self._recv_waiter
            if waiter is not None and not waiter.done():
                self._recv_waiter = None
                waiter.set_result((pipe, msg))
                continue
            inbox.append((pipe, msg))
            pipe.enqueued()

    def pipe_subscription(self, pipe: Pipe, event: Subscription) -> None:
        try:
            msg = self.pattern.subscription(pipe.routing_id, event)
        except Drop as drop:
            self._dropped(drop, pipe.endpoint)
            return
        if msg is not None:
            self._deliver(pipe, msg)
        self.hooks.peers_changed()

    def _deliver(self, pipe: Any, msg: Message) -> None:
        if not self.inbox and self._take(msg):
            return
        waiter = self._recv_waiter
        if waiter is not None and not waiter.done():
            self._recv_waiter = None
            waiter.set_result((pipe, msg))
            return
        self.inbox.append((pipe, msg))
        pipe.enqueued()

    # -- message API -----------------------------------------------------------------------
    async def recv_msg(self) -> Message:
        """Receive one message: cooked sockets give ``Message((), body)``, raw ones the hops too."""
        pattern = self.pattern
        while True:
            self._check_open()
            pattern.check_recv()
            if self.inbox:
                pipe, msg = self.inbox.popleft()
                pipe.dequeued()
            else:
                waiter = self._recv_waiter = asyncio.get_running_loop().create_future()
                try:
                    pipe, msg = await waiter
                except asyncio.CancelledError:
                    if waiter.done() and not waiter.cancelled():
                        self.inbox.appendleft(waiter.result())  # nothing is lost on a timeout
                        waiter.result()[0].enqueued()
                    raise
                finally:
                    if self._recv_waiter is waiter:
                        self._recv_waiter = None
            delivered = pattern.deliver(msg)
            if delivered is not None:
                if self.timer.handle is not None:
                    self.timer.schedule()
                return delivered

    @property
    def inbox_size(self) -> int:
        """How many received messages wait in the inbox (bounded: ``hwm`` per pipe)."""
        return len(self.inbox)


__all__ = ["Inbox"]
