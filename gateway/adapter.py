"""What an adapter plugin implements: a library's raw sockets behind the device's interfaces.

An adapter (pyzmq, pynng, a third party's) registers through ``gateway_register_adapters``::

    register("pyzmq", "zmtp", open_async, polled=open_polled, proxy=open_proxy,
             options=frozenset({"hwm", ...}))

and the bridge picks what to run from what the adapters of its two sides offer:

* ``open_async(kind, options) -> RawSocket``: asyncio face, always required;
* ``polled=open_polled(kind, options) -> PolledSocket``: a non-blocking face for the
  poller thread (both sides of a bridge must have one);
* ``proxy=open_proxy(front, back) -> LibraryProxy``: the library forwards by itself
  (libzmq's ``zmq_proxy_steerable``), for a same-family bridge with this adapter on both sides;
* ``options``: the settings (:class:`SideOptions` fields) it honours; a bridge refuses one it
  would ignore. ``options.security`` and ``options.tls`` carry the CURVE/PLAIN and TLS material
  the gateway loaded once from the files the settings name: use them, never the files.

``kind`` is the bridge side's socket kind: ``"REP"`` (raw rep: the ROUTER-like front clients
connect to) or ``"REQ"`` (raw req: the DEALER-like back end) for request-reply; ``"XPUB"`` /
``"XSUB"`` for pub/sub, ``"PULL"`` / ``"PUSH"`` for pipeline, ``"PAIR"`` (``"PAIR1"`` on SP) for
pair. Every face maps the library's messages to :class:`~gateway.message.Message` exactly as
the native engine does: ZMTP hops are the frames up to and including the first empty one (after
the ROUTER identity), SP hops the 4-byte words of the backtrace. URLs handed to
``bind``/``connect`` are the library's own (``tcp://127.0.0.1:5555``); ``bind`` returns the
real one (``:0`` resolved).

Every face declares what the forwarders need (nothing asks a face what it is):

* ``callbacks = False`` (the native engine's sides forward in their own callbacks);
* ``peers``: connected peers, ``-1`` when the library cannot tell;
* ``backlog``: messages received and not yet taken (0 for a library, which holds them itself);
* ``confirms_delivery``: False when the library may still drop a send it took; the bridge then
  also counts such replies as ``gateway_unconfirmed_replies_total``;
* ``on_peer_lost``: a callable (or None) the face calls, from any thread, when a peer
  disconnects; a face that cannot tell never calls it.

Errors a send raises, and how the device's ledger counts them: :class:`~gateway.errors.PeerGone`
(``client-gone``), :class:`~gateway.errors.PeerBusy` (``hwm``),
:class:`~gateway.errors.LocalProtocolError` (``bad-envelope``), any other
:class:`~gateway.errors.TransportError` (``client-gone`` toward the front,
``backend-unavailable`` toward the back). ``gateway.testing.adapter_checks`` checks a face.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from gateway.message import Message
from gateway.settings.schema import SideOptions

#: the flag a pollable is polled with for "readable" (zmq.POLLIN = select.POLLIN)
POLLIN = 1


class RawSocket(Protocol):
    """The asyncio face of a bridge side."""

    callbacks: bool
    confirms_delivery: bool
    on_peer_lost: Callable[[], None] | None

    @property
    def peers(self) -> int: ...
    @property
    def backlog(self) -> int: ...
    def bind(self, url: str) -> str: ...
    def connect(self, url: str) -> None: ...
    async def send_msg(self, msg: Message) -> Any: ...
    async def recv_msg(self) -> Message: ...
    def close(self, linger: float = 0.5) -> None: ...


class PolledSocket(Protocol):
    """The poller face: driven by one thread, never blocking.

    ``pollable`` is readable while a message is waiting; ``out_pollable`` is ``(object, flag)``
    to poll for "a send would not block now" (``(sock, zmq.POLLOUT)``, or nng's send fd with
    POLLIN). Both are what :func:`make_poller`'s poller takes: a zmq socket or a file
    descriptor (the two libraries' faces share one poller thread).
    """

    pollable: Any
    out_pollable: tuple[Any, int] | None
    name: str
    confirms_delivery: bool
    on_peer_lost: Callable[[], None] | None

    @property
    def peers(self) -> int: ...
    def bind(self, url: str) -> str: ...
    def connect(self, url: str) -> None: ...
    def recv_nowait(self) -> Message | None: ...

    def send_nowait(self, msg: Message) -> bool:
        """Send without waiting; False (nothing taken) when the peer has no room."""

    def close(self) -> None: ...


def make_poller() -> Any:
    """The poller of the poller thread: pyzmq's ``zmq.Poller`` (pyzmq is the gateway's own
    dependency), which takes zmq sockets and file descriptors alike (``register``,
    ``unregister``, ``poll(ms)``)."""
    import zmq

    return zmq.Poller()


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


__all__ = ["POLLIN", "LibraryProxy", "PolledSocket", "RawSocket", "SideOptions", "make_poller"]
