"""What a native socket tells the one object that observes it (a bridge's device), instead of
callbacks set on the socket by attribute (mangos' ``SetPipeEventHook``).

A socket without an observer keeps messages in its inbox for ``recv``, counts its pattern's
drops itself and forgets a lost pipe; :class:`SocketHooks` is that behaviour, and a device
subclasses it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.errors import Drop
from gateway.message import Message


class SocketHooks:
    """The observer interface (every method is called on the socket's loop).

    ``fast``: a per-read forwarder the socket gives each of its ready pipes (the compiled
    kernel's, :mod:`gateway.kernel`): called with the pipe once per read before anything else,
    it takes the usual messages straight from the pipe's codec and returns how many it took;
    what it leaves goes the way of every message (None: none). ``fast_read``: its twin for a
    whole read, called with the pipe and the bytes before the codec sees them; True when it
    took the read (what it left went on through ``Pipe.process``), False to leave the read to
    the pipe (None: none)."""

    fast: Callable[[Any], int] | None = None
    fast_read: Callable[[Any, bytes], bool] | None = None

    def message(self, msg: Message) -> bool:
        """A message the pattern delivered: True when the observer took it (forwarded, or
        dropped and counted); False leaves it to the inbox (``recv``). Called only while the
        inbox is empty, so order is kept. Once per message: an observer may make it an
        instance attribute (a closure) to save the method's own frame."""
        return False

    def dropped(self, drop: Drop, endpoint: str) -> bool:
        """The pattern dropped a received message: True when the observer counted it (its
        ledger); False lets the socket count it (``gateway_socket_dropped_messages_total``)."""
        return False

    def unsent(self, reason: str, endpoint: str, count: int) -> bool:
        """``count`` messages this socket was given to send were lost before they reached the
        OS: a fan-out's subscriber at its mark (``hwm``), or what waited in the queue of a pipe
        that closed. True when the observer counted them (its ledger); False lets the socket
        count them (``gateway_socket_dropped_messages_total``)."""
        return False

    def pipe_lost(self, routing_id: bytes) -> None:
        """A ready pipe went away (a device counts what it had in flight there, at once)."""

    def peers_changed(self) -> None:
        """Who can take a send changed: a subscription came or went, a pipe's writability
        changed, a pipe went away (a capture endpoint hands its bridge to the compiled kernel
        while none of its readers can take a copy)."""


__all__ = ["SocketHooks"]
