"""What envelope translation refuses, and why: each refusal carries its ``reason``, a word of
:data:`gateway.errors.DROP_REASONS` (the one table counters, logs and docs share)."""

from __future__ import annotations

from gateway.errors import Drop, RemoteProtocolError

__all__ = ["EnvelopeError", "TableFull", "UnknownToken"]


class EnvelopeError(RemoteProtocolError):
    """An envelope that cannot cross families (the peer's message is at fault). ``reason`` is a
    short label for counters."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class UnknownToken(EnvelopeError):
    """A reply whose token is unknown (never minted, already answered, expired)."""

    def __init__(self, reason: str = "unknown-token", detail: str = "") -> None:
        super().__init__(reason, detail)


class TableFull(Drop):
    """Our limit, not the peer's fault: no room for one more pending request in the token
    table, even after expiring the old ones. The request is dropped and counted as
    ``table-full`` (a :class:`~gateway.errors.Drop`: this layer refuses one message, the pipe
    stays open)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("table-full", detail)
