"""Forwarding on the asyncio loop: two loops over the sides' asyncio faces, and, with the
native engine on both sides (``callbacks``), forwarding inside the receiving pipe's callback.

Both drive the same steps (:mod:`gateway.device.step`). The callback path: parse, translate
and write in one loop wake-up per message; a request the back end has no room for stays
untranslated in the front's inbox, and the request loop takes it from there once the back end
has room; later requests follow it there until it caught up, so a client's requests stay in
order.

Requests in flight on the back end are tracked (:class:`LossTracker`): with the native engine
there, a pipe that closes has its requests counted as ``backend-lost`` at once; a library back
end has them counted when its last peer leaves (its ``on_peer_lost``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from gateway import kernel
from gateway.device.inflight import LossTracker
from gateway.device.ledger import REPLY, REQUEST, Ledger, clock
from gateway.device.step import ReplyStep, RequestStep
from gateway.device.tap import Tap
from gateway.engine.hooks import SocketHooks
from gateway.envelope import Translation
from gateway.errors import Drop, GatewayError
from gateway.metrics import BUCKETS


async def _forever() -> None:
    """A direction the pattern does not use: wait until cancelled."""
    await asyncio.get_running_loop().create_future()


class _Front(SocketHooks):
    """The front's observer: each request goes through the request step at once (after the
    compiled kernel, if one runs, took the usual ones of each read)."""

    def __init__(self, fwd: AsyncForwarder) -> None:
        self.fwd = fwd
        #: the request step, held while the request loop holds requests or the bridge drains
        #: (False: to the inbox, where the loop or the drain count takes it)
        self.message = fwd.request.forwarder(fwd.hold)  # type: ignore[method-assign,assignment]
        self.fast = fwd.kernel.request if fwd.kernel is not None else None
        self.fast_read = fwd.kernel.read_request if fwd.kernel is not None else None

    def dropped(self, drop: Drop, endpoint: str) -> bool:
        return self.fwd.pattern_drop(drop, endpoint, "request")

    def unsent(self, reason: str, endpoint: str, count: int) -> bool:
        return self.fwd.unsent(reason, endpoint, count, REPLY)


class _Back(SocketHooks):
    """The back's observer: each reply (or published message, or pair message) goes through
    the reply step at once; a lost back-end pipe counts its requests in flight. A front with
    no room (a pair peer at its mark: a routed or fan-out send never waits) leaves the
    message to the reply loop, and those after it follow until it caught up."""

    def __init__(self, fwd: AsyncForwarder) -> None:
        self.fwd = fwd
        #: the reply step, held while the reply loop holds replies
        self.message = fwd.reply.forwarder(fwd.back_hold)  # type: ignore[method-assign,assignment]
        self.fast = fwd.kernel.reply if fwd.kernel is not None else None
        self.fast_read = fwd.kernel.read_reply if fwd.kernel is not None else None

    def pipe_lost(self, routing_id: bytes) -> None:
        self.fwd.loss.pipe_lost(routing_id)

    def dropped(self, drop: Drop, endpoint: str) -> bool:
        return self.fwd.pattern_drop(drop, endpoint, "reply")

    def unsent(self, reason: str, endpoint: str, count: int) -> bool:
        return self.fwd.unsent(reason, endpoint, count, REQUEST)


class AsyncForwarder:
    """Both directions on the running loop; the callback path when both sides have it."""

    def __init__(self, front: Any, back: Any, translator: Translation, ledger: Ledger,
                 tap: Tap | None = None) -> None:
        self.front, self.back = front, back
        self.tap = tap
        #: set while messages flow; cleared by a control endpoint's PAUSE (see :meth:`pause`)
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.translator, self.ledger = translator, ledger
        ledger.pairs_replies = translator.pairs_replies  # in flight: request-reply only
        self.draining = False
        #: the front went to the bridge that replaced this one (a reload): never touched again
        #: but to send the replies to what is in flight
        self.released = False
        #: the callback path's gates, as cells (:meth:`RequestStep.forwarder`): the request
        #: loop holds requests (or the bridge drains); the reply loop holds replies (pair: a
        #: front with no room)
        self.hold = [False]
        self.back_hold = [False]
        #: True while a capture reader can take copies: the compiled kernel then leaves every
        #: message to the Python step, which the tap sees (gateway.device.tap.CapturePublisher)
        self.watched = [tap is not None]
        self._tasks: list[asyncio.Task[None]] = []
        #: 1 while the request loop holds a request the back end has no room for
        self.held = 0
        self.loss = LossTracker(translator, ledger, lambda: back.peers)
        native_back = back.callbacks
        self.request = RequestStep(translator, ledger, self.loss,
                                   back.send_now if native_back else None,
                                   back.room if native_back else None, tap)
        self.reply = ReplyStep(translator, ledger, self.loss,
                               front.send_now if front.callbacks else None, tap)
        self.callbacks = front.callbacks and native_back
        #: the compiled kernel (one call per read) where it applies, else None
        #: (never with a control endpoint: STATISTICS counts every message in the Python step;
        #: with a capture endpoint, only while no reader can take a copy: see ``watched``)
        self.kernel = (kernel.for_bridge(self, BUCKETS)
                       if self.callbacks and (tap is None or not tap.counting) else None)
        if self.kernel is not None and tap is not None and tap.capture is not None:
            tap.capture.watch(self.watched, ledger.tally)

    def pattern_drop(self, drop: Drop, endpoint: str, direction: str) -> bool:
        self.ledger.dropped(drop.reason, direction, drop.detail, peer=endpoint)
        return True

    def unsent(self, reason: str, endpoint: str, count: int, direction: str) -> bool:
        """Messages a side lost after the step handed them over (a subscriber at its mark, a
        pipe that closed with them queued): the bridge's drops; a request on the back end is
        also counted by the loss tracker as ``backend-lost``, so not twice here."""
        if direction == REQUEST and self.translator.pairs_replies:
            return True
        self.ledger.dropped(reason, direction, "", count, settles=False, peer=endpoint)
        return True

    # -- the loops ---------------------------------------------------------------------------
    async def _requests(self) -> None:
        recv, step, back, hold = self.front.recv_msg, self.request, self.back, self.hold
        tap = self.tap
        forward = step.forward
        for first in self.translator.initial():  # pub/sub: the standing subscriptions
            await back.send_msg(first)
        if not self.translator.up:  # nothing comes from the front (an SP pub0 front)
            await _forever()
        while True:
            if hold[0] and not self.draining and not self.backlog():
                hold[0] = False  # caught up: the callback path may forward again
            msg = await recv()
            if not self.flowing.is_set():  # paused: this one waits here, the rest inbound
                await self.flowing.wait()
            if step.send_now is not None:  # native back end: wait for room, then the step
                while not forward(msg):
                    hold[0] = True  # (a request taken before start: none overtakes it)
                    self.held = 1  # waits for a back-end peer (gateway_waiting_requests)
                    await back.wait_room()
                self.held = 0
            else:
                t0 = clock()
                out = step.prepare(msg, t0)
                if out is None:
                    if tap is not None:
                        tap.request(msg, None, None)
                    continue
                self.held = 1  # until the library takes it
                try:
                    pipe = await back.send_msg(out)
                except GatewayError as exc:
                    step.refused(exc, msg, out)
                    if tap is not None:
                        tap.request(msg, None, None)
                    continue
                finally:
                    self.held = 0
                step.done(out, pipe, t0)
                if tap is not None:
                    tap.request(msg, out, pipe)

    async def _replies(self) -> None:
        recv, step, send, hold = self.back.recv_msg, self.reply, self.front.send_msg, self.back_hold
        tap = self.tap
        if not self.translator.down:  # pipeline: the back end (PUSH) never receives
            await _forever()
        while True:
            if hold[0] and not self.back.backlog:
                hold[0] = False  # caught up: the callback path may forward again
            msg = await recv()
            if not self.flowing.is_set():  # paused (see _requests)
                await self.flowing.wait()
            t0 = clock()
            out = step.prepare(msg, t0)
            if out is None:
                if tap is not None:
                    tap.reply(msg, None)
                continue
            hold[0] = True  # the callback path waits while this one may (pair: no room)
            try:
                await send(out)
            except GatewayError as exc:
                step.refused(exc, out)
                if tap is not None:
                    tap.reply(msg, None)
                continue
            step.done(t0)
            if tap is not None:
                tap.reply(msg, out)

    # -- steering (a control endpoint) --------------------------------------------------------
    def pause(self) -> None:
        """Hold traffic both ways (zmq_proxy_steerable's PAUSE): the callback path leaves each
        message to its side's inbox, the loops hold the one they took; an inbox holds ``hwm``
        messages per pipe, then that pipe stops reading (the peer's own queue and TCP hold the
        rest, as libzmq's sockets do at their mark). Nothing is dropped for the pause."""
        self.flowing.clear()
        self.hold[0] = self.back_hold[0] = True

    def resume(self) -> None:
        """Let traffic flow again (RESUME): the loops forward what waited, in order, and give
        the callback path back once caught up."""
        self.flowing.set()

    # -- the Forwarder interface -------------------------------------------------------------
    def backlog(self) -> int:
        """Requests received and not forwarded (counted as ``shutdown`` if the stop finds them;
        none once the front is released: the next bridge forwards them)."""
        return 0 if self.released else int(self.front.backlog)

    def release_front(self) -> None:
        """The front goes to the bridge that replaces this one: no request is forwarded from
        now on (they wait in the front's inbox, which the next bridge's loop reads); replies
        to those in flight still go out through it."""
        self.stop_requests()
        self.released = True

    async def _expire(self, every: float) -> None:
        translator, ledger, loss = self.translator, self.ledger, self.loss
        while True:
            await asyncio.sleep(every)
            now = clock()
            ledger.expired(translator.expire(now))
            loss.expire(now)
            ledger.flush()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.front.callbacks:  # its pattern's drops are the bridge's
            self.front.observe(_Front(self) if self.callbacks else _Drops(self, "request"))
        if self.back.callbacks:
            self.back.observe(_Back(self) if self.callbacks else _Lost(self))
        else:  # a library back end, from its own thread

            def peer_lost() -> None:
                with contextlib.suppress(RuntimeError):  # the loop is gone: nothing to count
                    loop.call_soon_threadsafe(self.loss.peer_left)

            self.back.on_peer_lost = peer_lost
        every = min(1.0, self.translator.table.ttl / 4)
        self._tasks = [loop.create_task(self._requests()), loop.create_task(self._replies()),
                       loop.create_task(self._expire(every))]

    async def failed(self) -> None:
        """Returns only when a loop died (raising its error); runs until cancelled otherwise
        (the request loop cancelled by :meth:`release_front` is no failure)."""
        pending = set(self._tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not (task.cancelled() and self.draining):
                    task.result()
                    return
        await _forever()

    def stop_requests(self) -> None:
        if self.draining:
            return
        if self.held and self.request.send_now is not None:  # taken, waiting for room: lost
            self.ledger.dropped("shutdown", REQUEST, "request not forwarded", self.held)
            self.held = 0
        self.draining = True
        self.hold[0] = True  # what comes now stays in the inbox, for the drain count
        self.flowing.set()  # (a paused bridge drains too: replies to what is in flight cross)
        self._tasks[0].cancel()

    async def drain(self, grace: float) -> None:
        deadline = clock() + grace
        while self.ledger.in_flight and not self._tasks[1].done() and clock() < deadline:
            await asyncio.sleep(0.02)

    async def close(self) -> None:
        for side in (self.back,) if self.released else (self.front, self.back):
            if side.callbacks:
                side.observe(None)
        self.back.on_peer_lost = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class _Drops(SocketHooks):
    """A native side whose messages go through the loops: its pattern's drops are the
    bridge's."""

    def __init__(self, fwd: AsyncForwarder, direction: str) -> None:
        self.fwd, self.direction = fwd, direction

    def dropped(self, drop: Drop, endpoint: str) -> bool:
        return self.fwd.pattern_drop(drop, endpoint, self.direction)

    def unsent(self, reason: str, endpoint: str, count: int) -> bool:
        return self.fwd.unsent(reason, endpoint, count,
                               REPLY if self.direction == REQUEST else REQUEST)


class _Lost(_Drops):
    """A native back end whose replies go through the loop: drops, and lost pipes' requests."""

    def __init__(self, fwd: AsyncForwarder) -> None:
        super().__init__(fwd, "reply")

    def pipe_lost(self, routing_id: bytes) -> None:
        self.fwd.loss.pipe_lost(routing_id)


__all__ = ["AsyncForwarder"]
