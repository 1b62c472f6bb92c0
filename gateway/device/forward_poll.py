"""Forwarding on one thread over the libraries' own poller, for bridges whose two sides are
library sockets with a polled face (:class:`gateway.adapter.PolledSocket`).

One thread owns both sockets (zmq sockets are not thread-safe, so both directions must live on
one thread) and waits in ``zmq.Poller`` on the sides' ``pollable`` (a zmq socket, or nng's
``recv-fd``). Each wake-up drains up to ``BATCH`` messages per side with non-blocking
receives, translates them and sends them on. No asyncio and no handoff per message.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import zmq

from gateway.device.ledger import REPLY, REQUEST, Ledger
from gateway.envelope import Translator
from gateway.errors import GatewayError

BATCH = 256
_perf = time.perf_counter
_clock = time.monotonic


class PollForwarder:
    def __init__(self, front: Any, back: Any, translator: Translator, ledger: Ledger) -> None:
        self.front, self.back = front, back
        self.translator, self.ledger = translator, ledger
        self._halt = threading.Event()
        self._draining = threading.Event()
        self._task: asyncio.Future[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(asyncio.to_thread(self._loop))

    async def failed(self) -> None:
        assert self._task is not None
        await asyncio.shield(self._task)

    def stop_requests(self) -> None:
        self._draining.set()

    async def drain(self, grace: float) -> None:
        deadline = _clock() + grace
        while (self.ledger.in_flight and self._task is not None and not self._task.done()
               and _clock() < deadline):
            await asyncio.sleep(0.02)

    def backlog(self) -> int:
        return 0  # the libraries keep what was not read; nothing was taken from them

    async def close(self) -> None:
        self._halt.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    def _loop(self) -> None:
        """Forward both ways until halted; once draining, only replies cross."""
        front, back, halt, draining = self.front, self.back, self._halt, self._draining
        request, reply = self.translator.request, self.translator.reply
        ledger, expire = self.ledger, self.translator.expire
        poller = zmq.Poller()
        poller.register(front.pollable, zmq.POLLIN)
        poller.register(back.pollable, zmq.POLLIN)
        next_expiry = _clock() + 1.0
        while not halt.is_set():
            ready = dict(poller.poll(100))
            now = _clock()
            if front.pollable in ready and not draining.is_set():
                n = 0
                # a send may wait up to its timeout on a stalled backend: look at the flags
                while (n < BATCH and not draining.is_set() and not halt.is_set()
                       and (msg := front.recv_nowait()) is not None):
                    n += 1
                    t0 = _perf()
                    try:
                        back.send(request(msg, now))
                    except GatewayError as exc:
                        ledger.refused(exc, REQUEST)
                        continue
                    ledger.request_forwarded(t0)
            if back.pollable in ready:
                n = 0
                while n < BATCH and (msg := back.recv_nowait()) is not None:
                    n += 1
                    t0 = _perf()
                    try:
                        front.send(reply(msg, now))
                    except GatewayError as exc:
                        ledger.refused(exc, REPLY)
                        continue
                    ledger.reply_forwarded(t0)
            if now >= next_expiry:
                next_expiry = now + 1.0
                ledger.expired(expire(now))
