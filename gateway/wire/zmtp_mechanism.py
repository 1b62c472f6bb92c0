"""The security-mechanism interface the ZMTP codec calls after the greeting (RFC 23 section
"Authentication and Confidentiality"), sans-IO; PLAIN and CURVE live in their own modules.

A mechanism sees the handshake commands, never sockets: :meth:`Mechanism.start` gives the
commands to send once the peer's greeting is read (a client's HELLO), :meth:`Mechanism.receive`
takes one command and answers ``(commands to send, the peer's metadata or None)``; metadata
arriving means the handshake is done (the codec then checks the Socket-Type as for NULL). An
encrypting mechanism (CURVE) also seals and opens every frame afterwards.

Authentication is a callable the engine gives the server side: ``authenticate(mechanism,
credentials) -> AuthResult`` (the engine adds the peer address and calls the pluggy hook
``gateway_authenticate``, as libzmq asks its ZAP handler, RFC 27).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from gateway.errors import MechanismError, RemoteProtocolError

__all__ = [
    "AuthResult",
    "Authenticate",
    "AuthenticationFailed",
    "Command",
    "Stepped",
    "CryptoError",
    "MechanismMismatch",
    "Mechanism",
    "allow_all",
]

#: one ZMTP command: (name, data)
Command = tuple[bytes, bytes]


@dataclass(frozen=True, slots=True)
class AuthResult:
    """A verdict on a peer's credentials: ``reason`` is a short label for logs and the
    ``gateway_auth_failures_total`` counter (``unknown-key``, ``bad-password``, ...)."""

    allowed: bool
    reason: str = ""
    user_id: str = ""


#: (mechanism name "PLAIN"/"CURVE", credentials) -> verdict. Credentials: PLAIN
#: ``{"username", "password"}``, CURVE ``{"client_key"}`` (the client's public key, Z85).
Authenticate = Callable[[str, Mapping[str, str]], AuthResult]


def allow_all(mechanism: str, credentials: Mapping[str, str]) -> AuthResult:
    """No authenticator: every peer that completes the handshake is accepted (libzmq with no
    ZAP handler)."""
    return AuthResult(True, "no-policy")


class MechanismMismatch(MechanismError):
    """The peer's greeting names the same as-server role (RFC 23: for PLAIN and CURVE exactly
    one side is the server); another mechanism is the codec's :class:`MechanismError`."""


class AuthenticationFailed(RemoteProtocolError):
    """Our authenticator refused the peer. The codec queues an ERROR command for it first
    (``farewell``: the pipe writes it before closing)."""

    reason = "auth"
    handshake_reason = "auth"
    farewell = True

    def __init__(self, mechanism: str, auth_reason: str, status: bytes = b"400") -> None:
        super().__init__(f"{mechanism} peer refused: {auth_reason}")
        self.mechanism = mechanism
        self.auth_reason = auth_reason or "denied"
        #: the ERROR reason sent: the ZAP status code, as libzmq does (RFC 27), so a libzmq
        #: peer's monitor reports ZMQ_EVENT_HANDSHAKE_FAILED_AUTH with it
        self.status = status


class CryptoError(RemoteProtocolError):
    """A CURVE box that does not open, a replayed nonce, a cookie or vouch that does not match."""

    reason = "curve"
    handshake_reason = "curve"


class Mechanism(Protocol):
    """What the ZMTP codec needs of a security mechanism (one instance per connection)."""

    #: the greeting's mechanism name (ASCII, at most 20 bytes): b"PLAIN", b"CURVE"
    name: bytes
    #: the greeting's as-server flag
    as_server: bool
    #: True when every frame after the handshake is sealed (:meth:`seal`/:meth:`open`)
    encrypts: bool

    def start(self, metadata: bytes) -> list[Command]:
        """The peer's greeting matched; ``metadata`` is our READY-style property list.
        Return the commands to send now (a client's HELLO; a server: none)."""
        ...

    def receive(self, name: bytes, data: bytes) -> tuple[list[Command], bytes | None]:
        """One handshake command of the peer. Returns the commands to send and, when the
        handshake is complete, the peer's metadata (else None). Raises a
        :class:`~gateway.errors.RemoteProtocolError` (``AuthenticationFailed``,
        ``CryptoError``) on anything else."""
        ...

    def seal(self, flags: int, payload: bytes) -> bytes:
        """One frame's MESSAGE command body (name included), ``flags`` 0x01 MORE 0x02 COMMAND."""
        ...

    def open(self, body: bytes) -> tuple[int, bytes]:
        """A MESSAGE command body (name included) -> (flags, payload)."""
        ...


class Stepped:
    """What PLAIN and CURVE share: our metadata and the handshake's step (0 until started).
    :meth:`start` keeps the metadata and sends :meth:`_opening`: nothing for a server, the
    HELLO for a client."""

    def __init__(self) -> None:
        self._metadata = b""
        self._step = 0

    def start(self, metadata: bytes) -> list[Command]:
        self._metadata = metadata
        self._step = 1
        return self._opening()

    def _opening(self) -> list[Command]:
        return []


def short_string(data: bytes, pos: int, what: str) -> tuple[bytes, int]:
    """A ``length(1) bytes`` field at ``pos``; the bytes and the position after them."""
    if pos >= len(data):
        raise RemoteProtocolError(f"malformed {what}")
    n = data[pos]
    end = pos + 1 + n
    if end > len(data):
        raise RemoteProtocolError(f"malformed {what}")
    return bytes(data[pos + 1:end]), end
