"""Forwarding on the asyncio loop: two loops over the raw-socket interface, and, with the
native engine on both sides, forwarding inside the receiving pipe's callback.

The callback path (the engine's ``Socket.sink``): parse, translate and write in one loop
wake-up per message. A request that cannot go out at once (no writable backend pipe) takes the
request loop instead, and later ones follow it there until it caught up, so a client's
requests stay in order.

Requests in flight on the back end are tracked (:class:`LossTracker`): with the native engine
there, a pipe that closes has its requests counted as ``backend-lost`` at once; a library back
end has them counted when its last peer leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
from functools import partial
from typing import Any

from gateway.device.inflight import LossTracker
from gateway.device.ledger import REPLY, REQUEST, Ledger, client_of
from gateway.device.ledger import clock as _clock
from gateway.device.sides import NativeRaw, peers_of
from gateway.envelope import Translator, same_family
from gateway.errors import GatewayError
from gateway.message import Message


async def _forever() -> None:
    """A direction the pattern does not use: wait until cancelled."""
    await asyncio.get_running_loop().create_future()


class AsyncForwarder:
    """Both directions on the running loop; the callback path when both sides are native."""

    def __init__(self, front: Any, back: Any, translator: Translator, ledger: Ledger) -> None:
        self.front, self.back = front, back
        self.translator, self.ledger = translator, ledger
        ledger.pairs_replies = translator.pairs_replies  # in flight: request-reply only
        self.draining = False
        self._detour = False  # the request loop holds requests: the callback path waits
        self._tasks: list[asyncio.Task[None]] = []
        per_pipe = isinstance(back, NativeRaw)
        self.loss = LossTracker(translator, ledger, partial(peers_of, back))
        if per_pipe:
            back.socket.on_pipe_lost = self.loss.pipe_lost

    def _refused_request(self, exc: GatewayError, msg: Message, out: Message | None) -> None:
        if out is not None:  # translated, then refused by the back end: no token stays behind
            self.translator.forget([out[0]])
        self.ledger.refused(exc, REQUEST, client_of(msg))

    # -- the loops ---------------------------------------------------------------------------
    async def _requests(self) -> None:
        recv, send = self.front.recv_msg, self.back.send_msg
        request, ledger = self.translator.request, self.ledger
        for first in self.translator.initial():  # pub/sub: the standing subscriptions
            await send(first)
        if not self.translator.up:  # nothing comes from the front (an SP pub0 front)
            await _forever()
        while True:
            msg = await recv()
            t0 = now = _clock()
            out = None
            try:
                out = request(msg, now)
                if out is None:  # a subscription that changes nothing upstream
                    continue
                pipe = await send(out)
            except GatewayError as exc:
                self._refused_request(exc, msg, out)
                continue
            self.loss.sent(out, pipe, now)
            if self._detour and not self.backlog():
                self._detour = False  # caught up: the callback path may forward again
            ledger.request_forwarded(t0)

    async def _replies(self) -> None:
        recv, send = self.back.recv_msg, self.front.send_msg
        reply, ledger, answered = self.translator.reply, self.ledger, self.loss.answered
        if not self.translator.down:  # pipeline: the back end (PUSH) never receives
            await _forever()
        while True:
            msg = await recv()
            t0 = _clock()
            answered(msg[0])
            out = None
            try:
                out = reply(msg, t0)
                await send(out)
            except GatewayError as exc:
                ledger.refused(exc, REPLY, client_of(out))
                continue
            ledger.reply_forwarded(t0)

    # -- the callback path -------------------------------------------------------------------
    def _install_sinks(self) -> None:
        front, back = self.front.socket, self.back.socket
        request, reply, ledger = self.translator.request, self.translator.reply, self.ledger
        forget, evicted = self.translator.forget, self.loss.evicted
        # request-reply: the loss tracker is on; its table directly (two calls less a message)
        sent, answered = self.loss.inflight.sent, self.loss.inflight.answered
        # the raw sockets' own send, specialised once (None: a pattern with state of its own)
        to_back = back.raw_sender() or back.try_send
        to_front = front.raw_sender() or front.try_send

        same = request is same_family  # the request goes on untouched: no call for that

        def forward_request(msg: Message) -> bool:
            if self.draining or self._detour:
                self._detour = not self.draining
                return False  # to the inbox: the request loop (or the drain count) takes it
            t0 = now = _clock()
            out = None
            try:
                out = msg if same else request(msg, now)
                assert out is not None  # request-reply only: every request goes on
                pipe = to_back(out)
            except GatewayError as exc:
                self._refused_request(exc, msg, out)
                return True
            if pipe is None:  # no writable back-end pipe: the request loop waits for one
                forget([out[0]])  # (and translates again: a token minted here goes)
                self._detour = True
                return False
            gone = sent(out[0], pipe, now)
            if gone:  # pushed out of the full table
                evicted(gone)
            ledger.request_forwarded(t0)
            return True

        def forward_reply(msg: Message) -> bool:
            t0 = _clock()
            answered(msg[0])
            out = None
            try:
                out = reply(msg, t0)
                to_front(out)
            except GatewayError as exc:
                ledger.refused(exc, REPLY, client_of(out))
                return True
            ledger.reply_forwarded(t0)
            return True

        front.sink, back.sink = forward_request, forward_reply

    # -- the Forwarder interface -------------------------------------------------------------
    def backlog(self) -> int:
        """Requests received and not forwarded (counted as ``shutdown`` if the stop finds them)."""
        return self.front.backlog if isinstance(self.front, NativeRaw) else 0

    async def _expire(self, every: float) -> None:
        translator, ledger, loss = self.translator, self.ledger, self.loss
        while True:
            await asyncio.sleep(every)
            now = _clock()
            ledger.expired(translator.expire(now))
            loss.expire(now)
            ledger.flush()

    def start(self) -> None:
        if (isinstance(self.front, NativeRaw) and isinstance(self.back, NativeRaw)
                and self.translator.pattern == "reqrep"):
            self._install_sinks()
        loop = asyncio.get_running_loop()
        if hasattr(self.back, "on_peer_lost"):  # a library back end, from its own thread

            def peer_lost() -> None:
                with contextlib.suppress(RuntimeError):  # the loop is gone: nothing to count
                    loop.call_soon_threadsafe(self.loss.peer_left)

            self.back.on_peer_lost = peer_lost
        every = min(1.0, self.translator.table.ttl / 4)
        self._tasks = [loop.create_task(self._requests()), loop.create_task(self._replies()),
                       loop.create_task(self._expire(every))]

    async def failed(self) -> None:
        """Returns only when a loop died (raising its error); runs until cancelled otherwise."""
        done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()

    def stop_requests(self) -> None:
        self.draining = True
        self._tasks[0].cancel()

    async def drain(self, grace: float) -> None:
        deadline = _clock() + grace
        while self.ledger.in_flight and not self._tasks[1].done() and _clock() < deadline:
            await asyncio.sleep(0.02)

    async def close(self) -> None:
        if hasattr(self.back, "on_peer_lost"):
            self.back.on_peer_lost = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
