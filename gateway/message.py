"""The canonical message: ``([header][body])`` from the seed notes, as ``Message(hops, body)``.

``hops`` is the routing envelope, outermost (most recently pushed) first:

* on SP each hop is one 4-byte big-endian word; the innermost one has its top bit set and is
  the request id;
* on ZMTP each hop is one frame that stood before the body. When the message carried an empty
  delimiter frame, the delimiter is kept as the *last hop*, so ``hops + body`` always gives back
  the exact frames that were on the wire (a DEALER that sends no delimiter stays lossless too).

``body`` is a tuple of frames: SP carries exactly one, ZMTP one or more.

A NamedTuple rather than a dataclass: it is immutable, and building one is a single
``tuple.__new__`` — it is created once per message on every hot path.
"""

from __future__ import annotations

from typing import NamedTuple

from gateway.errors import LocalProtocolError

DELIMITER = b""


class Message(NamedTuple):
    hops: tuple[bytes, ...] = ()
    body: tuple[bytes, ...] = ()

    @classmethod
    def of(cls, *body: bytes, hops: tuple[bytes, ...] = ()) -> Message:
        """``Message.of(b"a", b"b")`` — a message with the given body frames."""
        return cls(hops, body)

    @property
    def frames(self) -> tuple[bytes, ...]:
        """The frames as a ZMTP wire carries them: hops then body."""
        return self.hops + self.body

    @property
    def has_delimiter(self) -> bool:
        """True when the ZMTP envelope ended with an empty delimiter frame."""
        return bool(self.hops) and self.hops[-1] == DELIMITER

    def __repr__(self) -> str:
        return f"Message(hops={self.hops!r}, body={self.body!r})"


def sp_body_fault(body: tuple[bytes, ...]) -> str:
    """The one rule of what SP carries: exactly one body frame (a ZeroMQ message any number).
    ``""`` when ``body`` is one, else the reason word a translation refuses it with: ``no-body``
    or ``multi-frame-body`` (gateway.envelope's words)."""
    n = len(body)
    return "" if n == 1 else "no-body" if not n else "multi-frame-body"


def one_body(family: str, body: tuple[bytes, ...]) -> None:
    """:func:`sp_body_fault` for a send on a pipe of ``family``: a
    :class:`~gateway.errors.LocalProtocolError` when an SP pipe is given anything but one body
    frame (every engine path that sends asks here)."""
    if family == "sp" and len(body) != 1:  # (sp_body_fault's rule, inline: once per send)
        raise LocalProtocolError(f"SP carries exactly one body frame, not {len(body)}")
