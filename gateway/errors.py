"""One exception tree. The class says whose fault it is (h11 habit)."""

from __future__ import annotations


class GatewayError(Exception):
    """Root of every error this package raises on purpose."""


class ProtocolError(GatewayError):
    """A wire-protocol violation.

    ``reason``: the ``gateway_pipes_closed_total`` reason when a pipe is closed for it; empty
    means the class name (``RemoteProtocolError``, ``PairingError``, ...).
    """

    reason: str = ""


class LocalProtocolError(ProtocolError):
    """We were asked to do something the protocol forbids (our fault)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids (its fault): the pipe is closed."""


class PairingError(RemoteProtocolError):
    """The peer announced a socket type this socket may not talk to."""


class MessageTooLarge(RemoteProtocolError):
    """The peer announced a message over the size limit."""


class SpHeaderError(RemoteProtocolError):
    """The peer's SP connection header has nonzero reserved bytes (6-7): nng closes such a
    pipe (``NNG_EPROTO``), and so do we, with the reason ``sp-header``."""

    reason = "sp-header"


class StateError(GatewayError):
    """A call out of order for the socket pattern (libzmq's EFSM, nng's NNG_ESTATE)."""


class TransportError(GatewayError):
    """Bind/connect failed: address in use, unreachable, unknown transport."""


class PeerGone(TransportError):
    """A routed send named a peer that is not connected (libzmq's EHOSTUNREACH with
    ROUTER_MANDATORY). The device counts it as ``client-gone``."""


class PeerBusy(TransportError):
    """A routed send found its peer's pipe at the high-water mark (libzmq's EAGAIN with
    ROUTER_MANDATORY). Nothing was buffered; the device counts it as ``hwm``."""


class Drop(GatewayError):
    """A message this layer refuses and drops (counted, logged); the pipe stays open.

    ``reason`` is one of :data:`DROP_REASONS`.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class ConfigError(GatewayError):
    """A bad URL, option or configuration file. The CLI prints it on one line and exits 2."""


class Closed(GatewayError):
    """The socket was closed."""


#: Every reason a message can be dropped for, and what it means: the one table that counters,
#: logs and docs share (docs/design.md: nothing is lost without a reason and a counter).
DROP_REASONS: dict[str, str] = {
    # patterns (engine)
    "ttl": "an SP message with more hops than the hop limit",
    "unexpected-reply": "a reply while no request is pending",
    "stale-reply": "a reply to an earlier request",
    "wrong-pipe": "a reply from a pipe the request did not go to",
    "no-delimiter": "a ZeroMQ message without the empty delimiter frame where one is required",
    "unroutable": "a routed send for a peer that is not connected",
    "hwm": "a routed send to a peer whose pipe is at the high-water mark, or a published "
           "message for a subscriber whose pipe is (PUB/XPUB never block)",
    "unexpected-message": "a message from a peer whose socket type never sends one (a PULL or "
                          "sub0 to PUSH/pub0, data from a SUB to a PUB, a subscription to a "
                          "socket that is no publisher)",
    "unknown-cancel": "a cancel (or unsubscribe) for a prefix that was not subscribed",
    "too-many-subscriptions": "a subscription past the prefixes one subscriber may hold "
                              "(max_subscriptions)",
    # envelope translation (gateway.envelope)
    "no-request-id": "no hop at all, or the last SP hop lacks its top bit",
    "not-4-bytes": "an SP hop or ZeroMQ reply envelope frame that is not exactly 4 bytes",
    "bad-backtrace": "a hop before the request id with its top bit set",
    "multi-frame-body": "a ZeroMQ body of several frames toward SP (one frame only)",
    "no-body": "a body of zero frames toward SP",
    "no-envelope": "a same-family reply without a routing hop",
    "table-full": "the pending-token table is full",
    "unknown-token": "a reply for a token the table does not hold",
    "expired-token": "a reply whose token had expired",
    "token-expired": "a request whose reply did not come within the token TTL (token_ttl)",
    "bad-envelope": "a message the sending socket refused (e.g. several frames toward SP)",
    "not-a-subscription": "pub/sub: a message from a ZeroMQ subscriber that is neither a "
                          "subscription (0x01 + prefix) nor a cancel (0x00 + prefix)",
    "unknown-subscription": "pub/sub: a cancel for a prefix no subscriber of the bridge holds",
    "bad-hop-header": "pair1: an SP pair1 message without its one 4-byte hop-count word",
    # the device
    "client-gone": "a reply to a client that is no longer connected",
    "backend-unavailable": "no backend peer took the request in time",
    "backend-lost": "a request in flight on a back-end connection that closed before it answered",
    "shutdown": "a request that arrived after the stop and was never forwarded",
}
