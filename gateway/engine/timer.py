"""A socket's pattern timer, sans-IO (aioquic's ``get_timer``/``handle_timer``): the pattern
says when it wants to act (``resend_deadline``) and what to send then (``handle_timer``); this
runs it on the loop. Only a cooked REQ uses it: nng's resend of an unanswered SP request after
``resend_interval``, or at once when the pipe it went out on is lost."""

from __future__ import annotations

import asyncio

from gateway.engine.pipe import Pipe
from gateway.engine.send import Routing
from gateway.metrics import METRICS
from gateway.patterns.reqrep import Pattern


class PatternTimer:
    """Runs ``pattern``'s timer over the pipes of ``routing``."""

    def __init__(self, pattern: Pattern, routing: Routing) -> None:
        self.pattern = pattern
        self.routing = routing
        self.handle: asyncio.Handle | None = None

    def after_send(self, pipe: Pipe) -> None:
        """A balanced send went out on ``pipe``: tell the pattern, arm its timer."""
        pattern = self.pattern
        if pattern.cooked:
            pattern.sent(pipe.routing_id, pipe.family, asyncio.get_running_loop().time())
            self.schedule()
        else:
            pattern.sent(pipe.routing_id, pipe.family)

    def schedule(self) -> None:
        self.cancel()
        deadline = self.pattern.resend_deadline()
        if deadline is not None and not self.routing.closed:
            self.handle = asyncio.get_running_loop().call_at(deadline, self.fire)

    def fire_soon(self) -> None:
        """The pattern is due at once (its pipe went away)."""
        self.cancel()
        self.handle = asyncio.get_running_loop().call_soon(self.fire)

    def fire(self) -> None:
        """nng's REQ: resend the pending request (its interval passed, or its pipe went away)."""
        self.handle = None
        if self.routing.closed:
            return
        loop = asyncio.get_running_loop()
        pattern = self.pattern
        msg = pattern.handle_timer(loop.time())
        if msg is None:
            self.schedule()
            return
        pipe = self.routing.pick()
        if pipe is None:  # no writable pipe yet: try again shortly
            self.handle = loop.call_later(0.05, self.fire)
            return
        pipe.write(pattern.envelope(msg, pipe.family))
        pattern.sent(pipe.routing_id, pipe.family, loop.time())
        METRICS.inc("gateway_requests_resent_total")
        self.schedule()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


__all__ = ["PatternTimer"]
