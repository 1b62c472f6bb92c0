"""Forwarding on one thread over the libraries' own poller, for bridges whose two sides are
library sockets with a polled face (:class:`gateway.adapter.PolledSocket`).

One thread owns both sockets (zmq sockets are not thread-safe, so both directions live on one
thread) and waits in the sides' poller on their pollables. It drives the same steps as every
forwarder (:mod:`gateway.device.step`) and never blocks on a peer:

* every send is non-blocking. A reply a client cannot take (its pipe is full, or it left) is
  dropped and counted at once, as libzmq's ROUTER does, so one slow client never holds the
  others' replies; a request the back end cannot take yet waits, untranslated, in a bounded
  queue (``hwm``);
* while that queue is full the front is not read: back-pressure reaches the clients through
  the libraries' own queues and TCP, instead of a timeout per message;
* each wake-up moves at most ``BATCH`` messages per direction, replies first, and the stop
  flag is checked on every one (the poll waits at most 100 ms).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

from gateway.adapter import POLLIN, make_poller
from gateway.device.inflight import LossTracker
from gateway.device.ledger import REQUEST, Ledger, clock
from gateway.device.step import ReplyStep, RequestStep
from gateway.envelope import Translator
from gateway.errors import PeerBusy
from gateway.message import Message

BATCH = 256


class PollForwarder:
    def __init__(self, front: Any, back: Any, translator: Translator, ledger: Ledger,
                 hwm: int = 1000) -> None:
        self.front, self.back = front, back
        self.translator, self.ledger = translator, ledger
        ledger.pairs_replies = translator.pairs_replies  # in flight: request-reply only
        self.hwm = hwm
        self._halt = threading.Event()
        self._draining = threading.Event()
        self._task: asyncio.Future[None] | None = None
        self._waiting: deque[tuple[Message, float]] = deque()  # untranslated, the back is busy
        self.loss = LossTracker(translator, ledger, lambda: back.peers)
        self._peer_left = threading.Event()  # set by the back end's thread, read by ours
        back.on_peer_lost = self._peer_left.set

        def to_back(msg: Message) -> bytes | None:
            return None if not back.send_nowait(msg) else b""

        def to_front(msg: Message) -> bytes:
            if not front.send_nowait(msg):
                raise PeerBusy("the client's pipe is full")
            return b""

        self.request = RequestStep(translator, ledger, self.loss, to_back)
        self.reply = ReplyStep(translator, ledger, self.loss, to_front)

    def start(self) -> None:
        self._task = asyncio.ensure_future(asyncio.to_thread(self._loop))

    async def failed(self) -> None:
        assert self._task is not None
        await asyncio.shield(self._task)

    def stop_requests(self) -> None:
        self._draining.set()

    async def drain(self, grace: float) -> None:
        deadline = clock() + grace
        while ((self.ledger.in_flight or self._waiting) and self._task is not None
               and not self._task.done() and clock() < deadline):
            await asyncio.sleep(0.02)

    def backlog(self) -> int:
        """Requests taken from the front but never forwarded (the back end never had room)."""
        return len(self._waiting)

    async def close(self) -> None:
        self._halt.set()
        self.back.on_peer_lost = None
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    # -- the thread ------------------------------------------------------------------------------
    def _flush(self) -> None:
        """Hand waiting requests to the back end until it has no room."""
        waiting, step = self._waiting, self.request
        while waiting:
            msg, t0 = waiting[0]
            if not step(msg, t0):
                return
            waiting.popleft()

    def _replies(self) -> None:
        recv, step = self.back.recv_nowait, self.reply
        for _ in range(BATCH):
            msg = recv()
            if msg is None:
                return
            step(msg)

    def _requests(self) -> None:
        recv, waiting = self.front.recv_nowait, self._waiting
        for _ in range(min(BATCH, self.hwm - len(waiting))):
            if self._halt.is_set() or self._draining.is_set():
                return
            msg = recv()
            if msg is None:
                return
            waiting.append((msg, clock()))
            self._flush()

    def _loop(self) -> None:
        front, back, halt, draining = self.front, self.back, self._halt, self._draining
        out_obj, out_flag = back.out_pollable or (None, 0)
        up, down = self.translator.up, self.translator.down
        expire, ledger = self.translator.expire, self.ledger
        for first in self.translator.initial():  # pub/sub: the standing subscriptions
            if not back.send_nowait(first):
                ledger.dropped("backend-unavailable", REQUEST, "a standing subscription")
        poller = make_poller()
        registered: dict[Any, int] = {}
        readable = POLLIN
        next_expiry = clock() + 1.0
        while not halt.is_set():
            want: dict[Any, int] = {back.pollable: readable} if down else {}
            if self._waiting and out_obj is not None:  # wake when the back end has room again
                want[out_obj] = want.get(out_obj, 0) | out_flag
            if up and not draining.is_set() and len(self._waiting) < self.hwm:
                want[front.pollable] = want.get(front.pollable, 0) | readable
            if want != registered:  # a full queue stops reading clients: back-pressure
                for obj in registered.keys() - want.keys():
                    poller.unregister(obj)
                for obj, flags in want.items():
                    poller.register(obj, flags)
                registered = want
            if want:
                ready = dict(poller.poll(100))
            else:  # an SP front with nothing to flush: nothing to wait on but the stop
                halt.wait(0.1)
                ready = {}
            if self._waiting:
                self._flush()
            if ready.get(back.pollable, 0) & readable:
                self._replies()
            if ready.get(front.pollable, 0) & readable:
                self._requests()
            now = clock()
            if self._peer_left.is_set():  # the last peer gone? what it held is lost
                self._peer_left.clear()
                self.loss.peer_left()
            if now >= next_expiry:
                next_expiry = now + 1.0
                ledger.expired(expire(now))
                self.loss.expire(now)
                ledger.flush()
