"""What an adapter plugin implements: a library's raw sockets behind the device's interfaces.

An adapter (pyzmq, pynng, a third party's) registers through ``gateway_register_adapters``::

    register("pyzmq", "zmtp", open_async, polled=open_polled, proxy=open_proxy)

and the bridge picks what to run from what the adapters of its two sides offer:

* ``open_async(kind, options) -> RawSocket``: asyncio face, always required;
* ``polled=open_polled(kind, options) -> PolledSocket``: a non-blocking face for the
  poller thread (both sides of a bridge must have one);
* ``proxy=open_proxy(front, back) -> LibraryProxy``: the library forwards by itself
  (libzmq's ``zmq_proxy_steerable``), for a same-family bridge with this adapter on both sides.

``kind`` is ``"REP"`` (raw rep: the ROUTER-like front clients connect to) or ``"REQ"`` (raw
req: the DEALER-like back end). Every face maps the library's messages to
:class:`~gateway.message.Message` exactly as the native engine does: ZMTP hops are the frames
up to and including the first empty one (after the ROUTER identity), SP hops the 4-byte words
of the backtrace. URLs handed to ``bind``/``connect`` are the library's own
(``tcp://127.0.0.1:5555``); ``bind`` returns the real one (``:0`` resolved).

A face whose sends a library may still drop after taking them sets ``confirms_delivery =
False``; the bridge then also counts such replies as ``gateway_unconfirmed_replies_total``.

Errors a send raises, and how the device's ledger counts them: :class:`~gateway.errors.PeerGone`
(``client-gone``), :class:`~gateway.errors.PeerBusy` (``hwm``),
:class:`~gateway.errors.LocalProtocolError` (``bad-envelope``), any other
:class:`~gateway.errors.TransportError` (``client-gone`` toward the front,
``backend-unavailable`` toward the back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gateway.message import Message


@dataclass(frozen=True, slots=True)
class SideOptions:
    """The bridge's settings for one side, in the gateway's terms; adapters translate them.

    Users set them per endpoint (``?hwm=5000``, TOML ``front_options``): the table of names and
    units is :mod:`gateway.options`. An adapter names the fields it honours when it registers
    (``register(..., options=frozenset({"hwm", ...}))``); a bridge refuses a setting its
    adapter would ignore.
    """

    hwm: int = 1000  # messages per peer (libzmq SNDHWM/RCVHWM; a bounded queue elsewhere)
    max_message_size: int = 1 << 20  # larger messages are refused by the library
    hop_limit: int = 8  # SP TTL on the raw rep front (nng's ttl-max)
    router_mandatory: bool = True  # a reply for an unknown or full peer raises, to be counted
    message_timeout: float = 10.0  # a message started but not complete after it closes its pipe
    backlog: int | None = None  # listen backlog (None: the system maximum)
    reconnect_ivl: float = 0.1  # seconds before the first redial (libzmq RECONNECT_IVL)
    reconnect_ivl_max: float = 2.0  # the redial wait doubles up to this (RECONNECT_IVL_MAX)
    handshake_timeout: float = 10.0  # greeting/header deadline (libzmq HANDSHAKE_IVL)
    linger: float = 0.5  # on close, seconds queued messages may still be sent (LINGER)
    # ZMTP heartbeats (libzmq HEARTBEAT_IVL / TTL / TIMEOUT), seconds; 0: none; timeout None: ivl
    heartbeat_ivl: float = 0.0
    heartbeat_ttl: float = 0.0
    heartbeat_timeout: float | None = None
    #: a peer reconnecting with a connected routing id takes over (ROUTER_HANDOVER; off, as
    #: libzmq; with CURVE/PLAIN only the same key or user takes over)
    router_handover: bool = False
    # TCP keepalive on every tcp connection (libzmq TCP_KEEPALIVE, _IDLE, _INTVL, _CNT)
    tcp_keepalive: bool = True
    tcp_keepalive_idle: float = 60.0  # seconds
    tcp_keepalive_intvl: float = 10.0  # seconds
    tcp_keepalive_cnt: int = 6
    #: the bridge's pattern (:data:`gateway.options.PATTERNS`): a bridge setting, read
    #: by the bridge itself and never handed to an adapter
    pattern: str = ""
    #: pub/sub: prefixes the subscribing side holds on its own (None: the pattern's default)
    subscribe: tuple[bytes, ...] | None = None
    # ZeroMQ security (gateway.security): paths to files, never secrets themselves
    curve_server: bool = False  # this side is the CURVE server (CURVE_SERVER)
    curve_cert: str | None = None  # this side's certificate, the .key_secret file
    curve_serverkey: str | None = None  # client: the server's public key, Z85 (CURVE_SERVERKEY)
    curve_server_cert: str | None = None  # client: the server's public certificate file
    curve_allow: str | None = None  # server: directory of allowed client certificates
    plain_server: bool = False  # this side is the PLAIN server (PLAIN_SERVER)
    plain_passwords: str | None = None  # server: user=password file
    plain_allow_any: bool = False  # server without plain_passwords: any user (else refuse all)
    plain_username: str | None = None  # client: PLAIN_USERNAME
    plain_password_file: str | None = None  # client: file holding PLAIN_PASSWORD
    # listener limits (native bound endpoints)
    allow: tuple[str, ...] | None = None  # CIDR networks whose clients are accepted
    max_connections: int | None = 10_000  # connections accepted at once (None: no limit)
    # SP over TLS (gateway.tls): paths to PEM files
    tls_cert: str | None = None  # this side's certificate chain
    tls_key: str | None = None  # its private key (None: in the tls_cert file)
    tls_ca: str | None = None  # CAs that verify the peer (None: the system's)
    tls_verify: str | None = None  # none | optional | required (None: nng's default per side)
    tls_server_name: str | None = None  # connecting: the expected name (None: the URL's host)


class RawSocket(Protocol):
    """The asyncio face of a bridge side."""

    def bind(self, url: str) -> str: ...
    def connect(self, url: str) -> None: ...
    async def send_msg(self, msg: Message) -> None: ...
    async def recv_msg(self) -> Message: ...
    def close(self, linger: float = 0.5) -> None: ...


class PolledSocket(Protocol):
    """The poller face: driven by one thread, never blocking.

    ``pollable`` is what ``zmq.Poller.register`` accepts (a zmq socket or a file descriptor)
    and is readable while a message is waiting; ``out_pollable`` is ``(object, flag)`` to poll
    for "a send would not block now" (``(sock, zmq.POLLOUT)``, or nng's send fd with POLLIN).
    """

    pollable: Any
    out_pollable: tuple[Any, int]

    def bind(self, url: str) -> str: ...
    def connect(self, url: str) -> None: ...
    def recv_nowait(self) -> Message | None: ...

    def send_nowait(self, msg: Message) -> bool:
        """Send without waiting; False (nothing taken) when the peer has no room."""

    def close(self) -> None: ...


class LibraryProxy(Protocol):
    """A library's own forwarder between two of its sockets (``front``, ``back``)."""

    front: Any  # bind(url) -> str, connect(url)
    back: Any

    def run(self) -> None:
        """Forward until :meth:`terminate`; blocks (call it in a thread)."""

    def statistics(self) -> tuple[int, int] | None:
        """What crossed so far, front to back and back to front, in the library's own unit
        (libzmq counts frames, not messages); None when the proxy is busy and did not answer."""

    def terminate(self) -> bool:
        """Stop :meth:`run`; True when it had to be forced (stalled on a full peer)."""

    def close(self) -> None: ...


__all__ = ["LibraryProxy", "PolledSocket", "RawSocket", "SideOptions"]
