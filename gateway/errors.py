"""One exception tree. The class says whose fault it is (h11 habit)."""

from __future__ import annotations


class GatewayError(Exception):
    """Root of every error this package raises on purpose. ``event``: the name of the CLI's
    JSON line for it (``--log-format json``)."""

    event: str = "startup.failed"


class ProtocolError(GatewayError):
    """A wire-protocol violation.

    ``reason``: the ``gateway_pipes_closed_total`` reason when a pipe is closed for it (one of
    :data:`PIPE_CLOSE_REASONS`: the same kebab-case word on the counter and the log line).
    """

    reason: str = "protocol-error"


class LocalProtocolError(ProtocolError):
    """We were asked to do something the protocol forbids (our fault)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids (its fault): the pipe is closed.

    ``handshake_reason``: the ``gateway_handshake_failures_total`` reason when this ends a
    connection before its handshake completed (one of :data:`HANDSHAKE_REASONS`).
    """

    handshake_reason: str = "garbage"


class PairingError(RemoteProtocolError):
    """The peer announced a socket type this socket may not talk to (``ours``, ``theirs``:
    both types, for the log line)."""

    reason = "pairing"
    handshake_reason = "pairing"

    def __init__(self, message: str, ours: str = "", theirs: str = "") -> None:
        super().__init__(message)
        self.ours = ours
        self.theirs = theirs


class VersionError(RemoteProtocolError):
    """The peer speaks a ZMTP version this end does not (1.0), or a downgrade to ZMTP 2.0 was
    refused because this endpoint has a security mechanism (RFC 37). ``peer_version`` is what
    the peer's greeting said, as text (``"1.0"``, ``"2.0"``)."""

    reason = "zmtp-version"
    handshake_reason = "zmtp-version"

    def __init__(self, message: str, peer_version: str = "") -> None:
        super().__init__(message)
        self.peer_version = peer_version


class MechanismError(RemoteProtocolError):
    """The peer's ZMTP greeting asks for a security mechanism (CURVE, PLAIN) this endpoint does
    not have configured. ``peer_mechanism`` and ``mechanism`` name both."""

    reason = "mechanism"
    handshake_reason = "mechanism"

    def __init__(self, message: str, peer_mechanism: str = "", mechanism: str = "") -> None:
        super().__init__(message)
        self.peer_mechanism = peer_mechanism
        self.mechanism = mechanism


class WrongWireError(RemoteProtocolError):
    """The peer speaks the other wire: an SP header on a ZeroMQ endpoint, or a ZMTP greeting
    on an SP endpoint."""

    reason = "wrong-wire"
    handshake_reason = "sp-protocol"


class MessageTooLarge(RemoteProtocolError):
    """The peer announced a message over the size limit."""

    reason = "message-too-large"


class SpHeaderError(RemoteProtocolError):
    """The peer's SP connection header has nonzero reserved bytes (6-7): nng closes such a
    pipe (``NNG_EPROTO``), and so do we, with the reason ``sp-header``."""

    reason = "sp-header"
    handshake_reason = "sp-protocol"


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


class LayerError(TransportError):
    """A layer between the connection and the engine's pipe (TLS, WebSocket) failed; it hands
    this to the pipe's ``connection_lost`` (a failure is a value that travels up, as uvloop's
    ``_fatal_error``). ``reason`` is a :data:`HANDSHAKE_REASONS` key, ``fields`` go on the log
    line."""

    def __init__(self, reason: str, detail: str, fields: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.fields = dict(fields or {})


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


class BridgeStopped(GatewayError):
    """A running bridge ended by itself (no signal, no error of its own): the process stops
    with it, reported as ``runtime.failed`` (not a start-up failure)."""

    event = "runtime.failed"


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
    "too-many-subscriptions": "a subscription past what one subscriber may hold: "
                              "max_subscriptions prefixes (10,000) or max_subscription_bytes "
                              "of them together (256 KiB)",
    # envelope translation (gateway.envelope)
    "no-request-id": "no hop at all, or the last SP hop lacks its top bit",
    "not-4-bytes": "an SP hop or ZeroMQ reply envelope frame that is not exactly 4 bytes",
    "bad-backtrace": "a hop before the request id with its top bit set",
    "multi-frame-body": "a ZeroMQ body of several frames toward SP (one frame only)",
    "no-body": "a body of zero frames toward SP",
    "probe": "the empty message a ZeroMQ client with ZMQ_PROBE_ROUTER sends on connect (no "
             "request: counted, logged at debug only)",
    "no-envelope": "a same-family reply without a routing hop",
    "table-full": "the pending-token table is full: pending_tokens envelopes, or pending_bytes "
                  "of them (each frame's bytes and one more)",
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
    "forced-exit": "a request still in flight when a second SIGINT/SIGTERM ended the drain "
                   "before its grace",
    "peer-gone": "messages that waited in the gateway's queue toward a peer (a client, a "
                 "subscriber, a puller) whose connection closed before they were written; what "
                 "the OS had taken is not counted, nor the one write it was taking",
    "drain-timeout": "a request still in flight when its bridge's drain ran out of grace (a "
                     "SIGINT/SIGTERM, or a reload that replaced or stopped the bridge): its "
                     "back-end connection closes without the reply",
}


#: Every reason a connection can fail before its handshake completes, or a dial can fail
#: (``gateway_handshake_failures_total`` / ``gateway_dial_failures_total``): the one table the
#: engine, the pyzmq adapter and docs/observability.md share.
HANDSHAKE_REASONS: dict[str, str] = {
    "zmtp-version": "the peer speaks a ZMTP version this end does not (1.0), or a downgrade to "
                    "ZMTP 2.0 was refused because the endpoint has security configured; the "
                    "log line has the peer's version",
    "mechanism": "the peer's greeting asks for a security mechanism (CURVE, PLAIN) this "
                 "endpoint has not configured; the log line names both",
    "pairing": "the peer's socket type may not talk to this one (ZMTP Socket-Type, the ZMTP 2.0 "
               "socket-type byte, or the SP protocol); the log line names both, or, with "
               "`inferred` and `stage` `ready`, says that a ZeroMQ peer sent its greeting and "
               "closed without its READY (what libzmq does when it refuses our socket type)",
    "sp-protocol": "an SP header this end refuses (reserved bytes set), or the wrong wire: an "
                   "SP peer on a ZeroMQ endpoint or a ZeroMQ peer on an SP endpoint",
    "ws-upgrade": "a WebSocket upgrade to a ZeroMQ (ZWS) endpoint refused or failed: another "
                  "path (404), no ZWS 2.0 subprotocol this end takes (400), not a WebSocket "
                  "request, or a server that refused ours",
    "origin": "a browser page whose Origin the ws or wss endpoint does not allow (answered "
              "403): counted in `gateway_refused_connections_total`, not here",
    "handshake-timeout": "no complete handshake within the handshake timeout (10 s)",
    "garbage": "bytes that are neither a ZMTP greeting nor an SP header, or a malformed "
               "handshake (a bad READY, data before READY)",
    "peer-closed": "the peer closed the connection before the handshake completed (it refused "
                   "us, or it was a port probe); the log line says how far it got (`stage`)",
    "peer-error": "the ZeroMQ peer sent an ERROR command during the handshake",
    "duplicate-identity": "a ZeroMQ peer announced a routing id another connected peer has",
    "protocol": "the library reports a failed handshake with a protocol error (pyzmq: "
                "EVENT_HANDSHAKE_FAILED_PROTOCOL; the log line has libzmq's error code)",
    "auth": "the peer's credentials were refused (a PLAIN password or CURVE key the "
            "gateway_authenticate hook denied, or pyzmq: EVENT_HANDSHAKE_FAILED_AUTH)",
    "tls": "the TLS handshake of an sp+tls+tcp:// connection failed (a certificate the other "
           "side does not trust, a wrong server name, not TLS at all); the log line has the "
           "reason ssl gave",
    "curve": "a CURVE box that does not open (wrong server key, tampered or replayed command)",
    "no-detail": "the library reports a failed handshake without detail (pyzmq: "
                 "EVENT_HANDSHAKE_FAILED_NO_DETAIL)",
    # dials (gateway_dial_failures_total)
    "refused": "a dial found nobody listening (connection refused)",
    "unreachable": "a dial found no route to the host, or no such ipc path",
    "timeout": "a dial timed out",
    "error": "a dial failed for another reason (the log line has the error)",
    "retried": "pyzmq: libzmq retried a failed connect (EVENT_CONNECT_RETRIED, which does not "
               "say why)",
}


#: Why a native listener refused a connection (``gateway_refused_connections_total{reason}``
#: and the ``connection.refused`` line, one per socket and reason every 10 s).
REFUSAL_REASONS: dict[str, str] = {
    "not-allowed": "the client's address is outside the endpoint's `allow` networks (before "
                   "any byte is read)",
    "max-connections": "the endpoint's `max_connections` were connected (before any byte is "
                       "read)",
    "origin": "a browser page from an origin the ws or wss endpoint does not allow: its "
              "`origin` list, or without one any origin but the endpoint's own; answered "
              "HTTP 403 (a client that sends no Origin, not a browser, is never refused so)",
}


#: Every reason a native connection is closed because of its peer
#: (``gateway_pipes_closed_total{reason}`` and the ``pipe.closed`` line): the table the engine,
#: the exceptions' ``reason`` and docs/observability.md share.
PIPE_CLOSE_REASONS: dict[str, str] = {
    "handshake-timeout": "no complete handshake within the handshake timeout (10 s)",
    "message-timeout": "a message started but was still incomplete after `message_timeout` "
                       "(10 s)",
    "sp-header": "an SP header with nonzero reserved bytes (nng closes those too)",
    "duplicate-identity": "a ZeroMQ peer announced a routing id another connected peer already "
                          "has, and `router_handover` is off (the newcomer is refused, libzmq's "
                          "default), or it is on and the newcomer proved another CURVE key or "
                          "PLAIN user",
    "handover": "the old connection of a routing id a reconnecting ZeroMQ peer took over "
                "(`router_handover`, off by default): the old pipe is closed, messages to that "
                "routing id, replies in flight included, go to the new connection, as libzmq's "
                "ROUTER_HANDOVER routes them",
    "heartbeat-timeout": "a ZeroMQ peer sent nothing at all within `heartbeat_timeout` of our "
                         "PING (`?heartbeat_ivl=` set), or within the TTL its own PING asked "
                         "for (honoured even with our heartbeats off)",
    "peer-error": "the ZeroMQ peer sent an ERROR command",
    "pair-busy": "a second peer for a PAIR, pair0 or pair1 socket, which takes one (libzmq and "
                 "nng refuse it too)",
    "pairing": "the peer's socket type may not talk to this one (ZMTP Socket-Type, ZMTP 2.0 "
               "socket-type byte, or SP protocol)",
    "zmtp-version": "a ZMTP 1.0 peer, or a ZMTP 2.0 peer on an endpoint with security (RFC 37 "
                    "forbids the downgrade)",
    "wrong-wire": "an SP header on a ZeroMQ endpoint, or a ZMTP greeting on an SP endpoint",
    "message-too-large": "the peer announced a message over the size limit",
    "protocol-error": "any other malformed greeting, header or frame",
    "mechanism": "the ZeroMQ peer's greeting names another security mechanism (NULL, PLAIN, "
                 "CURVE) or the same as-server role (RFC 23)",
    "auth": "the ZeroMQ peer's PLAIN or CURVE credentials were refused (it was sent an ERROR "
            "\"400\" first; `gateway_auth_failures_total` says why)",
    "curve": "a CURVE box that does not open, a replayed nonce, a cookie or vouch that does "
             "not match (RFC 26)",
    "tls": "a TLS error on an established `sp+tls+tcp://` or `sp+wss://` connection",
}

#: Why the built-in authenticator refuses a peer (``gateway_auth_failures_total{reason}`` and
#: the ``auth.denied`` line); a ``gateway_authenticate`` plugin may add its own words.
AUTH_REASONS: dict[str, str] = {
    "unknown-key": "a CURVE client whose public key is in no `*.key` file of `curve_allow`",
    "unknown-user": "a PLAIN user not in `plain_passwords`",
    "bad-password": "a PLAIN user with the wrong password",
    "no-user-list": "a PLAIN server without `plain_passwords` (and without `plain_allow_any`) "
                    "refuses everyone, as libzmq's PLAIN server without ZAP",
    "allow-dir-unreadable": "the `curve_allow` directory could not be read, or other users may "
                            "write to it (everyone is refused)",
    "password-file-unreadable": "the `plain_passwords` file could not be read (everyone is "
                                "refused)",
    "authenticator-error": "a `gateway_authenticate` plugin raised or answered something that "
                           "is not an AuthResult (the peer is refused, the error logged)",
}
