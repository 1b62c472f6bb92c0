"""What crosses a bridge, seen from its one forwarding step: the counters of
``zmq_proxy_steerable``'s STATISTICS and the copies its capture socket publishes.

A bridge with a control or a capture endpoint (``--control``, ``--capture``; the ``control``
and ``capture`` keys of a ``[[bridge]]``) gets a :class:`Tap`. The request and reply steps
(:mod:`gateway.device.step`) tell it each message they finish with: the message as the
receiving side's socket handed it over, and what went to the other side (None when it was
refused and counted). The tap counts parts and bytes per side and direction as libzmq's proxy
does (``stats_proxy`` in libzmq's ``src/proxy.cpp``: every frame of a multipart message is one
part, and its size counts), and queues a copy for the capture endpoint.

The capture endpoint never slows forwarding: the step only appends to a bounded queue
(``CAPTURE_QUEUE`` records); the queue is published once per loop pass, and a record no reader
can take now (nobody subscribed, every reader at its high-water mark, or the queue full) is
counted in ``gateway_capture_dropped_total{reason}``, never waited for.

Capture formats (``capture_format``): ``frames`` publishes each forwarded message as the frames
the other side's socket was handed (libzmq's capture socket: the message as forwarded, a
routing id first where the side routes); ``records`` publishes ``[header, in pipe, out pipe,
frames as received..., frames as sent...]`` (:func:`pack_record`, :func:`unpack_record`),
what ``gateway capture`` needs to show both sides' wire bytes.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.engine.hooks import SocketHooks
from gateway.logging import get_logger
from gateway.message import Message
from gateway.metrics import METRICS, Registry

log = get_logger("gateway.device")

#: records waiting for the capture endpoint (one loop pass's worth, and then some)
CAPTURE_QUEUE = 10_000
#: seconds between two looks at whether a capture reader can take a copy (while none can, the
#: bridge's compiled kernel forwards and its messages count as dropped copies)
WATCH_INTERVAL = 0.02
#: (side, direction) in STATISTICS' order: front in, front out, back in, back out
STAT_ORDER = (("front", "in"), ("front", "out"), ("back", "in"), ("back", "out"))
REQUEST, REPLY = 0, 1
FAMILY_CODES = {"zmtp": 0, "sp": 1}
FAMILY_NAMES = {v: k for k, v in FAMILY_CODES.items()}
#: a record's header: magic, version, direction, families in and out, frames in, time (ns)
_HEADER = struct.Struct("!4sBBBBHQ")
MAGIC, VERSION = b"GWC1", 1


@dataclass(frozen=True, slots=True)
class Record:
    """One forwarded message as a ``records`` capture carries it."""

    direction: int  # REQUEST (front -> back) or REPLY (back -> front)
    in_family: str  # "zmtp" or "sp"
    out_family: str
    in_pipe: bytes  # the receiving pipe's routing id, when the socket says it (b"": not)
    out_pipe: bytes  # the pipe it went to (b"": not known)
    received: tuple[bytes, ...]  # the frames as the receiving socket handed them over
    sent: tuple[bytes, ...]  # the frames as the sending socket was handed them
    time_ns: int = 0


def pack_record(r: Record) -> list[bytes]:
    header = _HEADER.pack(MAGIC, VERSION, r.direction, FAMILY_CODES[r.in_family],
                          FAMILY_CODES[r.out_family], len(r.received), r.time_ns)
    return [header, r.in_pipe, r.out_pipe, *r.received, *r.sent]


def unpack_record(frames: list[bytes]) -> Record | None:
    """The record these frames carry, or None when they are not one (a ``frames`` capture)."""
    if len(frames) < 3 or len(frames[0]) != _HEADER.size:
        return None
    magic, version, direction, fin, fout, n_in, t = _HEADER.unpack(frames[0])
    if magic != MAGIC or version != VERSION or fin not in FAMILY_NAMES or fout not in FAMILY_NAMES:
        return None
    if 3 + n_in > len(frames) or direction not in (REQUEST, REPLY):
        return None
    rest = frames[3:]
    return Record(direction, FAMILY_NAMES[fin], FAMILY_NAMES[fout], frames[1], frames[2],
                  tuple(rest[:n_in]), tuple(rest[n_in:]), t)


def parts_of(family: str, msg: Message) -> tuple[int, int]:
    """Parts and bytes of one message on a side, as libzmq's proxy counts them: a ZeroMQ
    side's frames (the routing id a ROUTER-like socket adds, the delimiter, the body); an SP
    side's one message (its backtrace words and body, as nng's raw sockets hold them)."""
    frames = msg.hops + msg.body
    size = sum(map(len, frames))
    return (1 if family == "sp" else len(frames)), size


class Tap:
    """One bridge's statistics and capture queue (see the module doc). ``front_family`` and
    ``back_family``: each side's wire (the front's may be per pipe, ``any+``: a callable of
    the routing id)."""

    def __init__(self, bridge: str, front_family: Callable[[bytes], str], back_family: str,
                 capture: CapturePublisher | None = None, metrics: Registry = METRICS,
                 counting: bool = True) -> None:
        self.bridge = bridge
        #: STATISTICS is asked of this tap (a control endpoint): it must see every message,
        #: so the bridge's compiled kernel never runs (False: a capture endpoint only)
        self.counting = counting
        self.front_family, self.back_family = front_family, back_family
        self.capture = capture
        self._metrics = metrics
        self._parts = {sd: metrics.cell("gateway_side_parts_total", bridge=bridge, side=sd[0],
                                        direction=sd[1]) for sd in STAT_ORDER}
        self._bytes = {sd: metrics.cell("gateway_side_bytes_total", bridge=bridge, side=sd[0],
                                        direction=sd[1]) for sd in STAT_ORDER}
        #: (message sent, pipe) of the step under way: set by the wrapped send (:meth:`sender`)
        self._sent: tuple[Message, bytes] | None = None

    # -- counting ------------------------------------------------------------------------------
    def _count(self, key: tuple[str, str], family: str, msg: Message) -> None:
        n, size = parts_of(family, msg)
        self._parts[key][0] += n
        self._bytes[key][0] += size

    def _front_family(self, msg: Message) -> str:
        return self.front_family(msg.hops[0] if msg.hops else b"")

    def request(self, msg: Message, out: Message | None, pipe: bytes | None) -> None:
        """A request the step is done with: ``out`` went to the back end (None: refused)."""
        fam = self._front_family(msg)
        self._count(("front", "in"), fam, msg)
        if out is None:
            return
        self._count(("back", "out"), self.back_family, out)
        if self.capture is not None:
            self.capture.put(REQUEST, fam, self.back_family, msg, out,
                             msg.hops[0] if msg.hops else b"", pipe or b"")

    def reply(self, msg: Message, out: Message | None) -> None:
        """A reply the step is done with: ``out`` went to the front (None: refused)."""
        self._count(("back", "in"), self.back_family, msg)
        if out is None:
            return
        fam = self._front_family(out)
        self._count(("front", "out"), fam, out)
        if self.capture is not None:
            self.capture.put(REPLY, self.back_family, fam, msg, out, b"",
                             out.hops[0] if out.hops else b"")

    def statistics(self) -> tuple[int, ...]:
        """STATISTICS' eight counters, in libzmq's order: front parts in, bytes in, parts out,
        bytes out, then the back's the same."""
        out: list[int] = []
        for key in STAT_ORDER:
            out += [self._parts[key][0], self._bytes[key][0]]
        return tuple(out)

    # -- the step's hooks ----------------------------------------------------------------------
    def sender(self, send_now: Callable[[Message], bytes | None]
               ) -> Callable[[Message], bytes | None]:
        """``send_now`` that remembers what went out, for :meth:`request_step` and
        :meth:`reply_step`."""

        def send(out: Message) -> bytes | None:
            pipe = send_now(out)
            if pipe is not None:
                self._sent = (out, pipe)
            return pipe

        return send

    def request_step(self, forward: Callable[..., bool]) -> Callable[..., bool]:
        """The request step's ``forward``, telling the tap each request it is done with."""

        def tapped(msg: Message, t0: float = 0.0) -> bool:
            self._sent = None
            if not forward(msg, t0):
                return False  # not done: it comes again
            sent, self._sent = self._sent, None
            self.request(msg, *(sent if sent is not None else (None, None)))
            return True

        return tapped

    def reply_step(self, forward: Callable[[Message], bool]) -> Callable[[Message], bool]:
        """The reply step's ``forward``, telling the tap each reply it is done with."""

        def tapped(msg: Message) -> bool:
            self._sent = None
            if not forward(msg):
                return False
            sent, self._sent = self._sent, None
            self.reply(msg, sent[0] if sent is not None else None)
            return True

        return tapped

    def close(self) -> None:
        self._metrics.release(*self._parts.values(), *self._bytes.values())
        if self.capture is not None:
            self.capture.close()


class _CaptureHooks(SocketHooks):
    """The capture socket's observer: its readers' changes, told to the publisher at once."""

    def __init__(self, publisher: CapturePublisher) -> None:
        self.peers_changed = publisher.peers_changed  # type: ignore[method-assign]


class CapturePublisher:
    """The capture endpoint: a native PUB fed from a bounded queue once per loop pass."""

    def __init__(self, bridge: str, socket: Any, fmt: str = "frames",
                 metrics: Registry = METRICS) -> None:
        self.bridge, self.socket, self.format = bridge, socket, fmt
        self._queue: deque[Record] = deque()
        self._scheduled = False
        self._published = metrics.cell("gateway_capture_published_total", bridge=bridge)
        self._dropped = {reason: metrics.cell("gateway_capture_dropped_total", bridge=bridge,
                                              reason=reason)
                         for reason in ("no-reader", "hwm", "queue-full")}
        self._metrics = metrics
        self._readers = metrics.gauge("gateway_capture_peers", lambda: float(len(self.readers())),
                                      bridge=bridge)
        self._logged = 0.0
        # the kernel's turns (watch): the forwarder's cell, the bridge's tally, what the kernel
        # had forwarded at the last look, why no copy can be taken ("": one can), the timer
        self._watched: list[bool] | None = None
        self._tally: Any = None
        self._by_kernel = 0
        self._idle = ""
        self._timer: asyncio.TimerHandle | None = None
        socket.observe(_CaptureHooks(self))

    # -- the compiled kernel's turns: while no reader can take a copy -------------------------
    def watch(self, watched: list[bool], tally: Any) -> None:
        """Let the bridge's compiled kernel forward while no reader can take a copy (none
        subscribed, or every one at its high-water mark): ``watched[0]`` (the forwarder's cell,
        read by the kernel on every read) is set while one can, and the messages the kernel
        forwarded meanwhile (``tally.by_kernel``) are counted as the copies they would have
        been, dropped for the reason in effect. Looked at every ``WATCH_INTERVAL`` seconds and
        whenever a publish finds no reader able to take one."""
        self._watched, self._tally = watched, tally
        self._by_kernel = tally.by_kernel
        self._look()

    def idle_reason(self) -> str:
        """Why no copy can be taken now (``no-reader``, ``hwm``), or "" when one can."""
        readers = self.readers()
        if not readers:
            return "no-reader"
        return "" if any(p.writable for p in readers) else "hwm"

    def peers_changed(self) -> None:
        """The capture socket's readers changed (its observer's call): look now."""
        if self._watched is not None:
            self._settle(self.idle_reason())

    def _look(self) -> None:
        self._timer = None
        self._settle(self.idle_reason())
        if not self.socket.closed:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # (made outside a loop: no timer; the readers' changes and
                return  # each publish still settle the kernel's turn)
            self._timer = loop.call_later(WATCH_INTERVAL, self._look)

    def _settle(self, reason: str) -> None:
        """Count the kernel's messages since the last look as dropped copies, then hand the
        bridge to the kernel (``reason``: none can be taken) or to the Python step ("")."""
        if self._watched is None:
            return
        forwarded = self._tally.by_kernel - self._by_kernel
        if forwarded:
            self._by_kernel += forwarded
            self._drop(self._idle or "no-reader", forwarded)
        self._idle = reason
        self._watched[0] = not reason

    def readers(self) -> list[Any]:
        """The pipes that take copies now: connected and holding a subscription (a SUB that
        connected but whose SUBSCRIBE has not arrived gets nothing from a PUB)."""
        sock = self.socket
        if sock.closed:
            return []
        filters, out = sock.pattern.filters, sock.routing.out
        # by the routes' keys: a pipe's own routing_id is set only once pipe_ready returned,
        # and pipe_ready tells the observer (an nng sub0 is a reader from then on)
        return [p for rid, p in sock.routing.routes.items() if filters.get(rid) and p in out]

    def put(self, direction: int, fin: str, fout: str, msg: Message, out: Message,
            in_pipe: bytes, out_pipe: bytes) -> None:
        if len(self._queue) >= CAPTURE_QUEUE:
            self._drop("queue-full")
            return
        self._queue.append(Record(direction, fin, fout, in_pipe, out_pipe, msg.hops + msg.body,
                                  out.hops + out.body, time.time_ns()))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def _drop(self, reason: str, count: int = 1) -> None:
        self._dropped[reason][0] += count
        now = time.monotonic()
        if now - self._logged >= 1.0:  # one line a second at most
            self._logged = now
            log.info("capture.drop", bridge=self.bridge, reason=reason, count=count,
                     dropped=sum(c[0] for c in self._dropped.values()))

    def flush(self) -> None:
        """Publish what the queue holds (the loop calls this once per pass with records)."""
        self._scheduled = False
        queue, sock = self._queue, self.socket
        if not queue:
            return
        readers = self.readers()
        if not readers:
            self._drop("no-reader", len(queue))
            queue.clear()
            self._settle("no-reader")  # the kernel's turn, until a reader comes
            return
        frames_only = self.format == "frames"
        published = 0
        while queue:
            record = queue.popleft()
            if not any(p.writable for p in readers):  # every reader at its mark: no encoding
                self._drop("hwm")
                self._settle("hwm")  # the kernel's turn, until a reader can take one again
                continue
            frames = record.sent if frames_only else tuple(pack_record(record))
            sock.send_now(Message((), frames))
            published += 1
        self._published[0] += published

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._settle(self._idle)  # the kernel's last messages, counted
        if self._queue:  # copies not yet published: the endpoint goes, nobody takes them
            self._drop("no-reader", len(self._queue))
            self._queue.clear()
        self._metrics.release(self._published, *self._dropped.values())
        self._metrics.gauges.pop(self._readers, None)
        self.socket.close(0)


__all__ = ["CAPTURE_QUEUE", "REPLY", "REQUEST", "STAT_ORDER", "CapturePublisher", "Record",
           "Tap", "pack_record", "parts_of", "unpack_record"]
