"""One bridge's accounting, in one place: forwarded, dropped (by reason), in flight, latency.

Every forwarder (callback path, asyncio loops, poller thread, library proxy) reports here and
nowhere else, so every route exports the same series::

    ledger = Ledger("orders")
    t0 = clock(); ...; ledger.request_forwarded(t0)
    except GatewayError as exc: ledger.refused(exc, REQUEST)

A drop is a counter (``gateway_dropped_messages_total{bridge, reason}``, always exact) and a
warning line with the bridge, direction, reason, client and detail. Lines are rate-limited per
(reason, direction, client): at most one a second, the rest summed into the next line or into a
``drop.summary`` line (``count=N``) once the second is over, so one client sending 100k
messages that cannot cross costs a few lines, not 100k. Reasons come from the one table,
:data:`gateway.errors.DROP_REASONS`; the exception's type decides the reason.
"""

from __future__ import annotations

import sys
import time
from bisect import bisect_left
from collections.abc import Callable
from time import monotonic

from gateway import kernel
from gateway.envelope import EnvelopeError
from gateway.errors import (
    DROP_REASONS,
    Drop,
    LocalProtocolError,
    PeerBusy,
    PeerGone,
    TransportError,
)
from gateway.logging import get_logger
from gateway.message import Message
from gateway.metrics import BUCKETS, METRICS, Key, Registry

REQUEST, REPLY = "request", "reply"
#: The forwarders' clock: one reading per message dates its token and times its hop. Monotonic;
#: on Windows before Python 3.13 ``time.monotonic`` ticks every 15.6 ms, so there the
#: performance counter (also monotonic) serves.
clock = (time.perf_counter if sys.platform == "win32" and sys.version_info < (3, 13)
         else time.monotonic)
LOG_INTERVAL = 1.0  # seconds between two drop lines of one (reason, direction, client)
_QUIET_KEYS = 4096  # bound on the rate limiter's memory; the oldest are summarised first
log = get_logger("gateway.device")


def client_of(msg: Message | None) -> bytes:
    """Who a message comes from or goes to (its first hop), for the drop log's rate limit."""
    return msg[0][0] if msg is not None and msg[0] else b""


def classify(exc: BaseException, direction: str) -> str:
    """The drop reason for an error met while forwarding one message ``direction``."""
    if isinstance(exc, EnvelopeError | Drop):
        return exc.reason
    if isinstance(exc, PeerBusy):
        return "hwm"
    if isinstance(exc, PeerGone):
        return "client-gone"
    if isinstance(exc, LocalProtocolError):
        return "bad-envelope"
    if isinstance(exc, TransportError):
        return "client-gone" if direction == REPLY else "backend-unavailable"
    raise exc  # not a message's fault: a bug, let it surface


#: drop reasons that are part of normal traffic: counted, logged at debug level only
NORMAL = frozenset({"probe"})


class Tally:
    """A bridge's hot counters, what both forwarding paths count on every message: requests in
    flight, whether replies pair with requests, and the cells of the forwarded counters and of
    the hop-latency histograms (``*_counts``: per bucket, ``buckets + 1`` of them; ``*_total``:
    the sum), which the ledger hands to the registry (its cells, its histograms' parts). The
    reference twin of the compiled kernel's ``Tally`` (:data:`gateway.kernel.TWINS`), which a
    bridge's kernel counts in: its cells are C numbers, indexed as these lists are."""

    __slots__ = ("by_kernel", "in_flight", "n_rep", "n_req", "pairs_replies", "rep_counts",
                 "rep_total", "req_counts", "req_total")

    def __init__(self, buckets: int) -> None:
        self.in_flight = 0
        self.pairs_replies = True
        #: messages the compiled kernel forwarded (this reference never does: 0)
        self.by_kernel = 0
        self.n_req, self.n_rep = [0], [0]
        self.req_counts, self.req_total = [0] * (buckets + 1), [0.0]
        self.rep_counts, self.rep_total = [0] * (buckets + 1), [0.0]


class Ledger:
    """Counters and gauges of one bridge; cheap enough for the hot path (dict increments)."""

    def __init__(self, bridge: str, metrics: Registry = METRICS) -> None:
        self.bridge = bridge
        #: False when the front's library may drop a reply it took (``confirms_delivery``):
        #: forwarded replies are then also counted as unconfirmed
        self.replies_confirmed = True
        self._metrics = metrics
        self._counters = metrics.counters
        self._k_req = metrics.declare("gateway_forwarded_messages_total", bridge=bridge,
                                      direction=REQUEST)
        self._k_rep = metrics.declare("gateway_forwarded_messages_total", bridge=bridge,
                                      direction=REPLY)
        #: the hot counters (the twin that runs: a bridge's compiled kernel counts in them);
        #: its cells count for the registry (an increment hashes nothing)
        self.tally: Tally = kernel.twin("Tally")(len(BUCKETS))
        tally = self.tally
        self._n_req = metrics.cell("gateway_forwarded_messages_total", bridge=bridge,
                                   direction=REQUEST, cell=tally.n_req)
        self._n_rep = metrics.cell("gateway_forwarded_messages_total", bridge=bridge,
                                   direction=REPLY, cell=tally.n_rep)
        self._n_unconfirmed = metrics.cell("gateway_unconfirmed_replies_total", bridge=bridge)
        self._drop_keys = {reason: metrics.declare("gateway_dropped_messages_total",
                                                   bridge=bridge, reason=reason)
                           for reason in DROP_REASONS}
        self._h_req = metrics.histogram("gateway_hop_latency_seconds", bridge=bridge,
                                        direction=REQUEST)
        self._h_rep = metrics.histogram("gateway_hop_latency_seconds", bridge=bridge,
                                        direction=REPLY)
        self._h_req.attach(tally.req_counts, tally.req_total)
        self._h_rep.attach(tally.rep_counts, tally.rep_total)
        #: the gauges this bridge reads (forgotten at close, unless a bridge of the same name
        #: that replaced this one reads them now)
        self._gauges: list[tuple[Key, Callable[[], float]]] = []
        self.gauge("gateway_in_flight_requests", lambda: float(self.in_flight))
        # (reason, direction, client) -> [quiet until, lines held back]
        self._quiet: dict[tuple[str, str, str], list[float]] = {}

    @property
    def in_flight(self) -> int:
        """Requests forwarded and not yet answered (request-reply)."""
        return self.tally.in_flight

    @in_flight.setter
    def in_flight(self, value: int) -> None:
        self.tally.in_flight = value

    @property
    def pairs_replies(self) -> bool:
        """False for pub/sub, pipeline and pair: nothing forwarded waits for an answer, so
        nothing is in flight ("request" counts front -> back, "reply" back -> front)."""
        return self.tally.pairs_replies

    @pairs_replies.setter
    def pairs_replies(self, value: bool) -> None:
        self.tally.pairs_replies = value

    # -- the hot path ------------------------------------------------------------------------
    # ``t0``: clock() when the message came in (forwarders read the clock once per
    # message: the same reading dates its token). The histogram's observe, inline.
    def request_forwarded(self, t0: float) -> None:
        tally = self.tally
        if tally.pairs_replies:
            tally.in_flight += 1
        tally.n_req[0] += 1
        dt = clock() - t0
        tally.req_counts[bisect_left(BUCKETS, dt)] += 1
        tally.req_total[0] += dt

    def reply_forwarded(self, t0: float) -> None:
        tally = self.tally
        if tally.in_flight:
            tally.in_flight -= 1
        tally.n_rep[0] += 1
        dt = clock() - t0
        tally.rep_counts[bisect_left(BUCKETS, dt)] += 1
        tally.rep_total[0] += dt
        if not self.replies_confirmed:  # the front's library may still drop it silently
            self._n_unconfirmed[0] += 1

    # -- drops ---------------------------------------------------------------------------------
    def dropped(self, reason: str, direction: str, detail: str = "", count: int = 1,
                client: bytes = b"", settles: bool = True, **context: object) -> None:
        """Count ``count`` messages lost for ``reason``. A reply direction drop (a reply that
        cannot be delivered, or never came: ``token-expired``) ends a request in flight, unless
        ``settles`` is False (a reply already forwarded, lost later from a pipe's queue)."""
        if count <= 0:
            return
        key = self._drop_keys.get(reason)
        if key is None:  # a plugin's own reason: counted all the same
            key = self._drop_keys[reason] = self._metrics.declare(
                "gateway_dropped_messages_total", bridge=self.bridge, reason=reason)
        self._counters[key] += count
        if direction == REPLY and settles:
            self.tally.in_flight = max(0, self.tally.in_flight - count)
        who = client.hex()
        if reason in NORMAL:  # the normal, not a loss: counted, no warning
            log.debug("drop", bridge=self.bridge, direction=direction, reason=reason,
                      client=who)
            return
        quiet_key = (reason, direction, who)
        now = monotonic()
        entry = self._quiet.pop(quiet_key, None)
        if entry is not None and now < entry[0]:
            entry[1] += count
            self._quiet[quiet_key] = entry
            return
        held = int(entry[1]) if entry is not None else 0
        self._quiet[quiet_key] = [now + LOG_INTERVAL, 0]
        if len(self._quiet) > _QUIET_KEYS:
            self._summarise(next(iter(self._quiet)))
        extra: dict[str, object] = {"count": count} if count > 1 else {}
        if who:
            extra["client"] = who
        if held:
            extra["suppressed"] = held  # since the previous line of this reason and client
        log.warning("drop", bridge=self.bridge, direction=direction, reason=reason,
                    detail=detail, **extra, **context)

    def _summarise(self, quiet_key: tuple[str, str, str]) -> None:
        until, held = self._quiet.pop(quiet_key)
        if held:
            reason, direction, who = quiet_key
            log.warning("drop.summary", bridge=self.bridge, direction=direction, reason=reason,
                        count=int(held), interval=LOG_INTERVAL,
                        **({"client": who} if who else {}))

    def flush(self) -> None:
        """Write the summaries whose second is over (the forwarders call this every second)."""
        now = monotonic()
        for quiet_key in [k for k, (until, _) in self._quiet.items() if now >= until]:
            self._summarise(quiet_key)

    def refused(self, exc: BaseException, direction: str, client: bytes = b"") -> None:
        """Count a message the translation or the sending socket refused (see :func:`classify`)."""
        self.dropped(classify(exc, direction), direction,
                     getattr(exc, "detail", "") or str(exc), client=client)

    def expired(self, count: int) -> None:
        self.dropped("token-expired", REPLY, "no reply within the token TTL", count)

    # -- reading ---------------------------------------------------------------------------------
    def forwarded(self, direction: str) -> int:
        return self._metrics.value(self._k_req if direction == REQUEST else self._k_rep)

    def dropped_count(self, reason: str) -> int:
        key = self._drop_keys.get(reason)
        return 0 if key is None else self._counters[key]

    def latency_count(self, direction: str) -> int:
        return (self._h_req if direction == REQUEST else self._h_rep).count

    def gauge(self, name: str, read: Callable[[], float], **labels: str) -> None:
        """A gauge of this bridge (labelled ``bridge=``), read until :meth:`close`."""
        self._gauges.append((self._metrics.gauge(name, read, bridge=self.bridge, **labels), read))

    def close(self) -> None:
        for key, read in self._gauges:
            self._metrics.forget_gauge(key, read)
        self._gauges.clear()
        tally = self.tally
        self._h_req.detach(tally.req_counts, tally.req_total)
        self._h_rep.detach(tally.rep_counts, tally.rep_total)
        self._metrics.release(self._n_req, self._n_rep, self._n_unconfirmed)
