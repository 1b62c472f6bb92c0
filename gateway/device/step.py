"""The per-message forwarding step of a bridge, written once per direction and driven by every
forwarder (the native callbacks, the asyncio loops, the library poller).

A step is three parts, so that each forwarder can put its own send between them (a native side
sends at once, a library's asyncio face is awaited, the poller's is non-blocking):

* ``prepare(msg, now)``: translate (:class:`gateway.envelope.Translation`); a refusal is counted
  in the ledger by its reason and the message dropped (``None``);
* the send, by the forwarder;
* ``done(out, pipe, t0)``: account (in flight on that pipe, forwarded, the hop's latency from
  ``t0``, the one clock reading the message got when it came in: it also dated its token).

``step.forward(msg)`` is all three with a non-blocking ``send_now`` (which
returns None when the side has no room), in one call: a closure made once per step
(:meth:`RequestStep.forwarder`) over ``prepare``, the send and ``done``, which a socket's
observer calls straight, without a frame of its own around it. The step is written once in
Python; its one other form is the compiled kernel's (``gateway.kernel``), for the usual
messages of a read. A step's parts are fixed when it is made.
A request step asks the back end for room *before* it translates, so a busy back end leaves
the request untranslated (no token minted and forgotten): the caller keeps it and calls again
once there is room. A bridge with a control or capture endpoint gives each step a
:class:`~gateway.device.tap.Tap`, told of every message the step is done with.
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.device.inflight import LossTracker
from gateway.device.ledger import REPLY, REQUEST, Ledger, client_of, clock
from gateway.device.tap import Tap
from gateway.envelope import Translation, same_family
from gateway.errors import GatewayError
from gateway.message import Message

#: a non-blocking send: the routing id of the pipe the message went to, None when no room
SendNow = Callable[[Message], bytes | None]


class RequestStep:
    """Front -> back: a request (or, beyond request-reply, whatever flows that way).

    ``room``: the back end's room as a cell (``room[0]`` True when a send would go out now,
    :attr:`gateway.engine.send.Routing.room`; None: the send itself says, ``send_now``)."""

    __slots__ = ("_same", "_translate", "forward", "ledger", "loss", "room", "send_now", "tap",
                 "translator")

    def __init__(self, translator: Translation, ledger: Ledger, loss: LossTracker,
                 send_now: SendNow | None = None,
                 room: list[bool] | None = None, tap: Tap | None = None) -> None:
        self.translator, self.ledger, self.loss = translator, ledger, loss
        self._translate = translator.request
        self._same = self._translate is same_family  # untouched: no call for that
        #: what crossed, for a control or capture endpoint (gateway.device.tap; None: none)
        self.tap = tap
        self.send_now = send_now if tap is None or send_now is None else tap.sender(send_now)
        self.room = room
        #: ``forward(msg, t0=0.0)``: the whole step now, see :meth:`forwarder`
        self.forward = self.forwarder()

    def prepare(self, msg: Message, now: float) -> Message | None:
        """What goes to the back end (None: refused and counted, or nothing to send)."""
        if self._same:
            return msg
        try:
            return self._translate(msg, now)
        except GatewayError as exc:
            self.ledger.refused(exc, REQUEST, client_of(msg))
            return None

    def done(self, out: Message, pipe: bytes | None, t0: float) -> None:
        self.loss.sent(out, pipe, t0)
        self.ledger.request_forwarded(t0)

    def refused(self, exc: GatewayError, msg: Message, out: Message | None) -> None:
        """The back end refused what ``prepare`` made: its token goes, the drop is counted."""
        if out is not None:
            self.translator.forget([out[0]])
        self.ledger.refused(exc, REQUEST, client_of(msg))

    def forwarder(self, hold: list[bool] | None = None) -> Callable[..., bool]:
        """``forward(msg, t0=0.0)``: forward ``msg`` now. True when done (sent, or refused and
        counted), False when the back end has no room (nothing was translated: call again with
        the same message). ``t0``: when the message came in, if it waited (default: now).

        ``hold``: a cell for a caller that keeps order with a loop of its own (the callback
        path, whose loop takes what it leaves): while ``hold[0]`` is set, ``forward`` returns
        False at once, and it sets ``hold[0]`` when the back end has no room."""
        forward = self._forwarder(hold)
        return forward if self.tap is None else self.tap.request_step(forward)

    def _forwarder(self, hold: list[bool] | None) -> Callable[..., bool]:
        gate = hold if hold is not None else [False]
        room, send_now, forget = self.room, self.send_now, self.translator.forget
        prepare, done, refused = self.prepare, self.done, self.refused

        def forward(msg: Message, t0: float = 0.0) -> bool:
            if gate[0]:  # a loop holds earlier messages: they go first
                return False
            if room is not None and not room[0]:
                if hold is not None:
                    hold[0] = True  # no room on the back end: the loop waits for it
                return False
            if not t0:
                t0 = clock()
            out = prepare(msg, t0)
            if out is None:  # refused and counted, or nothing to send
                return True
            try:
                pipe = send_now(out)  # type: ignore[misc]
            except GatewayError as exc:
                refused(exc, msg, out)
                return True
            if pipe is None:  # no room after all (no room check): undo, keep the request
                forget([out[0]])
                if hold is not None:
                    hold[0] = True
                return False
            done(out, pipe, t0)
            return True

        return forward


class ReplyStep:
    """Back -> front: a reply (or, beyond request-reply, whatever flows that way)."""

    __slots__ = ("_translate", "answered", "forward", "ledger", "loss", "send_now", "tap")

    def __init__(self, translator: Translation, ledger: Ledger, loss: LossTracker,
                 send_now: SendNow | None = None, tap: Tap | None = None) -> None:
        self.ledger, self.loss = ledger, loss
        self._translate = translator.reply
        self.answered = loss.answered
        self.tap = tap
        self.send_now = send_now if tap is None or send_now is None else tap.sender(send_now)
        #: ``forward(msg)``: the whole step now, see :meth:`forwarder`
        self.forward = self.forwarder()

    def prepare(self, msg: Message, now: float) -> Message | None:
        self.answered(msg[0])
        try:
            return self._translate(msg, now)
        except GatewayError as exc:
            self.ledger.refused(exc, REPLY, client_of(msg))
            return None

    def done(self, t0: float) -> None:
        self.ledger.reply_forwarded(t0)

    def refused(self, exc: GatewayError, out: Message | None) -> None:
        self.ledger.refused(exc, REPLY, client_of(out))

    def forwarder(self, hold: list[bool] | None = None) -> Callable[[Message], bool]:
        """``forward(msg)``: forward ``msg`` now (a routed send never waits: gone or full is
        counted). False only when the front has no room (a pair peer at its mark). ``hold``:
        as :meth:`RequestStep.forwarder`'s."""
        forward = self._forwarder(hold)
        return forward if self.tap is None else self.tap.reply_step(forward)

    def _forwarder(self, hold: list[bool] | None) -> Callable[[Message], bool]:
        gate = hold if hold is not None else [False]
        send_now, prepare, done, refused = self.send_now, self.prepare, self.done, self.refused

        def forward(msg: Message) -> bool:
            if gate[0]:  # the loop holds earlier messages: they go first
                return False
            t0 = clock()
            out = prepare(msg, t0)
            if out is None:  # refused and counted, or nothing to send
                return True
            try:
                if send_now(out) is None:  # type: ignore[misc]
                    if hold is not None:
                        hold[0] = True  # the front has no room: the loop waits for it
                    return False
            except GatewayError as exc:
                refused(exc, out)
                return True
            done(t0)
            return True

        return forward


__all__ = ["ReplyStep", "RequestStep", "SendNow"]
