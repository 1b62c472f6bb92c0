"""Forwarding on one thread over the libraries' own poller, for bridges whose two sides are
library sockets with a polled face (:class:`gateway.adapter.PolledSocket`).

One thread owns both sockets (zmq sockets are not thread-safe, so both directions live on one
thread) and waits in the sides' poller on their pollables. It drives the same steps as every
forwarder (:mod:`gateway.device.step`) and never blocks on a peer:

* every send is non-blocking. A reply a client cannot take (its pipe is full, or it left) is
  dropped and counted at once, as libzmq's ROUTER does, so one slow client never holds the
  others' replies;
* clients take turns (:mod:`gateway.device.fair`): a request the back end cannot take yet
  waits, untranslated, in its client's queue, and the queues go to the back end round robin,
  one message per client per turn (as libzmq's ROUTER fair-queues its pipes). They are bounded
  in all (``hwm``) and, for request-reply, per client (``hwm // PER_CLIENT``; the other
  patterns' messages name no client: one queue); while that is reached the front is not read:
  back-pressure reaches the clients through the libraries' own per-peer queues and TCP;
* request-reply: the clients active share ``hwm // BACKEND`` requests unanswered in the back
  end, at least ``FLOOR`` each (a reply frees a slot, and so does ``STALE`` seconds without
  one), so that a client flooding requests waits in its own queue here rather than ahead of
  everyone else in nng's/libzmq's send buffer, the TCP buffers and the server's queue, which
  serve first come first served; a client alone has the whole share (its burst is not paced);
* each wake-up moves at most ``BATCH`` messages per direction, replies first, and the stop
  flag is checked on every one (the poll waits at most 100 ms).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from gateway.adapter import POLLIN, make_poller
from gateway.device.fair import FairQueue, Window
from gateway.device.inflight import LossTracker
from gateway.device.ledger import REQUEST, Ledger, client_of, clock
from gateway.device.step import ReplyStep, RequestStep
from gateway.envelope import Translation
from gateway.errors import PeerBusy
from gateway.message import Message

BATCH = 256
#: a client's share of the requests waiting in the poller: ``hwm // PER_CLIENT``
PER_CLIENT = 16
#: what the back end may hold unanswered, ``hwm // BACKEND``, is shared among the clients active,
#: at least ``FLOOR`` each: a flooder among 20 clients waiting for their replies has 250 // 21
#: = 11 requests ahead of theirs (the others' p99: 24-26 ms; 67-111 ms with a fixed 62 a client)
BACKEND = 4
FLOOR = 2
#: seconds after which a request the back end has not answered stops holding its client's slot:
#: far above a round trip through a busy back end (a client's share at a few thousand requests
#: a second: tens of ms), short enough that a client whose requests the server never answers,
#: and whose queue here is full, holds the front up (the front cannot be read for some clients
#: only) for a quarter of a second at a time, not for good
STALE = 0.25


class PollForwarder:
    def __init__(self, front: Any, back: Any, translator: Translation, ledger: Ledger,
                 hwm: int = 1000) -> None:
        self.front, self.back = front, back
        self.translator, self.ledger = translator, ledger
        ledger.pairs_replies = translator.pairs_replies  # in flight: request-reply only
        self.hwm = hwm
        self._halt = threading.Event()
        self._draining = threading.Event()
        self._task: asyncio.Future[None] | None = None
        # request-reply only: the other patterns' messages carry no client (one queue, as
        # before) and nothing waits for an answer
        share = max(1, hwm // PER_CLIENT) if translator.pairs_replies else hwm
        #: what the back end holds unanswered, per client
        self.window = (Window(max(1, hwm // BACKEND), STALE, FLOOR) if translator.pairs_replies
                       else None)
        #: untranslated requests the back end (or the client's window) had no room for
        self._waiting: FairQueue[tuple[Message, float]] = FairQueue(hwm, share, self.window)
        self._now = clock()  # the loop's clock, read once per wake-up
        self._client = b""  # whose request is being sent (the window's slot is its)
        self._wants_room = False  # a request waits for room in the back end itself
        self.loss = LossTracker(translator, ledger, lambda: back.peers)
        self._peer_left = threading.Event()  # set by the back end's thread, read by ours
        back.on_peer_lost = self._peer_left.set
        window = self.window

        def to_back(msg: Message) -> bytes | None:
            if not back.send_nowait(msg):
                return None
            if window is not None:
                window.sent(self._client, self._now)
            return b""

        answered = self._waiting.answered

        def to_front(msg: Message) -> bytes:
            answered(client_of(msg))  # its window has a free slot again
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
        """Hand waiting requests to the back end, clients in turn, until it has no room or
        every client waiting has its share of the back end out."""
        waiting, forward = self._waiting, self.request.forward
        while waiting.ready:
            self._client = waiting.turn
            msg, t0 = waiting.head()
            if not forward(msg, t0):
                self._wants_room = True
                return
            waiting.pop()
        self._wants_room = False

    def _replies(self) -> None:
        recv, forward = self.back.recv_nowait, self.reply.forward
        for _ in range(BATCH):
            msg = recv()
            if msg is None:
                return
            forward(msg)

    def _requests(self) -> None:
        recv, waiting, halt, draining = self.front.recv_nowait, self._waiting, self._halt, \
            self._draining
        for _ in range(BATCH):
            if waiting.full or halt.is_set() or draining.is_set():
                return
            msg = recv()
            if msg is None:
                return
            waiting.put(client_of(msg), (msg, clock()))
            self._flush()

    def _loop(self) -> None:
        front, back, halt, draining = self.front, self.back, self._halt, self._draining
        out_obj, out_flag = back.out_pollable or (None, 0)
        up, down = self.translator.up, self.translator.down
        expire, ledger = self.translator.expire, self.ledger
        waiting = self._waiting
        for first in self.translator.initial():  # pub/sub: the standing subscriptions
            if not back.send_nowait(first):
                ledger.dropped("backend-unavailable", REQUEST, "a standing subscription")
        poller = make_poller()
        registered: dict[Any, int] = {}
        readable = POLLIN
        next_expiry = clock() + 1.0
        while not halt.is_set():
            want: dict[Any, int] = {back.pollable: readable} if down else {}
            if waiting.ready and self._wants_room and out_obj is not None:
                want[out_obj] = want.get(out_obj, 0) | out_flag  # wake when it has room again
            if up and not draining.is_set() and not waiting.full:
                want[front.pollable] = want.get(front.pollable, 0) | readable
            if want != registered:  # full queues stop reading clients: back-pressure
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
            self._now = now = clock()
            waiting.tick(now)  # stale slots free their clients
            if ready.get(back.pollable, 0) & readable:  # replies first: they free shares
                self._replies()
            if waiting.ready:
                self._flush()
            if ready.get(front.pollable, 0) & readable:
                self._requests()
            if self._peer_left.is_set():  # the last peer gone? what it held is lost
                self._peer_left.clear()
                self.loss.peer_left()
                if back.peers == 0:
                    waiting.clear_window()
            if now >= next_expiry:
                next_expiry = now + 1.0
                ledger.expired(expire(now))
                self.loss.expire(now)
                ledger.flush()
                if self.window is not None:
                    self.window.sweep(now)
