"""What a native socket's listeners decide about the connections they accept, and how every
connection that fails its handshake is reported.

* :class:`Admission`: ``allow`` networks and ``max_connections``, applied when a connection
  arrives (before any TLS handshake: see ``Pipe.connection_arrived``); a refusal is counted
  (``gateway_refused_connections_total``) and logged (one line per reason and interval); the
  process's open descriptors are watched (a warning once above 90 % of RLIMIT_NOFILE), counted
  at most once a second so that a storm of accepts costs O(1) each.
* :class:`HandshakeReports`: one ``handshake.failed`` line per endpoint, reason and what the
  peer announced every interval, in a bounded table; ``gateway_handshake_failures_total`` is
  exact.
"""

from __future__ import annotations

import ipaddress
import os
import time
from typing import Any

from gateway.engine.failures import PipeFailure
from gateway.engine.pipe import Pipe
from gateway.errors import REFUSAL_REASONS
from gateway.logging import Throttle, get_logger, shown
from gateway.metrics import METRICS

log = get_logger("gateway.engine")

#: Seconds between two warnings about the same failed handshake or refused connection on one
#: socket; the counters are exact, the next line says how many were held back.
WARN_INTERVAL = 10.0
#: seconds between two counts of the process's open descriptors (listing /proc/self/fd costs
#: O(open descriptors): never once per accepted connection)
FD_RECOUNT = 1.0
_fd_count: list[float | None] = [-FD_RECOUNT, None]  # [monotonic time of the count, ratio]


def open_files_ratio() -> float | None:
    """Open file descriptors over the soft RLIMIT_NOFILE (None where that cannot be read),
    counted at most once every :data:`FD_RECOUNT` seconds."""
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


class Admission:
    """A socket's listener limits (see the module doc)."""

    def __init__(self, name: str, allow: tuple[str, ...] | None,
                 max_connections: int | None) -> None:
        self.name = name
        self.allow = tuple(ipaddress.ip_network(n, strict=False) for n in allow or ())
        self.max_connections = max_connections
        self.accepted = 0  # connections accepted by this socket's listeners, still open
        self._refusals = Throttle(WARN_INTERVAL)
        self._fd_warned = False

    def admit(self, pipe: Pipe) -> bool:
        self._watch_fds()
        reason = ""
        if self.allow:
            host = pipe.peer.rpartition(":")[0].strip("[]")
            try:
                address: Any = ipaddress.ip_address(host)
            except ValueError:  # ipc, inproc: no network address to check
                address = None
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                address = address.ipv4_mapped  # an IPv4 client of a dual-stack [::] listener
            if address is not None and not any(address in net for net in self.allow):
                reason = "not-allowed"
        if not reason and self.max_connections is not None \
                and self.accepted >= self.max_connections:
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
        self.accepted += 1
        pipe.accepted = True
        return True

    def release(self, pipe: Pipe) -> None:
        """An accepted connection is gone."""
        if pipe.accepted:
            pipe.accepted = False
            self.accepted -= 1

    def _watch_fds(self) -> None:
        ratio = open_files_ratio()
        if ratio is not None and ratio > 0.9 and not self._fd_warned:
            self._fd_warned = True
            log.warning("fd.limit", socket=self.name, used=f"{ratio:.0%}",
                        advice="raise the open files limit (ulimit -n, LimitNOFILE=) or set "
                               "max_connections")


class HandshakeReports:
    """Counts and logs the connections of one socket that end before their handshake."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.throttle = Throttle(WARN_INTERVAL)

    def report(self, pipe: Pipe, failure: PipeFailure) -> None:
        if failure.reason in REFUSAL_REASONS:  # this end's rule refused it (a ws Origin)
            METRICS.inc("gateway_refused_connections_total", socket=self.name,
                        reason=failure.reason)
            held = self.throttle((pipe.endpoint, failure.reason, ""))
            if held is not None:
                log.warning("connection.refused", socket=self.name, endpoint=pipe.endpoint,
                            peer=pipe.peer, reason=failure.reason,
                            detail=shown(failure.detail, 300),
                            **({"suppressed": held} if held else {}))
            return
        METRICS.inc("gateway_handshake_failures_total", socket=self.name, reason=failure.reason)
        fields = dict(failure.fields)
        variant = "/".join(fields.get(k, "") for k in ("peer_version", "peer_mechanism",
                                                        "peer_type"))
        if failure.reason == "auth":  # its warning is the authenticator's auth.denied: one a client
            log.debug("handshake.failed", endpoint=pipe.endpoint, peer=pipe.peer, reason="auth",
                      socket=self.name)
            return
        held = self.throttle((pipe.endpoint, failure.reason, variant))
        if held is None:
            return
        if "peer_type" in fields:  # the peer chose it: one line stays one line
            fields["peer_type"] = shown(fields["peer_type"])
        log.warning("handshake.failed", endpoint=pipe.endpoint, peer=pipe.peer,
                    reason=failure.reason, detail=shown(failure.detail, 300), socket=self.name,
                    **fields, **({"suppressed": held} if held else {}))


__all__ = ["FD_RECOUNT", "WARN_INTERVAL", "Admission", "HandshakeReports", "open_files_ratio"]
