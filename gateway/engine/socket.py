"""The asyncio engine's socket: listeners, dialers, routing over pipes, the inbox, the API.

Data path (hot): ``Pipe.data_received`` -> codec (every whole message of the read in one call)
-> ``Socket.pipe_messages`` -> pattern.receive -> the device's ``sink``, a waiting ``recv``
future, or the bounded inbox. Sends go from the pattern straight into the chosen pipe
(``gateway.engine.pipe``); a pipe whose write buffer passed the high-water mark is skipped by
load balancing until it drains.

Bounds: each pipe may have at most ``hwm`` messages in the inbox (then its reading is paused:
TCP back-pressure reaches the peer); each pipe's write buffer stops at ``hwm * 1 KiB``: load
balancing skips such a pipe (``send_msg`` waits), a routed send to it drops the message
(``PeerBusy`` with ``router_mandatory``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import random
import ssl
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from gateway.engine.pipe import Pipe, SniffingPipe, check_body, make_codec
from gateway.errors import (
    Closed,
    ConfigError,
    Drop,
    LocalProtocolError,
    PeerBusy,
    PeerGone,
    TransportError,
)
from gateway.logging import Throttle, get_logger, shown
from gateway.message import Message
from gateway.metrics import METRICS
from gateway.patterns.kinds import make_pattern
from gateway.patterns.pairing import SP_ONLY_KINDS, canonical_kind
from gateway.patterns.pubsub import MAX_SUBSCRIPTIONS, Publisher, Subscriber
from gateway.patterns.reqrep import SP, Pattern, Router, split_zmtp
from gateway.plugins import WireSpec, registry
from gateway.security import Security, hook_authenticator
from gateway.tls import TlsSettings
from gateway.transport import KeepAlive, dial, listen, takes_backlog
from gateway.url import Endpoint, parse
from gateway.wire.events import HandshakeComplete, Subscription
from gateway.wire.sniff import ANY

log = get_logger("gateway.engine")

_RUNNING_PIPE_IDS = [random.getrandbits(31)]


def _next_sp_pipe_id() -> bytes:
    _RUNNING_PIPE_IDS[0] = (_RUNNING_PIPE_IDS[0] + 1) & 0x7FFFFFFF or 1
    return _RUNNING_PIPE_IDS[0].to_bytes(4, "big")


#: TCP keepalive of every TCP pipe unless told otherwise: idle 60 s, probes every 10 s, 6 probes
DEFAULT_KEEPALIVE = KeepAlive()


#: seconds between two counts of the process's open descriptors (listing /proc/self/fd costs
#: O(open descriptors): never once per accepted connection)
FD_RECOUNT = 1.0
_fd_count: list[float | None] = [-FD_RECOUNT, None]  # [monotonic time of the count, ratio]


def open_files_ratio() -> float | None:
    """Open file descriptors over the soft RLIMIT_NOFILE (None where that cannot be read),
    counted at most once every :data:`FD_RECOUNT` seconds: a storm of accepts costs O(1) each."""
    import time

    now = time.monotonic()
    last = _fd_count[0]
    assert last is not None
    if now - last < FD_RECOUNT:
        return _fd_count[1]
    _fd_count[0] = now
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        used = len(os.listdir("/proc/self/fd"))
    except (ImportError, OSError):
        ratio = None
    else:
        infinite = soft <= 0 or soft == getattr(resource, "RLIM_INFINITY", -1)
        ratio = None if infinite else used / soft
    _fd_count[1] = ratio
    return ratio


METRICS.gauge("gateway_open_files_ratio", lambda: open_files_ratio() or 0.0)

#: connections a listener accepts at once unless told (``max_connections``)
MAX_CONNECTIONS = 10_000

#: Seconds between two warnings about failed dials to one endpoint (the counter is exact).
DIAL_WARN_INTERVAL = 10.0
#: Seconds between two warnings about the same failed handshake (endpoint, reason and what
#: the peer announced) on one socket; the counter is exact, the next line says how many
#: were held back.
HANDSHAKE_WARN_INTERVAL = 10.0


def _dial_reason(exc: OSError) -> str:
    """``refused`` (nobody listens), ``unreachable`` (no route, host down), ``timeout``, or
    ``error``: the label of ``gateway_dial_failures_total``."""
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, TimeoutError):
        return "timeout"
    if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.ENETDOWN,
                     errno.ENOENT):  # ENOENT: an ipc path nobody bound
        return "unreachable"
    return "error"


class _Gone:
    """Stands for a pipe that went away in the inbox (an XPUB's cancels when a subscriber
    leaves): its messages hold back no reading."""

    def enqueued(self) -> None:
        pass

    def dequeued(self) -> None:
        pass


_GONE: Any = _Gone()


def _topic(topic: bytes | str) -> bytes:
    return topic.encode() if isinstance(topic, str) else bytes(topic)


class Socket:
    """A native socket over any wires: REQ, REP, DEALER, ROUTER (``raw=True``: xreq/xrep);
    PUB, SUB, XPUB, XSUB; PUSH, PULL; PAIR; PAIR1 (SP only). nng's names work too (``pub0``,
    ``sub0``, ``push0``, ``pull0``, ``pair0``, ``pair1``); on SP a PUB speaks pub0, a SUB sub0,
    a PAIR pair0, and XPUB/XSUB are raw pub0/sub0.

    Use inside a running asyncio loop::

        async with gateway.Socket("REQ") as s:
            s.connect("zmq+tcp://127.0.0.1:5555")
            await s.send(b"hello")
            reply = await s.recv()

    Limits on what peers send: ``max_message_size`` (bytes, 1 MiB), ``handshake_timeout``
    (seconds until the greeting/header exchange is done, 10) and ``message_timeout`` (seconds a
    message may take to arrive once its first bytes did, 10; ``None`` or 0: no limit). A peer
    that breaks one is disconnected (``gateway_pipes_closed_total{reason}``); the socket and its
    other pipes go on. ``backlog``: the listen queue of ``bind`` (``None``: the system maximum,
    ``net.core.somaxconn`` on Linux).

    Publish-subscribe (``gateway.patterns.pubsub``): ``subscribe`` (a prefix or a list of them)
    subscribes a SUB/XSUB from the start, :meth:`subscribe`/:meth:`unsubscribe` later (counted);
    an XSUB also sends ``01|00 + prefix`` messages. An XPUB receives ``01|00 + prefix`` when a
    prefix gets its first subscriber or loses its last (``verbose=True``: every subscribe).
    ``filter``: a SUB/XSUB filters what it receives by its prefixes (default: SUB yes, XSUB no).
    ``max_subscriptions``: prefixes one subscriber may hold at a publisher, or a SUB may hold.
    PUB never blocks (a subscriber past ``hwm`` loses the message, counted ``hwm``); PUSH and
    PAIR wait for a writable peer; PAIR takes one peer and refuses others (``pair-busy``).
    """

    def __init__(self, kind: str, raw: bool = False, *, hwm: int = 1000, ttl: int = 8,
                 max_message_size: int = 1 << 20, identity: bytes = b"",
                 linger: float = 1.0, handshake_timeout: float = 10.0,
                 message_timeout: float | None = 10.0, backlog: int | None = None,
                 reconnect_ivl: float = 0.1, reconnect_ivl_max: float = 2.0,
                 resend_interval: float = 60.0, relaxed: bool = False,
                 router_mandatory: bool = False, name: str = "",
                 security: Security | None = None,
                 tls: TlsSettings | None = None,
                 allow: tuple[str, ...] | None = None,
                 max_connections: int | None = MAX_CONNECTIONS,
                 subscribe: bytes | str | list[bytes] | tuple[bytes, ...] = (),
                 verbose: bool = False, filter: bool | None = None,
                 max_subscriptions: int = MAX_SUBSCRIPTIONS,
                 router_handover: bool = False,
                 heartbeat_ivl: float = 0.0, heartbeat_ttl: float = 0.0,
                 heartbeat_timeout: float | None = None,
                 tcp_keepalive: KeepAlive | None = DEFAULT_KEEPALIVE) -> None:
        given = kind.upper()
        self.kind, raw = canonical_kind(kind, raw)
        self.raw = raw
        self.pattern: Pattern = make_pattern(self.kind, raw, ttl=ttl, relaxed=relaxed,
                                             resend_interval=resend_interval, verbose=verbose,
                                             filter=filter, max_subscriptions=max_subscriptions)
        if max_subscriptions < 1:
            raise ConfigError("max_subscriptions must be at least 1")
        topics = [subscribe] if isinstance(subscribe, bytes | str) else list(subscribe)
        if topics:
            if not isinstance(self.pattern, Subscriber):
                raise ConfigError(f"subscribe is a SUB/XSUB setting, not {given}'s")
            for t in topics:
                self.pattern.subscribe(_topic(t))
        if hwm < 1:
            raise ConfigError("hwm must be at least 1")
        self.hwm = hwm
        if message_timeout is not None and message_timeout < 0:
            raise ConfigError("message_timeout must be positive (None or 0: no deadline)")
        if backlog is not None and backlog < 0:
            raise ConfigError("backlog must be at least 0 (None: the system maximum)")
        self.max_message_size = max_message_size
        self.identity = identity
        self.linger = linger
        self.handshake_timeout = handshake_timeout
        #: seconds a message may take to arrive once its first bytes did (None or 0: no limit)
        self.message_timeout = message_timeout
        #: listen backlog for ``bind`` (None: the transport's default, the system maximum)
        self.backlog = backlog
        self.reconnect_ivl = reconnect_ivl
        self.reconnect_ivl_max = reconnect_ivl_max
        self.resend_interval = resend_interval
        self.router_mandatory = router_mandatory
        self.router_handover = router_handover
        if heartbeat_ivl < 0 or heartbeat_ttl < 0 or (heartbeat_timeout or 0) < 0:
            raise ConfigError("heartbeat_ivl, heartbeat_ttl and heartbeat_timeout must be >= 0")
        if heartbeat_ttl > 6553.5:
            raise ConfigError("heartbeat_ttl must be at most 6553.5 s (tenths of a second, u16)")
        self.heartbeat_ivl = heartbeat_ivl
        self.heartbeat_ttl = heartbeat_ttl
        self.heartbeat_timeout = heartbeat_timeout
        self.tcp_keepalive = tcp_keepalive
        #: ZeroMQ PLAIN or CURVE (``gateway.security``; None: NULL); ZMTP endpoints only
        self.security = security
        #: SP over TLS settings (``gateway.tls``) for ``sp+tls+tcp://`` endpoints
        self.tls = tls
        #: listener limits: accepted clients' networks, and how many may be connected at once
        self.allow = tuple(ipaddress.ip_network(n, strict=False) for n in allow or ())
        self.max_connections = max_connections
        self._accepted = 0  # connections accepted by this socket's listeners, still open
        self._refusals = Throttle(HANDSHAKE_WARN_INTERVAL)  # connection.refused lines
        self._fd_warned = False
        self._tls_contexts: dict[bool, ssl.SSLContext] = {}
        self.name = name or (f"x{self.kind}" if raw and self.kind in ("REQ", "REP", "PUB", "SUB")
                             else self.kind)
        self.closed = False
        self._pipes: set[Pipe] = set()
        self._routes: dict[bytes, Pipe] = {}  # routing id -> ready pipe
        self._out: list[Pipe] = []  # ready pipes, round-robin order
        self._rr = 0
        self._inbox: deque[tuple[Pipe, Message]] = deque()
        self._recv_waiter: asyncio.Future[tuple[Pipe, Message]] | None = None
        self._pipe_waiters: list[asyncio.Future[None]] = []
        self._listeners: list[Any] = []
        self._dialers: list[asyncio.Task[None]] = []
        self._timer: asyncio.Handle | None = None  # at the pattern's deadline
        #: device fast path: called with each received message before the inbox; returns
        #: True when it took the message (see ``gateway.device``). Raw sockets only.
        self.sink: Callable[[Message], bool] | None = None
        #: called instead of the socket's own counter for a received message the pattern
        #: drops (``Drop``, the pipe's endpoint): a device puts it in its bridge's ledger.
        self.on_drop: Callable[[Drop, str], None] | None = None
        #: called with the routing id of a ready pipe that went away (a device counts the
        #: requests it had in flight there as lost, at once).
        self.on_pipe_lost: Callable[[bytes], None] | None = None
        self._last_zmtp_id = random.getrandbits(32)
        #: handshake.failed lines: one per endpoint, reason and peer variant every interval, in
        #: a bounded table (peers choose what they announce)
        self._hs_warned = Throttle(HANDSHAKE_WARN_INTERVAL)

    # -- endpoints -------------------------------------------------------------------------
    def _endpoint(self, url: str) -> tuple[Endpoint, WireSpec, Any]:
        reg = registry()
        ep = parse(url, transports=frozenset(reg.transports))
        if ep.backend not in (None, "native"):
            raise ConfigError(f"{url}: a native Socket cannot use backend={ep.backend}")
        if ep.family == ANY:
            return ep, self._any_wire(ep, reg), reg.transport(ep.transport)
        if self.kind in SP_ONLY_KINDS and ep.family != SP:
            raise ConfigError(f"{url}: {self.kind} is an SP socket type (ZeroMQ has PAIR)")
        if self.security is not None and ep.family == SP:
            raise ConfigError(f"{url}: {self.security.mechanism} is ZeroMQ security; an SP "
                              "endpoint cannot use it")
        transport = reg.transport(ep.transport)
        if getattr(transport, "sp_only", False) and ep.family != SP:
            raise ConfigError(f"{url}: {ep.transport} is an SP transport (nng's); for ZeroMQ "
                              "use tcp (with CURVE for security)")
        if self.tls is not None and not getattr(transport, "tls", False):
            raise ConfigError(f"{url}: TLS settings need an sp+tls+tcp:// or sp+wss:// endpoint")
        return ep, reg.wire(ep.wire), transport

    def _any_wire(self, ep: Endpoint, reg: Any) -> WireSpec:
        """``any+``: one listener for both wires (``gateway.wire.sniff``); what it cannot be."""
        if self.kind in SP_ONLY_KINDS:
            raise ConfigError(f"{ep.url}: {self.kind} is an SP socket type; it cannot take "
                              "ZeroMQ peers on an any+ endpoint")
        if self.security is not None:
            raise ConfigError(f"{ep.url}: {self.security.mechanism} would not cover the SP "
                              "peers of an any+ endpoint; bind zmq+ and sp+ endpoints apart")
        if self.tls is not None:
            raise ConfigError(f"{ep.url}: TLS settings need an sp+tls+tcp:// or sp+wss:// "
                              "endpoint, not any+")
        transport = reg.transport(ep.transport)
        if getattr(transport, "sp_only", False) or getattr(transport, "tls", False):
            raise ConfigError(f"{ep.url}: any+ takes tcp or ipc (the first byte must be the "
                              "wire's own)")
        return WireSpec(ANY, ANY, reg.wire("zmtp").codec_factory)

    def _tls_context(self, server_side: bool) -> ssl.SSLContext:
        """The ``ssl`` context of this socket's TLS settings for one side (made once)."""
        ctx = self._tls_contexts.get(server_side)
        if ctx is None:
            settings = self.tls or TlsSettings()
            if server_side and not settings.cert:
                raise ConfigError("a bound sp+tls+tcp:// or sp+wss:// endpoint needs tls_cert")
            ctx = self._tls_contexts[server_side] = settings.context(server_side)
        return ctx

    def bind(self, url: str) -> str:
        """Listen on ``url`` now; return it with the real address (``:0`` -> the real port)."""
        self._check_open()
        ep, wire, transport = self._endpoint(url)
        asyncio.get_running_loop()  # a clear error outside asyncio
        shown = [ep.url]  # accepted pipes log the real address, not ":0"
        if self.backlog is not None and not takes_backlog(transport):
            raise ConfigError(f"{url}: transport {ep.transport!r} takes no listen backlog")
        try:
            if getattr(transport, "tls", False):
                listener = transport.listen(
                    ep.address, lambda: self._new_pipe(wire, transport, shown[0], accepted=True),
                    backlog=self.backlog, tls=self._tls_context(True),
                    keepalive=self.tcp_keepalive)
            else:
                listener = listen(transport, ep.address,
                                  lambda: self._new_pipe(wire, transport, shown[0],
                                                         accepted=True),
                                  backlog=self.backlog, keepalive=self.tcp_keepalive)
        except OSError as exc:
            raise TransportError(f"cannot bind {url}: {exc.strerror or exc}") from exc
        self._listeners.append(listener)
        real = shown[0] = ep.with_address(listener.address).url
        log.info("listening", url=real, socket=self.name)
        return real

    def connect(self, url: str) -> None:
        """Dial ``url`` in the background, redialling with backoff until closed."""
        self._check_open()
        ep, wire, transport = self._endpoint(url)
        if ep.family == ANY:
            raise ConfigError(f"{ep.url}: any+ listens for both wires; a dial says which: "
                              f"zmq+{ep.transport}:// or sp+{ep.transport}://")
        dial_options: dict[str, Any] = {}
        if getattr(transport, "tls", False):
            dial_options = {"tls": self._tls_context(False),
                            "server_hostname": self.tls.server_name if self.tls else None}
        task = asyncio.get_running_loop().create_task(
            self._dial_loop(ep, wire, transport, dial_options))
        self._dialers.append(task)

    async def _dial_loop(self, ep: Endpoint, wire: WireSpec, transport: Any,
                         dial_options: dict[str, Any]) -> None:
        delay = self.reconnect_ivl
        loop = asyncio.get_running_loop()
        warned_at, held = -DIAL_WARN_INTERVAL, 0  # one warning per endpoint and interval
        while not self.closed:
            lost: asyncio.Future[bool] = loop.create_future()
            pause = delay * (0.5 + random.random())
            try:
                factory: Callable[[], Pipe] = partial(self._new_pipe, wire, transport, ep.url,
                                                      lost)
                await dial(transport, ep.address, factory, keepalive=self.tcp_keepalive,
                           **dial_options)
            except OSError as exc:
                lost.cancel()
                reason = _dial_reason(exc)
                METRICS.inc("gateway_dial_failures_total", reason=reason)
                if loop.time() - warned_at >= DIAL_WARN_INTERVAL:
                    log.warning("dial.failed", url=ep.url, reason=reason, error=str(exc),
                                retry_in=round(pause, 3), socket=self.name,
                                **({"suppressed": held} if held else {}))
                    warned_at, held = loop.time(), 0
                else:
                    held += 1
            else:
                if await lost:
                    delay = self.reconnect_ivl  # it worked for a while: start over
                    pause = delay * (0.5 + random.random())
                    warned_at, held = -DIAL_WARN_INTERVAL, 0
            if self.closed:
                break
            await asyncio.sleep(pause)
            delay = min(delay * 2, self.reconnect_ivl_max)

    def _new_pipe(self, wire: WireSpec, transport: Any, endpoint: str,
                  lost: asyncio.Future[bool] | None = None, accepted: bool = False) -> Pipe:
        made: list[Pipe] = []  # the authenticator asks the pipe for the peer's address
        mechanism = None
        if self.security is not None and wire.family != SP:
            mechanism = self.security.mechanism_for(hook_authenticator(
                self.security, self.name, lambda: made[0].peer if made else ""))
        settings: dict[str, Any] = dict(
            hwm=self.hwm, handshake_timeout=self.handshake_timeout,
            message_timeout=self.message_timeout, name=self.name, lost=lost,
            heartbeat_ivl=self.heartbeat_ivl, heartbeat_ttl=self.heartbeat_ttl,
            heartbeat_timeout=self.heartbeat_timeout)
        pipe: Pipe
        if wire.family == ANY:
            pipe = SniffingPipe(self, partial(self._codec_of, transport), endpoint, **settings)
        else:
            codec = make_codec(wire.codec_factory, wire.family, self.kind, self.raw,
                               identity=self.identity, max_message_size=self.max_message_size,
                               transport=transport, mechanism=mechanism)
            pipe = Pipe(self, codec, wire.family, endpoint, **settings)
        made.append(pipe)
        if accepted:
            pipe.admit = self._admit
        if self.closed:
            pipe.close(0)  # aborts as soon as it is connected
        else:
            self._pipes.add(pipe)
        return pipe

    def _codec_of(self, transport: Any, family: str) -> Any:
        """A codec of ``family`` for a pipe of an ``any+`` listener (no security there)."""
        return make_codec(registry().wire(family).codec_factory, family, self.kind, self.raw,
                          identity=self.identity, max_message_size=self.max_message_size,
                          transport=transport)

    def family_of(self, routing_id: bytes) -> str | None:
        """The wire family (``"zmtp"``, ``"sp"``) of the ready pipe with ``routing_id``, or
        None when there is none (an ``any+`` listener's pipes differ; a device asks per
        message)."""
        pipe = self._routes.get(routing_id)
        return None if pipe is None else pipe.family

    def _admit(self, pipe: Pipe) -> bool:
        """A listener's limits on a fresh connection: ``allow`` networks, ``max_connections``;
        a refusal is counted (``gateway_refused_connections_total``) and logged (one warning
        per reason every ``HANDSHAKE_WARN_INTERVAL`` seconds). Also watches the process's
        file descriptors (a warning once above 90 % of RLIMIT_NOFILE)."""
        self._watch_fds()
        reason = ""
        if self.allow:
            host = pipe.peer.rpartition(":")[0].strip("[]")
            try:
                address = ipaddress.ip_address(host)
            except ValueError:  # ipc, inproc: no network address to check
                address = None
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                address = address.ipv4_mapped  # an IPv4 client of a dual-stack [::] listener
            if address is not None and not any(address in net for net in self.allow):
                reason = "not-allowed"
        if not reason and self.max_connections is not None \
                and self._accepted >= self.max_connections:
            reason = "max-connections"
        if reason:
            METRICS.inc("gateway_refused_connections_total", socket=self.name, reason=reason)
            held = self._refusals(reason)
            if held is not None:
                log.warning("connection.refused", socket=self.name, endpoint=pipe.endpoint,
                            peer=pipe.peer, reason=reason,
                            limit=(self.max_connections if reason == "max-connections"
                                   else ",".join(map(str, self.allow))),
                            **({"suppressed": held} if held else {}))
            return False
        self._accepted += 1
        pipe.accepted = True
        return True

    def _watch_fds(self) -> None:
        ratio = open_files_ratio()
        if ratio is None:
            return
        if ratio > 0.9 and not self._fd_warned:
            self._fd_warned = True
            log.warning("fd.limit", socket=self.name, used=f"{ratio:.0%}",
                        advice="raise the open files limit (ulimit -n, LimitNOFILE=) or set "
                               "max_connections")

    # -- pipe events (gateway.engine.pipe.PipeOwner) -----------------------------------------
    def pipe_ready(self, pipe: Pipe, event: HandshakeComplete) -> bytes | None:
        pattern = self.pattern
        if pattern.exclusive and self._routes:  # PAIR: one peer (libzmq, nng pair0/pair1)
            pipe.abort("pair-busy", f"{self.kind} already has its peer")
            return None
        if pipe.family == SP:
            rid = _next_sp_pipe_id()
        elif event.identity and self.pattern.routed:
            rid = event.identity
            old = self._routes.get(rid)
            if old is not None:
                if not self.router_handover:
                    pipe.abort("duplicate-identity", repr(rid)[:80])
                    return None
                if old.authenticated_as != pipe.authenticated_as:
                    # with CURVE/PLAIN only the same client key or user may take a routing id
                    # over: another client would receive the replies to the first one's requests
                    pipe.abort("duplicate-identity", f"{rid!r}"[:80] + " is another client's")
                    return None
                self._hand_over(old, pipe)
        else:
            self._last_zmtp_id = (self._last_zmtp_id + 1) & 0xFFFFFFFF
            rid = b"\x00" + self._last_zmtp_id.to_bytes(4, "big")
        self._routes[rid] = pipe
        self._out.append(pipe)
        log.info("pipe.up", endpoint=pipe.endpoint, peer=pipe.peer, peer_type=event.peer_type,
                 socket=self.name,
                 **({"zmtp": f"{event.version[0]}.{event.version[1]}"} if pipe.family != SP else {}))
        for sub in pattern.attach(rid, pipe.family):  # a SUB's subscriptions to a new publisher
            pipe.write_subscription(sub)
        self._wake_senders()
        return rid

    def _hand_over(self, old: Pipe, new: Pipe) -> None:
        """ROUTER_HANDOVER as libzmq does it (router.cpp ``identify_peer``): the old pipe gets a
        fresh integral id (so that its loss touches nothing of the routing id's) and is closed;
        the caller gives the routing id to ``new``."""
        rid = old.routing_id
        del self._routes[rid]
        self._last_zmtp_id = (self._last_zmtp_id + 1) & 0xFFFFFFFF
        old.routing_id = b"\x00" + self._last_zmtp_id.to_bytes(4, "big")
        self._routes[old.routing_id] = old
        with contextlib.suppress(ValueError):
            self._out.remove(old)  # nothing more goes out on it
        old.abort("handover", f"routing id {rid!r} taken over by {new.peer or 'a new peer'}")

    def pipe_lost(self, pipe: Pipe) -> None:
        self._pipes.discard(pipe)
        if getattr(pipe, "accepted", False):
            pipe.accepted = False
            self._accepted -= 1
        if not pipe.ready:
            if not self.closed and not pipe.closing:
                self._handshake_failed(pipe)
            return
        if self._routes.get(pipe.routing_id) is pipe:
            del self._routes[pipe.routing_id]
        with contextlib.suppress(ValueError):
            self._out.remove(pipe)
        if not self.closed:
            log.info("pipe.down", endpoint=pipe.endpoint, peer=pipe.peer,
                     reason=pipe.close_reason or "peer-closed",
                     socket=self.name)
            if self.on_pipe_lost is not None:
                self.on_pipe_lost(pipe.routing_id)
            for note in self.pattern.detach(pipe.routing_id, pipe.family):
                self._deliver(_GONE, note)  # an XPUB's cancels of what the peer held
            if self.pattern.on_pipe_lost(pipe.routing_id, pipe.family):
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = asyncio.get_running_loop().call_soon(self._on_timer)

    def _handshake_failed(self, pipe: Pipe) -> None:
        """A connection ended before its handshake completed: count it; one warning per
        endpoint, reason and peer variant every ``HANDSHAKE_WARN_INTERVAL`` seconds."""
        reason = pipe.fail_reason or "peer-closed"
        fields = dict(pipe.fail_fields)
        detail = pipe.fail_detail
        if not pipe.fail_reason:
            detail = (f"the peer closed the connection after {pipe.received_before_handshake} "
                      "bytes, before the handshake completed")
            if pipe.lost_error:
                detail += f" ({pipe.lost_error})"
            fields["wire"] = pipe.family
            stage = getattr(pipe.codec, "handshake_stage", "")
            if stage:
                fields["stage"] = stage
            if stage == "ready":
                # What was seen: a 3.x greeting with our mechanism, then the end, no READY.
                # libzmq does exactly this when it refuses our READY's Socket-Type (it checks
                # ours before it sends its own), so it is counted as ``pairing``; the line
                # says what came and that the refusal is inferred (a crash looks the same).
                ours = pipe.codec.socket_type
                reason = "pairing"
                detail += (f"; its greeting came (mechanism matched), its READY did not: a "
                           f"libzmq peer closes so when it refuses this socket's type ({ours})")
                fields.update(socket_type=ours, inferred="true")
        METRICS.inc("gateway_handshake_failures_total", socket=self.name, reason=reason)
        variant = "/".join(fields.get(k, "") for k in ("peer_version", "peer_mechanism",
                                                        "peer_type"))
        held = self._hs_warned((pipe.endpoint, reason, variant))
        if held is None:
            return
        if "peer_type" in fields:  # the peer chose it: one line stays one line
            fields["peer_type"] = shown(fields["peer_type"])
        log.warning("handshake.failed", endpoint=pipe.endpoint, peer=pipe.peer, reason=reason,
                    detail=shown(detail, 300), socket=self.name, **fields,
                    **({"suppressed": held} if held else {}))

    def pipe_writable(self, pipe: Pipe) -> None:
        if pipe.writable:
            self._wake_senders()

    def _wake_senders(self) -> None:
        waiters, self._pipe_waiters = self._pipe_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def pipe_messages(self, pipe: Pipe, batch: list[tuple[bytes, ...]]) -> None:
        receive = self.pattern.receive
        rid, family = pipe.routing_id, pipe.family
        inbox = self._inbox
        for parts in batch:
            if pipe.close_reason:  # closed by what came before: the rest goes with it
                return
            try:
                msg = receive(rid, family, parts)
            except Drop as drop:
                self._dropped(drop, pipe.endpoint)
                continue
            if msg is None:
                continue
            sink = self.sink  # (_deliver, inline: once per message)
            if sink is not None and not inbox and sink(msg):
                continue
            waiter = self._recv_waiter
            if waiter is not None and not waiter.done():
                self._recv_waiter = None
                waiter.set_result((pipe, msg))
                continue
            inbox.append((pipe, msg))
            pipe.enqueued()

    def pipe_subscription(self, pipe: Pipe, event: Subscription) -> None:
        try:
            msg = self.pattern.subscription(pipe.routing_id, event)
        except Drop as drop:
            self._dropped(drop, pipe.endpoint)
            return
        if msg is not None:
            self._deliver(pipe, msg)

    def _dropped(self, drop: Drop, endpoint: str) -> None:
        if self.on_drop is not None:  # a device accounts for its own sockets
            self.on_drop(drop, endpoint)
            return
        METRICS.inc("gateway_socket_dropped_messages_total", reason=drop.reason)
        log.info("drop", reason=drop.reason, endpoint=endpoint, socket=self.name)

    def _deliver(self, pipe: Pipe, msg: Message) -> None:
        sink = self.sink
        if sink is not None and not self._inbox and sink(msg):
            return
        waiter = self._recv_waiter
        if waiter is not None and not waiter.done():
            self._recv_waiter = None
            waiter.set_result((pipe, msg))
            return
        self._inbox.append((pipe, msg))
        pipe.enqueued()

    # -- message API -----------------------------------------------------------------------
    async def recv_msg(self) -> Message:
        """Receive one message: cooked sockets give ``Message((), body)``, raw ones the hops too."""
        pattern = self.pattern
        while True:
            self._check_open()
            pattern.check_recv()
            if self._inbox:
                pipe, msg = self._inbox.popleft()
                pipe.dequeued()
            else:
                waiter = self._recv_waiter = asyncio.get_running_loop().create_future()
                try:
                    pipe, msg = await waiter
                except asyncio.CancelledError:
                    if waiter.done() and not waiter.cancelled():
                        self._inbox.appendleft(waiter.result())  # nothing is lost on a timeout
                        waiter.result()[0].enqueued()
                    raise
                finally:
                    if self._recv_waiter is waiter:
                        self._recv_waiter = None
            delivered = pattern.deliver(msg)
            if delivered is not None:
                if self._timer is not None:
                    self._schedule_timer()
                return delivered

    def can_send(self) -> bool:
        """True when ``try_send`` would send now (routed sockets always route, drop or raise;
        PUB/XPUB/XSUB always send, dropping for a subscriber past its mark)."""
        pattern = self.pattern
        if pattern.routed or pattern.fanout:
            return True
        for pipe in self._out:  # a loop, not any(genexpr): once per forwarded request
            if pipe.writable:
                return True
        return False

    def try_send(self, msg: Message) -> bytes | None:
        """Send without waiting; return the routing id of the pipe it went to, or None when a
        load-balanced socket has no writable pipe.

        Routed sockets (ROUTER, xrep, REP) always return the target's id, like libzmq's ROUTER:
        the message went out, or it was dropped and counted because its peer is gone (reason
        ``unroutable``) or its pipe is at the high-water mark (``hwm``). With
        ``router_mandatory`` those raise ``PeerGone`` / ``PeerBusy`` instead.
        """
        self._check_open()
        pattern = self.pattern
        if pattern.fanout:
            self._fanout(msg)
            return b""
        if pattern.routed:
            target = pattern.peek_target(msg)
            pipe = self._routes.get(target) if target is not None else None
            if pipe is not None:
                check_body(pipe, msg)  # before the pattern's state changes
                if not pipe.writable and self.router_mandatory:
                    raise PeerBusy(f"peer {target!r} is at its high-water mark")
            target, rest = pattern.prepare_send(msg)
            if pipe is None:
                if self.router_mandatory:
                    raise PeerGone(f"no peer with routing id {target!r}")
                METRICS.inc("gateway_socket_dropped_messages_total", reason="unroutable")
                return target
            if not pipe.writable:  # never buffer past the mark (libzmq's ROUTER drops too)
                pipe.dropped("hwm")
                return target
            pipe.write(pattern.envelope(rest, pipe.family))
            pattern.sent(pipe.routing_id, pipe.family)
            return target
        pipe = self._pick()
        if pipe is None:
            return None
        self._send_on(pipe, msg)
        return pipe.routing_id

    def raw_sender(self) -> Callable[[Message], bytes | None] | None:
        """``try_send`` for a device, specialised once: for a raw request-reply socket (a raw
        REQ/DEALER that load-balances, a raw REP/ROUTER that routes by the first hop) whose
        pattern keeps no state and leaves the envelope as it is; None for any other socket.
        Same results as :meth:`try_send` (the pipe's routing id, None when no pipe is
        writable; the same drops and errors), in fewer calls per message."""
        pattern = self.pattern
        if type(pattern) is Pattern:  # raw REQ, DEALER: load-balanced
            out = self._out

            def send_balanced(msg: Message) -> bytes | None:
                if self.closed:
                    raise Closed(f"{self.name} socket is closed")
                n = len(out)
                rr = self._rr
                for i in range(n):
                    idx = (rr + i) % n
                    pipe = out[idx]
                    if pipe.writable:
                        body = msg[1]
                        if pipe.family == SP and len(body) != 1:
                            raise LocalProtocolError(
                                f"SP carries exactly one body frame, not {len(body)}")
                        self._rr = idx + 1
                        hops = msg[0]
                        pipe.write_frames(hops + body if hops else body)
                        return pipe.routing_id
                return None

            return send_balanced
        if type(pattern) is Router:  # raw REP, ROUTER: to the pipe named by the first hop
            routes = self._routes

            def send_routed(msg: Message) -> bytes:
                if self.closed:
                    raise Closed(f"{self.name} socket is closed")
                hops, body = msg
                if not hops:
                    raise LocalProtocolError(
                        f"{pattern.kind} send needs the peer's routing id as first hop")
                target = hops[0]
                pipe = routes.get(target)
                if pipe is None:
                    if self.router_mandatory:
                        raise PeerGone(f"no peer with routing id {target!r}")
                    METRICS.inc("gateway_socket_dropped_messages_total", reason="unroutable")
                    return target
                if pipe.family == SP and len(body) != 1:
                    raise LocalProtocolError(f"SP carries exactly one body frame, not {len(body)}")
                if not pipe.writable:
                    if self.router_mandatory:
                        raise PeerBusy(f"peer {target!r} is at its high-water mark")
                    pipe.dropped("hwm")
                    return target
                pipe.write_frames(hops[1:] + body)
                return target

            return send_routed
        return None

    async def send_msg(self, msg: Message) -> bytes:
        """Send one message; return the routing id of the pipe it went to. Raw/ROUTER sockets
        route by ``msg.hops``; REQ/DEALER load-balance over writable pipes, waiting for one
        when there is none (as libzmq blocks)."""
        self._check_open()  # a closed socket says Closed, whatever the pattern's state
        self.pattern.check_send()
        sent = self.try_send(msg)
        if sent is None:
            pipe = await self._wait_pipe()
            self._send_on(pipe, msg)
            return pipe.routing_id
        return sent

    # -- publish-subscribe ---------------------------------------------------------------------
    def _fanout(self, msg: Message) -> None:
        """PUB/XPUB: to every pipe whose prefixes match the first frame (SP pipes: all), never
        waiting; XSUB: a subscription to every ZMTP pipe, or an upstream message."""
        pattern = self.pattern
        if isinstance(pattern, Publisher):
            first, zmsg, smsg = pattern.prepare_fanout(msg)
        else:
            assert isinstance(pattern, Subscriber)
            try:
                plan = pattern.prepare_fanout(msg)
            except Drop as drop:
                self._dropped(drop, "")
                return
            if plan is None:
                return
            if isinstance(plan, Subscription):
                self._send_subscription(plan)
                return
            first, zmsg, smsg = plan.body[0], plan, plan
        filters = pattern.filters
        for pipe in self._out:
            if first.startswith(filters.get(pipe.routing_id, ())):
                if pipe.writable:
                    pipe.write(smsg if pipe.family == SP else zmsg)
                else:  # never block, never buffer past the mark: this subscriber loses it
                    pipe.dropped("hwm")

    def _send_subscription(self, sub: Subscription) -> None:
        for pipe in self._out:
            if pipe.family != SP:  # SP pub/sub has no subscription traffic
                pipe.write_subscription(sub)

    def _subscriber(self) -> Subscriber:
        pattern = self.pattern
        if not isinstance(pattern, Subscriber):
            raise ConfigError(f"{self.name} has no subscriptions (SUB and XSUB have)")
        return pattern

    def subscribe(self, topic: bytes | str) -> None:
        """Receive messages starting with ``topic`` (``b""``: all), once more (counted)."""
        self._check_open()
        self._send_subscription(self._subscriber().subscribe(_topic(topic)))

    def unsubscribe(self, topic: bytes | str) -> None:
        """Take one subscription to ``topic`` back; the publishers hear of it with the last.
        A prefix not held is counted and logged (``unknown-cancel``), as nothing to do."""
        self._check_open()
        try:
            sub = self._subscriber().unsubscribe(_topic(topic))
        except Drop as drop:
            self._dropped(drop, "")
            return
        if sub is not None:
            self._send_subscription(sub)

    @property
    def subscriptions(self) -> tuple[bytes, ...]:
        """The prefixes a SUB/XSUB holds (each once), sorted."""
        return self._subscriber().topics

    def setsockopt(self, option: str, value: bytes | str) -> None:
        """pyzmq's ``setsockopt`` for ``"subscribe"`` / ``"unsubscribe"`` (names, any case)."""
        name = option.lower()
        if name == "subscribe":
            self.subscribe(value)
        elif name == "unsubscribe":
            self.unsubscribe(value)
        else:
            raise ConfigError(f"setsockopt: unknown option {option!r} (subscribe, unsubscribe)")

    def _send_on(self, pipe: Pipe, msg: Message) -> None:
        pattern = self.pattern
        check_body(pipe, msg)  # a refused send must not leave REQ waiting for a reply
        _, rest = pattern.prepare_send(msg)
        pipe.write(pattern.envelope(rest, pipe.family))
        if pattern.cooked:
            pattern.sent(pipe.routing_id, pipe.family, asyncio.get_running_loop().time())
            self._schedule_timer()
        else:
            pattern.sent(pipe.routing_id, pipe.family)

    def _pick(self) -> Pipe | None:
        out = self._out
        n = len(out)
        for i in range(n):
            idx = (self._rr + i) % n
            pipe = out[idx]
            if pipe.writable:
                self._rr = idx + 1
                return pipe
        return None

    async def _wait_pipe(self) -> Pipe:
        loop = asyncio.get_running_loop()
        while True:
            self._check_open()
            fut: asyncio.Future[None] = loop.create_future()
            self._pipe_waiters.append(fut)
            await fut
            pipe = self._pick()
            if pipe is not None:
                return pipe

    # -- the pattern's timer (sans-IO: the pattern says when and what) ---------------------------
    def _schedule_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.pattern.resend_deadline()
        if deadline is not None and not self.closed:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        """nng's REQ: resend the pending request (its interval passed, or its pipe went away)."""
        self._timer = None
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        pattern = self.pattern
        msg = pattern.handle_timer(loop.time())
        if msg is None:
            self._schedule_timer()
            return
        pipe = self._pick()
        if pipe is None:  # no writable pipe yet: try again shortly
            self._timer = loop.call_later(0.05, self._on_timer)
            return
        pipe.write(pattern.envelope(msg, pipe.family))
        pattern.sent(pipe.routing_id, pipe.family, loop.time())
        METRICS.inc("gateway_requests_resent_total")
        self._schedule_timer()

    # -- pyzmq-like conveniences -------------------------------------------------------------
    async def send(self, data: bytes) -> None:
        await self.send_msg(Message((), (data,)))

    async def recv(self) -> bytes:
        """The body of the next message (frames joined; ``recv_multipart``/``recv_msg`` keep them)."""
        body = (await self.recv_msg()).body
        return body[0] if len(body) == 1 else b"".join(body)

    async def send_multipart(self, frames: list[bytes] | tuple[bytes, ...]) -> None:
        frames = tuple(frames)
        if self.pattern.cooked or not self.pattern.enveloped:
            await self.send_msg(Message((), frames))
        elif self.pattern.routed:
            hops, body = split_zmtp(frames[1:])
            await self.send_msg(Message((frames[0], *hops), body))
        else:
            await self.send_msg(Message(*split_zmtp(frames)))

    async def recv_multipart(self) -> list[bytes]:
        msg = await self.recv_msg()
        pattern = self.pattern
        return list(msg.body if pattern.cooked or not pattern.enveloped else msg.hops + msg.body)

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def peers(self) -> int:
        """How many pipes finished their handshake."""
        return len(self._routes)

    @property
    def inbox_size(self) -> int:
        """How many received messages wait in the inbox (bounded: ``hwm`` per pipe)."""
        return len(self._inbox)

    async def wait_peers(self, n: int = 1, timeout: float = 10.0) -> None:
        """Wait until ``n`` pipes are up (tests and scripts: the trio habit of 'ready first')."""
        async with asyncio.timeout(timeout):
            while len(self._routes) < n:
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._pipe_waiters.append(fut)
                await fut

    def _check_open(self) -> None:
        if self.closed:
            raise Closed(f"{self.name} socket is closed")

    def close(self, linger: float | None = None) -> None:
        """Close listeners, dialers and pipes. Pending writes get ``linger`` seconds; never hangs."""
        if self.closed:
            return
        self.closed = True
        linger = self.linger if linger is None else linger
        for listener in self._listeners:
            listener.close()
        for task in self._dialers:
            task.cancel()
        if self._timer is not None:
            self._timer.cancel()
        for pipe in list(self._pipes):
            pipe.close(linger)
        exc = Closed(f"{self.name} socket is closed")
        if self._recv_waiter is not None and not self._recv_waiter.done():
            self._recv_waiter.set_exception(exc)
        for fut in self._pipe_waiters:
            if not fut.done():
                fut.set_exception(exc)
        self._pipe_waiters = []

    async def __aenter__(self) -> Socket:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()
        await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"<gateway.Socket {self.name} pipes={len(self._routes)}{' closed' if self.closed else ''}>"


__all__ = ["Socket"]
