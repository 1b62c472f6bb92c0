"""Why a connection ended before its handshake completed, as a value the owner logs and counts.

A pipe builds one :class:`PipeFailure` from what its codec raised (:func:`failure_of`), what a
layer below reported (a :class:`~gateway.errors.LayerError`, e.g. TLS) or how far the peer got
before it closed (:func:`peer_closed`); the socket turns it into one rate-limited log line and
``gateway_handshake_failures_total{reason}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import LayerError, MechanismError, PairingError, ProtocolError, VersionError


@dataclass(frozen=True, slots=True)
class PipeFailure:
    """Why a connection ended before its handshake completed: ``reason`` (a
    :data:`~gateway.errors.HANDSHAKE_REASONS` key), a ``detail`` for people and the ``fields``
    of the owner's log line (what the peer announced, how far it got)."""

    reason: str
    detail: str
    fields: Mapping[str, str] = field(default_factory=dict)


def failure_of(exc: ProtocolError, family: str) -> PipeFailure:
    """A protocol error before the handshake completed, classified, with what the peer said."""
    fields: dict[str, str] = {"wire": family}
    if isinstance(exc, VersionError):
        fields["peer_version"] = exc.peer_version
    elif isinstance(exc, MechanismError):
        fields["peer_mechanism"] = exc.peer_mechanism
        fields["mechanism"] = exc.mechanism
    elif isinstance(exc, PairingError):
        fields["socket_type"] = exc.ours
        fields["peer_type"] = exc.theirs
    return PipeFailure(getattr(exc, "handshake_reason", "garbage"), str(exc), fields)


def peer_closed(codec: Any, family: str, received: int, exc: Exception | None) -> PipeFailure:
    """The peer ended the connection before the handshake, after ``received`` bytes: what was
    seen, from how far the codec got (its optional ``handshake_stage``)."""
    detail = (f"the peer closed the connection after {received} bytes, before the handshake "
              "completed")
    if exc is not None:
        detail += f" ({str(exc) or type(exc).__name__})"
    fields = {"wire": family}
    stage = getattr(codec, "handshake_stage", "")
    if stage:
        fields["stage"] = stage
    if stage == "ready":
        # What was seen: a 3.x greeting with our mechanism, then the end, no READY. libzmq does
        # exactly this when it refuses our READY's Socket-Type (it checks ours before it sends
        # its own), so it is counted as ``pairing``; the line says what came and that the
        # refusal is inferred (a crash looks the same).
        ours = codec.socket_type
        detail += (f"; its greeting came (mechanism matched), its READY did not: a libzmq peer "
                   f"closes so when it refuses this socket's type ({ours})")
        fields.update(socket_type=ours, inferred="true")
        return PipeFailure("pairing", detail, fields)
    return PipeFailure("peer-closed", detail, fields)


def failure_at_loss(exc: Exception | None, known: PipeFailure | None, codec: Any, family: str,
                    received: int) -> PipeFailure:
    """Why a connection lost before its handshake completed failed: what a layer below said
    (TLS: a :class:`~gateway.errors.LayerError`), what was found already (``known``), or
    what :func:`peer_closed` makes of it."""
    if isinstance(exc, LayerError):
        return PipeFailure(exc.reason, exc.detail, exc.fields)
    return known or peer_closed(codec, family, received, exc)


__all__ = ["PipeFailure", "failure_at_loss", "failure_of", "peer_closed"]
