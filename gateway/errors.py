"""One exception tree. The class says whose fault it is (h11 habit)."""

from __future__ import annotations


class GatewayError(Exception):
    """Root of every error this package raises on purpose."""


class ProtocolError(GatewayError):
    """A wire-protocol violation."""


class LocalProtocolError(ProtocolError):
    """We were asked to do something the protocol forbids (our fault)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids (its fault): the pipe is closed."""


class PairingError(RemoteProtocolError):
    """The peer announced a socket type this socket may not talk to."""


class MessageTooLarge(RemoteProtocolError):
    """The peer announced a message over the size limit."""


class StateError(GatewayError):
    """A call out of order for the socket pattern (libzmq's EFSM, nng's NNG_ESTATE)."""


class TransportError(GatewayError):
    """Bind/connect failed: address in use, unreachable, unknown transport."""


class ConfigError(GatewayError):
    """A bad URL, option or configuration file. The CLI prints it on one line and exits 2."""


class Closed(GatewayError):
    """The socket was closed."""
