"""The one peer library: a socket of one implementation, on one side of an exchange, in one
shape, whatever the pattern (the matrix's cells, the interop suites' servers).

A peer (:class:`Peer`) is one socket of one implementation:

* ``bind(url)`` (server) returns the real library URL (``tcp://127.0.0.1:P``, ``ipc:///p``);
  ``connect(url)`` (client) dials it. URLs here are spelled as libzmq/nng spell them; the
  native peer adds its wire prefix (``zmq+`` / ``sp+``) itself.
* request-reply: ``request(payload, deadline, abort)`` (requester role) sends one request and
  returns a :class:`Reply` or None (no reply before ``deadline`` or ``abort()`` turned true);
  ``serve(reply_fn)`` (responder role) answers every request in the background and records
  what it saw in ``seen`` (:class:`Seen`: the frames before the body on ZMTP, the SP header).
* pub/sub, pipeline, pair: ``send(msg)`` one message; ``drain(quiet, deadline)`` everything
  received until ``quiet`` seconds pass without a message; ``topics`` (given when made) are a
  subscriber's subscriptions; ``subscribe``/``unsubscribe`` change them later.
* ``evidence()``: ``"ok"`` once a handshake completed, ``"refused"`` when the peer saw the
  connection close before any handshake completed, ``"lost"`` when a completed pipe closed
  again, None when it cannot tell (CLI peers, or nothing happened yet).
* ``close()`` never raises and never hangs.

:func:`make_peer` picks the class by implementation name (:data:`IMPLEMENTATIONS`). Nothing
here decides an outcome: the matrix's runner does. The interop suites' simple server threads
are in :mod:`gateway.tools.harness.peers.servers`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SERVER_ID = b"srv"  # routing id announced by DEALER/ROUTER servers, so ROUTER clients can address them
GATEWAY_ID = b"gw"  # the local name a libzmq ROUTER client gives the gateway's front
#: ZMTP heartbeats of a peer made with ``heartbeat=True``: interval and timeout (milliseconds)
HEARTBEAT = {"ivl_ms": 50, "timeout_ms": 250}
#: the kinds that send in a pattern (pub/sub, pipeline, pair) and those that receive
SENDERS = frozenset({"PUB", "XPUB", "PUSH", "PAIR", "PAIR0", "PAIR1"})
RECEIVERS = frozenset({"SUB", "XSUB", "PULL", "PAIR", "PAIR0", "PAIR1"})


@dataclass
class Reply:
    body: bytes
    frames: tuple[bytes, ...] = ()  # ZMTP: every frame of the reply (DEALER/ROUTER requesters)
    header: bytes | None = None  # SP raw: the reply's header as nng hands it over


@dataclass
class Seen:
    body: bytes
    frames: tuple[bytes, ...] = ()  # ZMTP: frames before the body (hops, then the delimiter)
    header: bytes | None = None  # SP raw REP: the header (pipe id, ..., request id)


@dataclass(frozen=True, slots=True)
class Security:
    """What a peer's hop uses: ``zmtp`` the mechanism of a ZeroMQ hop (CURVE, PLAIN), ``sp``
    the transport of an SP hop (tls+tcp, ws, wss), ``zws`` that of a ZeroMQ hop (ws: ZWS 2.0); ``bad``: a client's credentials are wrong
    (an unknown CURVE key, a wrong PLAIN password, a CA that did not sign the server's
    certificate). Keys and certificates: :mod:`gateway.tools.harness.security`."""

    zmtp: str = ""
    sp: str = ""
    bad: bool = False
    #: the transport of a ZeroMQ hop when not tcp: ``ws`` (ZWS 2.0, RFC 45)
    zws: str = ""


class Peer:
    """The common shape (see the module's doc); ``options`` are those of :func:`make_peer`,
    each class takes what it can use."""

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "", *,
                 topics: tuple[bytes, ...] = (), data: bytes = b"", **options: Any) -> None:
        self.impl, self.kind, self.wire, self.side = impl, kind, wire, side
        self.workdir = workdir
        self.topics = topics  # a subscriber's subscriptions
        self.data = data  # what a CLI sender repeats (it cannot send a sequence)
        self.options = options
        self.seen: list[Seen] = []
        self.problems: list[str] = []
        self.notes: list[str] = []

    # -- both roles ------------------------------------------------------------------------
    def bind(self, url: str) -> str:
        raise NotImplementedError

    def connect(self, url: str) -> None:
        raise NotImplementedError

    def evidence(self) -> str | None:
        return None

    def close(self) -> None:
        pass

    @property
    def label(self) -> str:
        return f"{self.side} {self.impl} {self.kind}"

    @property
    def role(self) -> str:
        """``server`` or ``client``: which credentials a secure hop gives this peer."""
        return "server" if self.side == "server" else "client"

    # -- request-reply ---------------------------------------------------------------------
    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        raise NotImplementedError(f"{self.label} cannot send a request")

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        raise NotImplementedError(f"{self.label} cannot answer")

    def idle(self) -> None:
        """Nothing to do: the socket only exists (its handshake is what the cell observes)."""

    # -- pub/sub, pipeline, pair -----------------------------------------------------------
    def send(self, msg: bytes) -> None:
        raise NotImplementedError(f"{self.label} cannot send")

    def drain(self, quiet: float, deadline: float) -> list[bytes]:
        """Everything received until ``quiet`` seconds pass without a message (or ``deadline``)."""
        return []

    def subscribe(self, topic: bytes) -> None:
        raise NotImplementedError(f"{self.label} cannot subscribe")

    def unsubscribe(self, topic: bytes) -> None:
        raise NotImplementedError(f"{self.label} cannot unsubscribe")


def remaining(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def request_frames(kind: str, payload: bytes, peer_id: bytes) -> list[bytes]:
    """What a ZeroMQ requester sends: REQ the body (libzmq adds the delimiter), DEALER its own
    delimiter and the body, ROUTER the server's routing id, the delimiter and the body."""
    if kind == "REQ":
        return [payload]
    if kind == "DEALER":
        return [b"", payload]
    if kind == "ROUTER":
        return [peer_id, b"", payload]
    raise RuntimeError(f"{kind} cannot send a request")


#: implementation name -> (module, class) of its peer, imported when first used
IMPLEMENTATIONS: dict[str, tuple[str, str]] = {
    impl: (module, cls)
    for (module, cls), impls in {
        ("zmq", "ZmqPeer"): ("libzmq",),
        ("nng", "NngPeer"): ("nng", "nng-raw"),
        ("native", "NativePeer"): ("native",),
        ("cli", "CliPeer"): ("nanomsg", "nng-1.5"),
        ("jeromq", "JeromqPeer"): ("jeromq-0.3",),
        ("jszmq", "JszmqPeer"): ("jszmq",),
        ("remote", "RemotePeer"): ("libzmq-4.3.4", "libzmq-4.1", "omq", "nng-2.0", "nng-1.1"),
    }.items() for impl in impls}


def make_peer(impl: str, kind: str, wire: str, side: str, workdir: str, *,
              topics: tuple[bytes, ...] = (), data: bytes = b"",
              connect_routing_id: bytes | None = None, heartbeat: bool = False,
              sec: Security | None = None) -> Peer:
    """A peer of implementation ``impl``. ``heartbeat``: a ZMTP peer sends heartbeats
    (:data:`HEARTBEAT`); ``sec``: the keys or certificates of a secure hop, as this side's
    role needs; ``connect_routing_id``: the name a libzmq ROUTER client gives its peer."""
    import importlib

    try:
        module, name = IMPLEMENTATIONS[impl]
    except KeyError:
        raise ValueError(f"unknown impl {impl!r}") from None
    cls = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    peer: Peer = cls(impl, kind, wire, side, workdir, topics=topics, data=data,
                     connect_routing_id=connect_routing_id, heartbeat=heartbeat, sec=sec)
    return peer
