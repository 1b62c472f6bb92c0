"""Events that the sans-IO wire codecs emit from ``next_event()``.

Frozen, slotted, keyword-only dataclasses (h11/wsproto style). A received message is not
wrapped in an event: ``next_event()`` returns the message's parts as a plain ``tuple[bytes, ...]``
(ZMTP: the frames; SP: a 1-tuple with the payload), because it happens once per message on the
hot path. Everything else is one of the classes below.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class HandshakeComplete:
    """The peer's greeting/header (and READY, on ZMTP) arrived and the pairing check passed.

    ``peer_type`` is the ZMTP Socket-Type (``"REQ"``, ``"ROUTER"``, ...) or the SP protocol
    name (``"req0"``/``"rep0"``); ``identity`` is the ZMTP Identity property (``b""`` if none or SP);
    ``properties`` holds every READY property, names lower-cased.
    """

    peer_type: str
    identity: bytes = b""
    version: tuple[int, int] = (3, 1)
    properties: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerError:
    """ZMTP ERROR command from the peer. The connection is dead after it."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Ping:
    """ZMTP PING from the peer; the codec has already queued the PONG (see ``data_to_send``)."""

    ttl: int
    context: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Pong:
    """ZMTP PONG from the peer."""

    context: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """A ZMTP 3.1 ``SUBSCRIBE`` (``subscribe=True``) or ``CANCEL`` command from the peer (RFC 37),
    with its topic prefix. The ZMTP 3.0 form (a one-frame message ``0x01``/``0x00`` + topic,
    RFC 23) arrives as an ordinary message: the publishing pattern reads it."""

    subscribe: bool
    topic: bytes


Event = HandshakeComplete | PeerError | Ping | Pong | Subscription | tuple
