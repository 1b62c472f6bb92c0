"""A native socket's options: the endpoint settings (:class:`gateway.settings.schema.SideOptions`,
one declaration each, their defaults included) plus what only the engine's own sockets have
(an identity, REQ's relaxed mode and resend interval, pub/sub bounds, a name for the logs).

``gateway.Socket("REQ", hwm=5000, reconnect_ivl=0.25)`` takes any of them by name; an options
object can be built once and shared (``SocketOptions(hwm=5000)``). Values are checked here, once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gateway.errors import ConfigError
from gateway.patterns.pubsub import MAX_SUBSCRIPTION_BYTES, MAX_SUBSCRIPTIONS
from gateway.settings.convert import BUFFER_MAX, KEEPALIVE_PROBES_MAX, KEEPALIVE_SECONDS_MAX
from gateway.settings.schema import LOCAL_SNDBUF, SideOptions
from gateway.transport import KeepAlive, SocketBuffers


@dataclass(frozen=True, slots=True)
class SocketOptions(SideOptions):
    """Every option of a native socket (see the module doc). ``security`` (a
    :class:`gateway.security.Security`) and ``tls`` (a :class:`gateway.tls.TlsSettings`) carry
    loaded material; the file settings (``curve_cert`` ...) are loaded into them when the socket
    is made."""

    identity: bytes = b""  # the routing id a ZMTP REQ/DEALER/ROUTER announces
    relaxed: bool = False  # REQ: a new request replaces the pending one (ZMQ_REQ_RELAXED)
    resend_interval: float = 60.0  # REQ on SP: resend an unanswered request (nng's)
    verbose: bool = False  # XPUB: report every subscribe, not only the first (XPUB_VERBOSE)
    filter: bool | None = None  # SUB/XSUB: filter received messages (None: cooked yes, raw no)
    max_subscriptions: int = MAX_SUBSCRIPTIONS  # prefixes one subscriber may hold
    max_subscription_bytes: int = MAX_SUBSCRIPTION_BYTES  # ... and their bytes together
    name: str = ""  # the socket's name in logs and metrics (default: its kind)

    def __post_init__(self) -> None:
        errors = []
        if isinstance(self.hwm, bool) or not isinstance(self.hwm, int):
            # (a pipe's byte mark is hwm * 1 KiB: the compiled kernel's is a C integer)
            errors.append(f"hwm must be a whole number of messages, not {self.hwm!r}")
        elif self.hwm < 1:
            errors.append("hwm must be at least 1")
        if self.message_timeout is not None and self.message_timeout < 0:
            errors.append("message_timeout must be positive (None or 0: no deadline)")
        if self.backlog is not None and self.backlog < 0:
            errors.append("backlog must be at least 0 (None: the system maximum)")
        if self.heartbeat_ivl < 0 or self.heartbeat_ttl < 0 or (self.heartbeat_timeout or 0) < 0:
            errors.append("heartbeat_ivl, heartbeat_ttl and heartbeat_timeout must be >= 0")
        if self.heartbeat_ttl > 6553.5:
            errors.append("heartbeat_ttl must be at most 6553.5 s (tenths of a second, u16)")
        if self.max_subscriptions < 1:
            errors.append("max_subscriptions must be at least 1")
        for name in ("sndbuf", "rcvbuf"):
            value = getattr(self, name)
            if value is None and name == "sndbuf":
                continue
            if value == -1 and not isinstance(value, bool):  # libzmq's "the OS's own"
                object.__setattr__(self, name, 0)
            elif isinstance(value, bool) or not isinstance(value, int) \
                    or not 0 <= value <= BUFFER_MAX:
                errors.append(f"{name} must be a whole number of bytes within 0..{BUFFER_MAX} "
                              f"(0 or -1: the OS's own), not {value!r}")
        for name in ("tcp_keepalive_idle", "tcp_keepalive_intvl"):
            if not 1 <= getattr(self, name) <= KEEPALIVE_SECONDS_MAX:
                errors.append(f"{name} must be within 1..{KEEPALIVE_SECONDS_MAX} s, not "
                              f"{getattr(self, name)!r}")
        if not 1 <= self.tcp_keepalive_cnt <= KEEPALIVE_PROBES_MAX:
            errors.append(f"tcp_keepalive_cnt must be within 1..{KEEPALIVE_PROBES_MAX}, not "
                          f"{self.tcp_keepalive_cnt!r}")
        if not 1 <= self.hop_limit <= 15:
            errors.append(f"hop_limit must be within 1..15, not {self.hop_limit}")
        if errors:
            raise ConfigError("\n".join(errors))

    @property
    def keepalive(self) -> KeepAlive | None:
        """The TCP keepalive of every TCP connection (None: off)."""
        if not self.tcp_keepalive:
            return None
        return KeepAlive(self.tcp_keepalive_idle, self.tcp_keepalive_intvl, self.tcp_keepalive_cnt)

    @property
    def buffers(self) -> SocketBuffers:
        """The kernel buffers of every connection (``sndbuf``, ``rcvbuf``)."""
        return SocketBuffers(self.sndbuf, self.rcvbuf, LOCAL_SNDBUF)


def socket_options(base: SocketOptions | None, settings: dict[str, Any]) -> SocketOptions:
    """``base`` (or the defaults) with ``settings`` by name; the forms a caller may write for
    convenience are normalised (``subscribe=b"a"``, ``allow=["10.0.0.0/8"]``, ``identity="x"``)
    and an unknown name is a :class:`ConfigError` naming it."""
    fields = SocketOptions.__dataclass_fields__
    unknown = sorted(set(settings) - set(fields))
    if unknown:
        raise ConfigError(f"unknown socket option(s) {', '.join(unknown)} (known: "
                          f"{', '.join(sorted(fields))})")
    given = dict(settings)
    topics = given.get("subscribe")
    if isinstance(topics, bytes | str):
        given["subscribe"] = (_bytes(topics),)
    elif topics is not None:
        given["subscribe"] = tuple(_bytes(t) for t in topics)
    if given.get("allow") is not None:
        given["allow"] = tuple(given["allow"])
    if isinstance(given.get("identity"), str):
        given["identity"] = given["identity"].encode()
    return replace(base or SocketOptions(), **given)


def _bytes(topic: bytes | str) -> bytes:
    return topic.encode() if isinstance(topic, str) else bytes(topic)


__all__ = ["SocketOptions", "socket_options"]
