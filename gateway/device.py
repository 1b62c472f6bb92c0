"""The device: two raw sockets and a loop each way, translating envelopes across families.

A bridge = a frontend raw socket that clients connect to (ROUTER-like: xrep / ROUTER) and a
backend raw socket that talks to servers (DEALER-like: xreq / DEALER). Either side is native or
library-backed; the device only sees ``Message``s through the raw-socket interface::

    bind(url) -> str, connect(url), async send_msg(Message), async recv_msg() -> Message, close()

Like pyzmq's devices, a ``Bridge`` records its endpoints and builds the sockets only in
``run()``. Translation (DESIGN section 6) is pure and lives in ``gateway.envelope``:

=============  ==========================  ==========================================
front -> back  request                     reply
=============  ==========================  ==========================================
same family    untouched                   untouched
zmtp -> sp     envelope -> minted token    token -> envelope (bounded table, TTL)
sp -> zmtp     backtrace -> 4-byte frames  4-byte frames -> backtrace (validated)
=============  ==========================  ==========================================

Every message that cannot cross is dropped with a reason, a log line and a counter.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from gateway import envelope
from gateway.config import Limits
from gateway.envelope import EnvelopeError, TokenTable
from gateway.errors import ConfigError, LocalProtocolError, TransportError
from gateway.logging import get_logger
from gateway.message import Message
from gateway.metrics import METRICS
from gateway.plugins import body_codec, registry
from gateway.url import Endpoint, parse

log = get_logger("gateway.device")


class RawSocket(Protocol):
    family: str

    def bind(self, url: str) -> str: ...
    def connect(self, url: str) -> None: ...
    async def send_msg(self, msg: Message) -> None: ...
    async def recv_msg(self) -> Message: ...
    def close(self, linger: float = 0.5) -> None: ...


class NativeRaw:
    """The native engine's raw socket behind the raw-socket interface."""

    def __init__(self, kind: str, family: str, *, ttl: int, max_message_size: int) -> None:
        from gateway.engine.socket import Socket

        self.family = family
        self.socket = self._sock = Socket(kind, raw=True, ttl=ttl, max_message_size=max_message_size,
                                          router_mandatory=True, name=f"device-x{kind.lower()}")
        self.send_msg = self._sock.send_msg
        self.recv_msg = self._sock.recv_msg

    def bind(self, url: str) -> str:
        return self._sock.bind(url)

    def connect(self, url: str) -> None:
        self._sock.connect(url)

    def close(self, linger: float = 0.5) -> None:
        self._sock.close(linger)


def _adapter_options(backend: str, kind: str, limits: Limits) -> dict[str, Any]:
    """The device's limits, in each library's terms."""
    if backend == "pynng":
        options: dict[str, Any] = {"recv_max_size": limits.max_message_size}
        if kind == "REP":
            options["ttl"] = limits.hop_limit
        return options
    if backend == "pyzmq" and kind == "REP":
        import zmq

        # a reply to a vanished client raises (counted as client-gone) instead of vanishing
        return {"options": {zmq.ROUTER_MANDATORY: 1, zmq.MAXMSGSIZE: limits.max_message_size}}
    if backend == "pyzmq":
        import zmq

        return {"options": {zmq.MAXMSGSIZE: limits.max_message_size}}
    return {}


def backend_of(ep: Endpoint) -> str:
    return ep.backend or "native"


def default_backends(front: Endpoint, back: Endpoint) -> tuple[Endpoint, Endpoint]:
    """Fill in ``?backend=`` where the user gave none, by measurement (``gateway bench``, 2 vCPU):

    * zmq -> zmq: pyzmq on both sides, so libzmq's own ``zmq_proxy`` forwards (hop 1.05x a
      ``zmq.proxy`` hop, 64-in-flight throughput 1.05x; native: 1.07x and 0.69x);
    * any bridge with an SP side: the native engine (cross-family hop 1.27x vs 2.66x through
      pyzmq + pynng: nng's own threads cost a handoff per message; even ``nng_device`` is 1.30x).
    """
    if front.backend and back.backend:
        return front, back
    lib = front.wire == back.wire == "zmq"
    fill = {"zmq": "pyzmq"} if lib else {}

    def pick(ep: Endpoint) -> Endpoint:
        return ep if ep.backend else replace(ep, backend=fill.get(ep.wire, "native"))

    return pick(front), pick(back)


def open_side(ep: Endpoint, kind: str, limits: Limits, *, fast: bool = False,
              context: Any = None) -> tuple[Any, str]:
    """Build the raw socket for one endpoint and bind or connect it; return it and its URL.

    ``fast``: a library socket for the poller loop of ``gateway.fastpath`` instead of an
    asyncio one.
    """
    backend = backend_of(ep)
    if backend == "native":
        sock: Any = NativeRaw(kind, ep.family, ttl=limits.hop_limit,
                              max_message_size=limits.max_message_size)
        url = ep.url
    else:
        spec = registry().adapter(backend)
        if spec.family != ep.family:
            raise ConfigError(f"backend {backend} speaks {spec.family}, not {ep.wire}: {ep.url}")
        if fast:
            from gateway import fastpath

            sock = fastpath.make_end(backend, kind, ttl=limits.hop_limit,
                                     max_message_size=limits.max_message_size, context=context)
        else:
            sock = spec.factory(kind, raw=True, **_adapter_options(backend, kind, limits))
        url = ep.lib_url
    try:
        if ep.mode == "connect":
            sock.connect(url)
            real = ep.url
        else:
            real = sock.bind(url)
            if backend != "native":
                real = f"{ep.scheme}://{real.partition('://')[2]}"
    except ConfigError:
        sock.close()
        raise
    except Exception as exc:  # OSError, TransportError, zmq.ZMQError, pynng.NNGException
        sock.close()
        if isinstance(exc, TransportError) and ep.url in str(exc):  # already says where
            raise
        raise TransportError(f"cannot {ep.mode or 'bind'} {ep.url}: {exc}") from exc
    return sock, real


@dataclass
class Bridge:
    """One bridge. ``front`` defaults to bind, ``back`` to connect (CZMQ @/> override)."""

    front: str
    back: str
    name: str = "bridge"
    limits: Limits = field(default_factory=Limits)
    on_ready: Callable[[Bridge], None] | None = None
    front_url: str = ""
    back_url: str = ""

    def __post_init__(self) -> None:
        transports = frozenset(registry().transports) | {"tcp", "ipc", "inproc"}
        front, back = parse(self.front, transports=transports), parse(self.back, transports=transports)
        front, back = default_backends(front, back)
        self._front_ep = front if front.mode else replace(front, mode="bind")
        self._back_ep = back if back.mode else replace(back, mode="connect")
        self.mode = f"{front.family}->{back.family}"
        self.table = TokenTable(self.limits.pending_tokens, self.limits.token_ttl)
        self.in_flight = 0
        self.draining = False
        self._expired_seen = 0
        self._detour = False
        self._body_codec = _body_codec_impls()  # a plugin packs multi-frame bodies
        self._front: Any = None
        self._back: Any = None

    # -- translation (the hot path) --------------------------------------------------------
    def _to_sp_body(self, msg: Message) -> Message:
        """SP carries one body frame: several go through the body-codec hook, or are refused."""
        if len(msg.body) > 1:  # none at all: no-body, from the envelope module
            packed = body_codec(msg.body, "to_sp") if self._body_codec else None
            if packed is None:
                raise EnvelopeError("multi-frame-body", f"{len(msg.body)} frames")
            return Message(msg.hops, packed)
        return msg

    def _to_zmtp_body(self, msg: Message) -> Message:
        unpacked = body_codec(msg.body, "to_zmtp") if self._body_codec else None
        return msg if unpacked is None else Message(msg.hops, unpacked)

    def _request(self, msg: Message, now: float) -> Message:
        if self.mode == "zmtp->sp":
            return envelope.zmtp_to_sp_request(self._to_sp_body(msg), self.table, now)
        if self.mode == "sp->zmtp":
            return self._to_zmtp_body(envelope.sp_to_zmtp(msg))
        return msg

    def _reply(self, msg: Message, now: float) -> Message:
        if self.mode == "zmtp->sp":
            return self._to_zmtp_body(envelope.sp_to_zmtp_reply(msg, self.table, now))
        if self.mode == "sp->zmtp":
            return envelope.zmtp_to_sp_reply(self._to_sp_body(msg))
        if not msg.hops:  # same family: the front routes by the first hop
            raise EnvelopeError("no-envelope", "reply without a routing hop")
        return msg

    def _drop(self, reason: str, direction: str, detail: str = "") -> None:
        METRICS.inc("gateway_dropped_total", reason=reason, bridge=self.name)
        log.warning("drop", bridge=self.name, direction=direction, reason=reason, detail=detail)

    async def _forward_requests(self) -> None:
        front, back, clock = self._front, self._back, time.monotonic
        while True:
            msg = await front.recv_msg()
            t0 = time.perf_counter()
            try:
                out = self._request(msg, clock())
            except EnvelopeError as exc:
                self._drop(exc.reason, "request", exc.detail)
                continue
            try:
                await back.send_msg(out)
            except LocalProtocolError as exc:
                self._drop("bad-envelope", "request", str(exc))
                continue
            if self._detour and not self._front_inbox():
                self._detour = False  # caught up: the sinks may forward directly again
            self.in_flight += 1
            METRICS.inc("gateway_forwarded_total", direction="request", bridge=self.name)
            METRICS.observe_us("gateway_hop_latency_seconds", (time.perf_counter() - t0) * 1e6)

    async def _forward_replies(self) -> None:
        front, back, clock = self._front, self._back, time.monotonic
        while True:
            msg = await back.recv_msg()
            t0 = time.perf_counter()
            try:
                out = self._reply(msg, clock())
            except EnvelopeError as exc:
                self._drop(exc.reason, "reply", exc.detail)
                continue
            try:
                await front.send_msg(out)
            except LocalProtocolError as exc:
                self._drop("bad-envelope", "reply", str(exc))
                continue
            except TransportError as exc:  # the client went away before its reply
                self._drop("client-gone", "reply", str(exc))
                continue
            self.in_flight = max(0, self.in_flight - 1)
            METRICS.inc("gateway_forwarded_total", direction="reply", bridge=self.name)
            METRICS.observe_us("gateway_hop_latency_seconds", (time.perf_counter() - t0) * 1e6)

    def _expire(self, now: float) -> None:
        self.table.expire(now)  # mint() also expires when full: count by the table's total
        expired, self._expired_seen = self.table.expired_total - self._expired_seen, self.table.expired_total
        if expired:
            self.in_flight = max(0, self.in_flight - expired)
            METRICS.inc("gateway_dropped_total", expired, reason="token-expired", bridge=self.name)
            log.warning("drop", bridge=self.name, direction="reply", reason="token-expired",
                        count=expired)

    def _front_inbox(self) -> int:
        """Requests received but not forwarded (native front only; adapters keep their own)."""
        return len(self._front.socket._inbox) if isinstance(self._front, NativeRaw) else 0

    def _install_sinks(self) -> None:
        """Native on both sides: forward inside the receiving pipe's callback (parse, translate,
        write: one loop wake-up per message). A message that cannot go out at once (no
        writable backend pipe) takes the async path below, so nothing is lost or reordered
        with respect to the queue."""
        front, back = self._front.socket, self._back.socket
        request, reply, drop, clock = self._request, self._reply, self._drop, time.monotonic
        counters = METRICS.counters
        k_req = ("gateway_forwarded_total", (("bridge", self.name), ("direction", "request")))
        k_rep = ("gateway_forwarded_total", (("bridge", self.name), ("direction", "reply")))

        def forward_request(msg: Message) -> bool:
            # while the async path holds a request (no writable backend pipe a moment ago),
            # later ones follow it there: a client's requests stay in order
            if self.draining or self._detour or not back.can_send():
                self._detour = not self.draining
                return False
            try:
                back.try_send(request(msg, clock()))
            except EnvelopeError as exc:
                drop(exc.reason, "request", exc.detail)
                return True
            self.in_flight += 1
            counters[k_req] += 1
            return True

        def forward_reply(msg: Message) -> bool:
            try:
                front.try_send(reply(msg, clock()))
            except EnvelopeError as exc:
                drop(exc.reason, "reply", exc.detail)
                return True
            except LocalProtocolError as exc:  # e.g. a multi-frame body toward an SP client
                drop("bad-envelope", "reply", str(exc))
                return True
            except TransportError as exc:
                drop("client-gone", "reply", str(exc))
                return True
            self.in_flight = max(0, self.in_flight - 1)
            counters[k_rep] += 1
            return True

        front.sink, back.sink = forward_request, forward_reply

    async def _expire_tokens(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.limits.token_ttl / 4))
            self._expire(time.monotonic())

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        """Build, bind and connect both sockets (call inside the running loop)."""
        self.fast = (os.environ.get("GATEWAY_FASTPATH", "1") != "0"
                     and "native" not in (backend_of(self._front_ep), backend_of(self._back_ep)))
        context = None
        if self.fast and self.mode == "zmtp->zmtp":  # libzmq's own proxy, on its own context
            from gateway.fastpath import proxy_context

            context = proxy_context()
        self._front, self.front_url = open_side(self._front_ep, "REP", self.limits,
                                                fast=self.fast, context=context)
        try:
            self._back, self.back_url = open_side(self._back_ep, "REQ", self.limits,
                                                  fast=self.fast, context=context)
        except BaseException:
            self._front.close()  # fast-path ends take no linger
            raise
        self.loop_kind = ("asyncio" if not self.fast else "zmq_proxy" if self.mode == "zmtp->zmtp"
                          else "poller")
        METRICS.gauge("gateway_pending_tokens", lambda: float(len(self.table)),
                      "ZeroMQ envelopes waiting for an SP reply")
        log.info("bridge.up", bridge=self.name, front=self.front_url, back=self.back_url,
                 mode=self.mode, loop=self.loop_kind)

    async def run(self, stop: asyncio.Event) -> None:
        """Forward until ``stop`` is set, then drain in-flight replies for ``grace`` seconds."""
        if self._front is None:
            self.open()
        if self.on_ready is not None:
            self.on_ready(self)
        if self.fast:
            await self._run_polling(stop)
            return
        if isinstance(self._front, NativeRaw) and isinstance(self._back, NativeRaw):
            self._install_sinks()
        requests = asyncio.create_task(self._forward_requests(), name=f"{self.name}-requests")
        replies = asyncio.create_task(self._forward_replies(), name=f"{self.name}-replies")
        expiry = asyncio.create_task(self._expire_tokens())
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait({requests, replies, stopper},
                                         return_when=asyncio.FIRST_COMPLETED)
            for task in done - {stopper}:
                task.result()  # a loop that died: raise its error
            requests.cancel()  # no new requests; replies to those in flight still cross
            self.draining = True
            deadline = time.monotonic() + self.limits.grace
            while self.in_flight and not replies.done() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            if self.in_flight:
                log.warning("bridge.drain", bridge=self.name, unanswered=self.in_flight)
            left = self._front_inbox()
            if left:  # arrived after the stop: never forwarded, never answered
                self._drop("shutdown", "request", f"{left} request(s) not forwarded")
                METRICS.inc("gateway_dropped_total", left - 1, reason="shutdown", bridge=self.name)
        finally:
            for task in (requests, replies, expiry, stopper):
                task.cancel()
            await asyncio.gather(requests, replies, expiry, stopper, return_exceptions=True)
            self.close()

    async def _run_proxy(self, stop: asyncio.Event) -> None:
        from gateway.fastpath import ZmqProxy

        proxy = ZmqProxy(self, self._front, self._back)
        worker = asyncio.ensure_future(asyncio.to_thread(proxy.run))
        try:
            while not stop.is_set() and not worker.done():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)
                await asyncio.to_thread(proxy.statistics)
            if worker.done():
                worker.result()
            deadline = time.monotonic() + self.limits.grace
            while self.in_flight and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                await asyncio.to_thread(proxy.statistics)
            if self.in_flight:
                log.warning("bridge.drain", bridge=self.name, unanswered_frames=self.in_flight)
        finally:
            if not worker.done():
                await asyncio.to_thread(proxy.terminate)
            await asyncio.gather(worker, return_exceptions=True)
            self.close()

    async def _run_polling(self, stop: asyncio.Event) -> None:
        from gateway.fastpath import ZmqEnd, poll_loop

        if isinstance(self._front, ZmqEnd) and isinstance(self._back, ZmqEnd):
            await self._run_proxy(stop)
            return

        halt, draining = threading.Event(), threading.Event()
        worker = asyncio.ensure_future(asyncio.to_thread(
            poll_loop, self, self._front, self._back, halt, draining))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({worker, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if worker.done():
                worker.result()
            draining.set()  # no new requests; replies to those in flight still cross
            deadline = time.monotonic() + self.limits.grace
            while self.in_flight and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            if self.in_flight:
                log.warning("bridge.drain", bridge=self.name, unanswered=self.in_flight)
        finally:
            halt.set()
            stopper.cancel()
            await asyncio.gather(worker, stopper, return_exceptions=True)
            self.close()

    def close(self) -> None:
        for sock in (self._front, self._back):
            if sock is not None:
                with contextlib.suppress(Exception):
                    sock.close()
        log.info("bridge.down", bridge=self.name)


def _body_codec_impls() -> bool:
    from gateway.plugins import manager

    return bool(manager().hook.gateway_body_codec.get_hookimpls())
