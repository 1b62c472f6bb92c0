"""ZMTP PLAIN (rfc.zeromq.org spec 24), both roles, sans-IO.

    C: HELLO username password    S: WELCOME      (or ERROR when refused)
    C: INITIATE metadata          S: READY metadata

Credentials travel in clear text: use PLAIN on trusted networks or inside a tunnel.
"""

from __future__ import annotations

from gateway.errors import LocalProtocolError, RemoteProtocolError
from gateway.wire.zmtp_mechanism import (
    Authenticate,
    AuthenticationFailed,
    Command,
    Stepped,
    allow_all,
    short_string,
)

__all__ = ["PlainClient", "PlainServer", "hello_body"]

_HELLO, _WELCOME, _INITIATE, _READY = b"HELLO", b"WELCOME", b"INITIATE", b"READY"


def hello_body(username: bytes, password: bytes) -> bytes:
    """HELLO data (RFC 24): ``username-len username password-len password``."""
    if len(username) > 255 or len(password) > 255:
        raise LocalProtocolError("PLAIN username and password are at most 255 bytes each")
    return bytes((len(username),)) + username + bytes((len(password),)) + password


class _Plain(Stepped):
    name = b"PLAIN"
    encrypts = False
    as_server = False

    def seal(self, flags: int, payload: bytes) -> bytes:  # pragma: no cover - not encrypting
        raise LocalProtocolError("PLAIN does not seal frames")

    def open(self, body: bytes) -> tuple[int, bytes]:  # pragma: no cover - not encrypting
        raise LocalProtocolError("PLAIN does not open frames")

    def _expect(self, name: bytes, want: bytes) -> None:
        if name != want:
            raise RemoteProtocolError(f"PLAIN: expected {want.decode()}, got {name!r}")


class PlainClient(_Plain):
    """The PLAIN client: sends its username and password."""

    def __init__(self, username: bytes, password: bytes) -> None:
        super().__init__()
        self._hello = hello_body(username, password)

    def _opening(self) -> list[Command]:
        return [(_HELLO, self._hello)]

    def receive(self, name: bytes, data: bytes) -> tuple[list[Command], bytes | None]:
        if self._step == 1:
            self._expect(name, _WELCOME)
            if data:
                raise RemoteProtocolError("PLAIN: WELCOME with data")
            self._step = 2
            return [(_INITIATE, self._metadata)], None
        if self._step == 2:
            self._expect(name, _READY)
            self._step = 3
            return [], bytes(data)
        raise RemoteProtocolError(f"PLAIN: unexpected command {name!r}")


class PlainServer(_Plain):
    """The PLAIN server: asks ``authenticate`` about each client's username and password."""

    as_server = True

    def __init__(self, authenticate: Authenticate = allow_all) -> None:
        super().__init__()
        self._authenticate = authenticate
        self.user_id = ""

    def receive(self, name: bytes, data: bytes) -> tuple[list[Command], bytes | None]:
        if self._step == 1:
            self._expect(name, _HELLO)
            username, pos = short_string(data, 0, "PLAIN HELLO username")
            password, pos = short_string(data, pos, "PLAIN HELLO password")
            if pos != len(data):
                raise RemoteProtocolError("PLAIN: trailing bytes after HELLO")
            verdict = self._authenticate("PLAIN", {
                "username": username.decode("utf-8", "replace"),
                "password": password.decode("utf-8", "replace"),
            })
            if not verdict.allowed:
                raise AuthenticationFailed("PLAIN", verdict.reason)
            self.user_id = verdict.user_id or username.decode("utf-8", "replace")
            self._step = 2
            return [(_WELCOME, b"")], None
        if self._step == 2:
            self._expect(name, _INITIATE)
            self._step = 3
            return [(_READY, self._metadata)], bytes(data)
        raise RemoteProtocolError(f"PLAIN: unexpected command {name!r}")
