"""``gateway.Socket``: the native engine's socket with the pyzmq-style face (``send``/``recv``,
multipart, ``subscribe``, ``setsockopt``, ``wait_peers``, ``async with``) over its core
(:class:`gateway.engine.core.SocketCore`)."""

from __future__ import annotations

import asyncio

from gateway.engine.core import SocketCore
from gateway.engine.send import Fanout
from gateway.errors import ConfigError, Drop
from gateway.message import Message
from gateway.patterns.reqrep import split_zmtp


class Socket(SocketCore):
    """A native socket over any wires: REQ, REP, DEALER, ROUTER (``raw=True``: xreq/xrep);
    PUB, SUB, XPUB, XSUB; PUSH, PULL; PAIR; PAIR1 (SP only). nng's names work too (``pub0``,
    ``sub0``, ``push0``, ``pull0``, ``pair0``, ``pair1``); on SP a PUB speaks pub0, a SUB sub0,
    a PAIR pair0, and XPUB/XSUB are raw pub0/sub0.

    Use inside a running asyncio loop::

        async with gateway.Socket("REQ", hwm=5000) as s:
            s.connect("zmq+tcp://127.0.0.1:5555")
            await s.send(b"hello")
            reply = await s.recv()

    Options (:class:`~gateway.engine.options.SocketOptions`, by name or as ``options=``) are the
    endpoint settings of the gateway (``hwm``, ``max_message_size``, ``handshake_timeout``,
    ``message_timeout``, ``reconnect_ivl``, heartbeats, ``router_handover``, TCP keepalive,
    ``allow``, ``max_connections``, CURVE/PLAIN and TLS files or ``security=``/``tls=``
    material, ...) and the engine's own (``identity``, ``relaxed``, ``resend_interval``,
    ``subscribe``, ``verbose``, ``filter``, ``max_subscriptions``, ``name``). A peer that
    breaks a limit is disconnected (``gateway_pipes_closed_total{reason}``); the socket and its
    other pipes go on.

    Publish-subscribe (``gateway.patterns.pubsub``): ``subscribe`` (a prefix or a list of them)
    subscribes a SUB/XSUB from the start, :meth:`subscribe`/:meth:`unsubscribe` later (counted);
    an XSUB also sends ``01|00 + prefix`` messages. An XPUB receives ``01|00 + prefix`` when a
    prefix gets its first subscriber or loses its last (``verbose=True``: every subscribe).
    PUB never blocks (a subscriber past ``hwm`` loses the message, counted ``hwm``); PUSH and
    PAIR wait for a writable peer; PAIR takes one peer and refuses others (``pair-busy``).
    """

    # -- pyzmq-like conveniences -------------------------------------------------------------
    async def send(self, data: bytes) -> None:
        await self.send_msg(Message((), (data,)))

    async def recv(self) -> bytes:
        """The body of the next message (frames joined; ``recv_multipart``/``recv_msg`` keep them)."""
        body = (await self.recv_msg()).body
        return body[0] if len(body) == 1 else b"".join(body)

    async def send_multipart(self, frames: list[bytes] | tuple[bytes, ...]) -> None:
        frames = tuple(frames)
        if self.pattern.cooked or not self.pattern.enveloped:
            await self.send_msg(Message((), frames))
        elif self.pattern.routed:
            hops, body = split_zmtp(frames[1:])
            await self.send_msg(Message((frames[0], *hops), body))
        else:
            await self.send_msg(Message(*split_zmtp(frames)))

    async def recv_multipart(self) -> list[bytes]:
        msg = await self.recv_msg()
        pattern = self.pattern
        return list(msg.body if pattern.cooked or not pattern.enveloped else msg.hops + msg.body)

    # -- publish-subscribe ---------------------------------------------------------------------
    def subscribe(self, topic: bytes | str) -> None:
        """Receive messages starting with ``topic`` (``b""``: all), once more (counted)."""
        self._check_open()
        sub = self.pattern.subscribe(_topic(topic))
        assert isinstance(self.sender, Fanout)
        self.sender.subscription(sub)

    def unsubscribe(self, topic: bytes | str) -> None:
        """Take one subscription to ``topic`` back; the publishers hear of it with the last.
        A prefix not held is counted and logged (``unknown-cancel``), as nothing to do."""
        self._check_open()
        try:
            sub = self.pattern.unsubscribe(_topic(topic))
        except Drop as drop:
            self._dropped(drop, "")
            return
        if sub is not None:
            assert isinstance(self.sender, Fanout)
            self.sender.subscription(sub)

    @property
    def subscriptions(self) -> tuple[bytes, ...]:
        """The prefixes a SUB/XSUB holds (each once), sorted."""
        return self.pattern.topics

    def setsockopt(self, option: str, value: bytes | str) -> None:
        """pyzmq's ``setsockopt`` for ``"subscribe"`` / ``"unsubscribe"`` (names, any case)."""
        name = option.lower()
        if name == "subscribe":
            self.subscribe(value)
        elif name == "unsubscribe":
            self.unsubscribe(value)
        else:
            raise ConfigError(f"setsockopt: unknown option {option!r} (subscribe, unsubscribe)")

    async def wait_peers(self, n: int = 1, timeout: float = 10.0) -> None:
        """Wait until ``n`` pipes are up (tests and scripts: the trio habit of 'ready first')."""
        async with asyncio.timeout(timeout):
            while len(self.routing.routes) < n:
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._pipe_waiters.append(fut)
                await fut

    async def __aenter__(self) -> Socket:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()
        await asyncio.sleep(0)



def _topic(topic: bytes | str) -> bytes:
    return topic.encode() if isinstance(topic, str) else bytes(topic)


__all__ = ["Socket"]
