"""Liveness of one pipe: ZMTP heartbeats (libzmq's HEARTBEAT_IVL/TTL/TIMEOUT, RFC 37 PING/PONG)
and the per-message receive deadline, as timers of the pipe's loop with no cost per message.

Heartbeats (ZMTP 3.x only): every ``heartbeat_ivl`` a PING goes out when nothing arrived since
the previous tick (a busy pipe needs none; with ``heartbeat_ttl`` set one always goes, so that
the peer's TTL sees our traffic). After a PING, a pipe that receives nothing at all for
``heartbeat_timeout`` (default: the interval) is closed (``heartbeat-timeout``); a peer's PING
that carries a TTL closes the pipe when nothing follows within the TTL, as libzmq does, even
when our own heartbeats are off. Any traffic is proof of life: the pipe only counts received
chunks, and a deadline compares the count when it fires (timers are never re-armed per
message). A deadline whose window saw the pipe's reading paused (our back-pressure: the peer's
PONG may wait in the kernel) closes nothing; the next PING starts a new one.

Message deadline: once the handshake is done, a message whose bytes started arriving must be
complete within ``message_timeout`` (a peer that sends half a big message and stalls would
otherwise pin its buffer for ever). One timer runs while the codec holds an incomplete message
and is moved on when a message completes; while reading is paused no deadline runs.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class Watched(Protocol):
    """What liveness needs of its pipe."""

    rx_chunks: int  # chunks received (any traffic)
    pauses: int  # times reading was paused (our back-pressure hides the peer's traffic)
    reading: bool
    codec: Any
    transport: Any

    @property
    def partial(self) -> bool: ...  # a message begun and not ended (codec or read buffer)
    @property
    def closing(self) -> bool: ...
    @property
    def close_reason(self) -> str: ...
    def abort(self, reason: str, detail: str = "", farewell: bytes = b"") -> None: ...
    def write_bytes(self, data: bytes) -> None: ...


class Liveness:
    """The heartbeat and message-deadline timers of one pipe (see the module doc)."""

    __slots__ = ("_hb_seen", "_hb_tick", "_hb_wait", "_hb_wait_mark", "_loop", "_msg_start",
                 "_ttl_wait", "heartbeat_ivl", "heartbeat_timeout", "heartbeat_ttl",
                 "message_timeout", "msg_timer", "pipe")

    def __init__(self, pipe: Watched, *, heartbeat_ivl: float = 0.0, heartbeat_ttl: float = 0.0,
                 heartbeat_timeout: float | None = None, message_timeout: float = 0.0) -> None:
        self.pipe = pipe
        self.heartbeat_ivl = heartbeat_ivl
        self.heartbeat_ttl = min(round(heartbeat_ttl * 10), 0xFFFF)  # deciseconds, on the wire
        self.heartbeat_timeout = heartbeat_ivl if heartbeat_timeout is None else heartbeat_timeout
        self.message_timeout = message_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._hb_seen = 0  # rx_chunks at the previous heartbeat tick
        self._hb_tick: asyncio.TimerHandle | None = None
        self._hb_wait: asyncio.TimerHandle | None = None  # after our PING: heartbeat_timeout
        self._hb_wait_mark = 0
        self._ttl_wait: asyncio.TimerHandle | None = None  # after the peer's PING: its TTL
        #: the message deadline, while an incomplete message is buffered (None: not running;
        #: the compiled kernel reads it after each read of a watched pipe)
        self.msg_timer: asyncio.TimerHandle | None = None
        self._msg_start = 0.0  # loop time the incomplete message started (about)

    # -- heartbeats ----------------------------------------------------------------------------
    def start_heartbeats(self, loop: asyncio.AbstractEventLoop) -> None:
        """The ZMTP 3.x handshake is done: tick every ``heartbeat_ivl`` (when set)."""
        self._loop = loop
        if self.heartbeat_ivl > 0:
            self._hb_seen = self.pipe.rx_chunks
            self._hb_tick = loop.call_later(self.heartbeat_ivl, self._heartbeat)

    def peer_ping(self, ttl: int) -> None:
        """The peer's PING carried a TTL (deciseconds): hear from it within that."""
        if not ttl:
            return
        if self._ttl_wait is not None:  # this PING is traffic: libzmq restarts the timer
            self._ttl_wait.cancel()
        pipe = self.pipe
        self._ttl_wait = asyncio.get_running_loop().call_later(
            ttl / 10, self._ttl_expired, pipe.rx_chunks + pipe.pauses, ttl / 10)

    def _heartbeat(self) -> None:
        self._hb_tick = None
        pipe = self.pipe
        transport = pipe.transport
        if pipe.close_reason or pipe.closing or transport is None or transport.is_closing():
            return
        loop = asyncio.get_running_loop()
        heard = pipe.rx_chunks != self._hb_seen
        self._hb_seen = pipe.rx_chunks
        if not heard or self.heartbeat_ttl:
            pipe.write_bytes(pipe.codec.ping(self.heartbeat_ttl))  # after what the pipe holds
            wait = self._hb_wait
            if wait is not None and pipe.rx_chunks + pipe.pauses != self._hb_wait_mark:
                wait.cancel()  # traffic since that PING: libzmq would have cancelled it then
                wait = self._hb_wait = None
            if wait is None and self.heartbeat_timeout > 0:
                self._hb_wait_mark = pipe.rx_chunks + pipe.pauses
                self._hb_wait = loop.call_later(self.heartbeat_timeout, self._heartbeat_expired)
        self._hb_tick = loop.call_later(self.heartbeat_ivl, self._heartbeat)

    def _heartbeat_expired(self) -> None:
        self._hb_wait = None
        pipe = self.pipe
        # unchanged marks: nothing arrived, and reading was never paused (our back-pressure)
        if pipe.rx_chunks + pipe.pauses == self._hb_wait_mark and pipe.reading:
            pipe.abort("heartbeat-timeout",
                       f"nothing received within {self.heartbeat_timeout}s of a PING")

    def _ttl_expired(self, mark: int, ttl: float) -> None:
        self._ttl_wait = None
        pipe = self.pipe
        if pipe.rx_chunks + pipe.pauses == mark and pipe.reading:
            pipe.abort("heartbeat-timeout",
                       f"nothing received within the peer's heartbeat TTL ({ttl}s)")

    # -- the message deadline ----------------------------------------------------------------------
    def watch_partial(self, done: int) -> None:
        """After a read was processed: run the deadline while an incomplete message is buffered
        (one timer per message, not per chunk); stop it otherwise. ``done``: messages the read
        completed (the one now partial, if any, is newer)."""
        pipe = self.pipe
        if pipe.reading and pipe.partial:
            loop = asyncio.get_running_loop()
            if self.msg_timer is None:
                self._msg_start = loop.time()
                self.msg_timer = loop.call_later(self.message_timeout, self._message_timeout)
            elif done:
                self._msg_start = loop.time()
        elif self.msg_timer is not None:  # complete, or reading paused (not the peer's fault)
            self.msg_timer.cancel()
            self.msg_timer = None

    @property
    def watching(self) -> bool:
        """True while the message deadline runs."""
        return self.msg_timer is not None

    def _message_timeout(self) -> None:
        self.msg_timer = None
        pipe = self.pipe
        if pipe.close_reason or pipe.closing:
            return
        loop = asyncio.get_running_loop()
        left = self._msg_start + self.message_timeout - loop.time()
        if left > 0:  # messages completed meanwhile: the current one's deadline is later
            self.msg_timer = loop.call_later(left, self._message_timeout)
            return
        pipe.abort("message-timeout", f"a message still incomplete after {self.message_timeout}s")

    def stop(self) -> None:
        for timer in (self._hb_tick, self._hb_wait, self._ttl_wait, self.msg_timer):
            if timer is not None:
                timer.cancel()
        self._hb_tick = self._hb_wait = self._ttl_wait = self.msg_timer = None


__all__ = ["Liveness", "Watched"]
