"""Connected peers and failed handshakes of a libzmq socket, from its monitor events
(:class:`PeerWatch`): what the pyzmq adapter's faces report as ``peers`` and ``on_peer_lost``,
and how they count handshake and dial failures as the native engine does."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from typing import Any

import zmq

from gateway.logging import get_logger
from gateway.metrics import METRICS

log = get_logger("gateway.pyzmq")

_MONITOR_IDS = itertools.count(1)

#: Milliseconds the reader waits for an event before it looks at its stop flag again (a
#: fallback: :meth:`PeerWatch.close` wakes it at once)
POLL_MS = 1000

#: Seconds between two warnings about the same failure (endpoint and reason); counters are exact.
WARN_INTERVAL = 10.0


def _protocol_reason(code: int) -> str:
    """A ZMQ_PROTOCOL_ERROR_* code -> a ``HANDSHAKE_REASONS`` key (zmq.h: 0x1... ZMTP,
    0x11... mechanism, 0x2... ZAP)."""
    if code == getattr(zmq, "PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH", 0x11000002):
        return "mechanism"
    if code & 0xF0000000 == 0x20000000:
        return "auth"
    return "protocol"


def _sockopt(sock: Any, name: str) -> int:
    """An integer option of ``sock`` (0 when this libzmq lacks it)."""
    try:
        return int(sock.getsockopt(getattr(zmq, name)))
    except (AttributeError, zmq.ZMQError):
        return 0


def _code_name(code: int) -> str:
    try:
        return zmq.Event(code).name or str(code)
    except ValueError:
        return hex(code)


class PeerWatch:
    """Connected peers of a libzmq socket, from its monitor events (CONNECTED/ACCEPTED add the
    connection's fd, DISCONNECTED removes it), read on a small daemon thread.

    The same events tell how handshakes and dials fail, logged and counted as the native
    engine does (``gateway_handshake_failures_total{socket,reason}``, one warning per endpoint
    and reason every ``WARN_INTERVAL`` s): HANDSHAKE_FAILED_PROTOCOL (``mechanism`` for
    ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH, ``auth`` for ZAP errors, else ``protocol``),
    HANDSHAKE_FAILED_AUTH (``auth``: on a CURVE or PLAIN server only at debug level, as its
    ZAP handler logs ``auth.denied``; a client refused by its server is warned),
    HANDSHAKE_FAILED_NO_DETAIL (``no-detail``, with libzmq's
    errno), a connection that ends during the handshake without any of those (``pairing``:
    with the NULL mechanism, libzmq closes a refused Socket-Type silently; handshake events
    carry no fd, so this is counted only while one handshake is pending: concurrent ones may go
    uncounted, none is counted wrongly); a failed connect (CONNECT_DELAYED, then CONNECT_RETRIED
    without CONNECTED between) is a dial failure (``gateway_dial_failures_total{reason=
    "retried"}``: libzmq does not say why), logged with the retry interval.

    Which side of a refused handshake notices first is a race: when the peer closes first,
    libzmq reports HANDSHAKE_FAILED_NO_DETAIL instead of the mechanism mismatch.

    libzmq sends monitor events blocking, from its I/O thread: :meth:`close` stops the monitor
    before the reader goes, or an event with nobody reading would stall the whole context.
    """

    EVENTS = (zmq.EVENT_CONNECTED | zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED
              | zmq.EVENT_CONNECT_DELAYED | zmq.EVENT_CONNECT_RETRIED
              | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
              | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH)

    def __init__(self, sock: Any, name: str = "") -> None:
        import threading

        # a plain socket (never an asyncio one: this thread closes it) on the same context
        address = f"inproc://gateway-monitor-{next(_MONITOR_IDS)}"  # never reused (id() is)
        sock.monitor(address, self.EVENTS)
        ctx: Any = zmq.Context.shadow(sock.context.underlying)
        self._mon: Any = ctx.socket(zmq.PAIR)
        self._mon.connect(address)
        # close() wakes the reader at once through this pair (the reader's end, then close's)
        self._wake_r: Any = ctx.socket(zmq.PAIR)
        self._wake_r.bind(address + "-wake")
        self._wake_w: Any = ctx.socket(zmq.PAIR)
        self._wake_w.linger = 0
        self._wake_w.connect(address + "-wake")
        self._sock = sock
        # a server of CURVE or PLAIN: its ZAP handler logs each refused client (auth.denied)
        self._local_zap = any(_sockopt(sock, opt) for opt in ("CURVE_SERVER", "PLAIN_SERVER"))
        self._fds: set[int] = set()
        self.name = name  # the socket's name in log lines and the counter's label
        self._handshaking: set[int] = set()  # fds connected, handshake not yet done or failed
        self._dialing: set[str] = set()  # endpoints with a connect in progress (CONNECT_DELAYED)
        self._warned: dict[tuple[str, str], tuple[float, int]] = {}
        self.on_lost: Callable[[], None] | None = None  # called (on this thread) after a peer left
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="pyzmq-peers", daemon=True)
        self._thread.start()

    @property
    def peers(self) -> int:
        return len(self._fds)

    def _read(self) -> None:
        from zmq.utils.monitor import parse_monitor_message

        poller = zmq.Poller()
        poller.register(self._mon, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                ready = dict(poller.poll(POLL_MS))
                if self._mon not in ready:
                    continue  # close() woke it (or the timeout: the stop flag is read)
                event = parse_monitor_message(self._mon.recv_multipart())
                kind, value = event["event"], event["value"]
                endpoint = event.get("endpoint", b"")
                ep = endpoint.decode("utf-8", "replace") if isinstance(endpoint, bytes) else str(endpoint)
                if kind == zmq.EVENT_DISCONNECTED:
                    self._fds.discard(value)
                    if value in self._handshaking:
                        self._handshaking.discard(value)
                        self._failed(ep, "pairing", "libzmq closed the connection during the "
                                     "handshake without a handshake event (with the NULL "
                                     "mechanism: it refused the peer's Socket-Type)")
                    if self.on_lost is not None:
                        self.on_lost()
                elif kind in (zmq.EVENT_CONNECTED, zmq.EVENT_ACCEPTED):
                    self._fds.add(value)
                    self._handshaking.add(value)
                    self._dialing.discard(ep)
                else:
                    self._event(kind, value, ep)
        except zmq.ZMQError:  # the socket or its context went away
            pass
        finally:
            self._mon.close(0)
            self._wake_r.close(0)

    def _event(self, kind: int, value: int, ep: str) -> None:
        if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self._handshaking.clear()  # (the event carries no fd: any pending one succeeded)
        elif kind == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
            self._handshaking.clear()
            reason = _protocol_reason(value)
            detail = f"libzmq: {_code_name(value)}"
            if reason == "mechanism":
                detail = ("the peer wants a security mechanism (CURVE or PLAIN) this endpoint "
                          "has not configured (NULL)")
            self._failed(ep, reason, detail, code=_code_name(value))
        elif kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            self._handshaking.clear()
            self._failed(ep, "auth", f"authentication failed (ZAP status {value})",
                         zap_denied=True)
        elif kind == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
            self._handshaking.clear()
            import errno as errno_mod
            name = errno_mod.errorcode.get(value, str(value))
            self._failed(ep, "no-detail", f"libzmq gives no detail (errno {name}): a peer that "
                         "is not ZeroMQ, an older ZMTP, or one that closed", errno=name)
        elif kind == zmq.EVENT_CONNECT_DELAYED:
            self._dialing.add(ep)
        elif kind == zmq.EVENT_CONNECT_RETRIED and ep in self._dialing:
            self._dialing.discard(ep)
            self._dial_failure(ep, value)

    def _warn_now(self, key: tuple[str, str]) -> int | None:
        """None while the warning for ``key`` waits for its interval; else how many were held."""
        now = time.monotonic()
        last, held = self._warned.get(key, (-WARN_INTERVAL, 0))
        if now - last < WARN_INTERVAL:
            self._warned[key] = (last, held + 1)
            return None
        self._warned[key] = (now, 0)
        return held

    def _failed(self, ep: str, reason: str, detail: str, zap_denied: bool = False,
                **fields: str) -> None:
        METRICS.inc("gateway_handshake_failures_total", socket=self.name, reason=reason)
        if zap_denied and self._local_zap:  # the local ZAP handler warned (auth.denied); a
            # client refused by its server, or a ZAP protocol error, is warned here
            log.debug("handshake.failed", endpoint=ep, reason=reason, socket=self.name,
                      backend="pyzmq")
            return
        held = self._warn_now((ep, reason))
        if held is not None:
            log.warning("handshake.failed", endpoint=ep, reason=reason, detail=detail,
                        socket=self.name, backend="pyzmq", **fields,
                        **({"suppressed": held} if held else {}))

    def _dial_failure(self, ep: str, retry_ms: int) -> None:
        METRICS.inc("gateway_dial_failures_total", reason="retried")
        held = self._warn_now((ep, "dial"))
        if held is not None:
            log.warning("dial.failed", url=ep, reason="retried",
                        error="libzmq could not connect (it does not say why)",
                        retry_in=round(retry_ms / 1000, 3), socket=self.name, backend="pyzmq",
                        **({"suppressed": held} if held else {}))

    def close(self) -> None:
        """Stop the monitor, then the reader, woken at once (before the socket's context
        ends)."""
        with contextlib.suppress(zmq.ZMQError):
            self._sock.disable_monitor()
        self._stop.set()
        with contextlib.suppress(zmq.ZMQError):
            self._wake_w.send(b"", zmq.NOBLOCK)
        self._thread.join(1)
        self._wake_w.close(0)


__all__ = ["POLL_MS", "WARN_INTERVAL", "PeerWatch"]
