"""SP over WebSocket as a sans-IO wire codec, on wsproto (nanomsg ``sp-websocket-mapping-01``;
nng ``src/sp/transport/ws``).

The dialer asks for the *peer's* protocol as its subprotocol, ``<name>.sp.nanomsg.org``
(``rep.sp.nanomsg.org`` from a REQ), the listener accepts only its own name and echoes it; each
SP message (its header words and body) is one binary WebSocket message; there is no 8-byte SP
header (the subprotocol stands for it) and no length prefix. The codec does the HTTP upgrade as
its handshake, so the engine's pipe sees the usual events: :class:`HandshakeComplete`, then one
``(payload,)`` per message. Pings are answered (one pong at most while the peer does not read:
``discard_pong``), fragments reassembled (bounded by ``max_message_size`` plus the backtrace),
a refused upgrade is a failed handshake (``sp-protocol``: 404 for another path, 400 for another
protocol or for a request wsproto cannot read: a bad HTTP message, a header that is not ASCII),
a text message is garbage. Nothing but the project's protocol errors leaves the codec:
``receive_data`` never raises, ``next_event`` raises what wsproto's failure meant.
"""

from __future__ import annotations

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError as WsLocalError
from wsproto.utilities import RemoteProtocolError as WsRemoteError

from gateway.errors import LocalProtocolError, MessageTooLarge, PairingError, RemoteProtocolError
from gateway.wire import events
from gateway.wire.events import Event, HandshakeComplete
from gateway.wire.sp import SpRole

SUFFIX = ".sp.nanomsg.org"
#: what the backtrace may add to a message beyond ``max_message_size`` (15 hops of 4 bytes)
_HEADER_ROOM = 1024


def ws_name(role: SpRole, protocol: int) -> str:
    """nng's WebSocket name of an SP protocol: its name without the version 0 (``req``,
    ``pair1``)."""
    return role.name(protocol).removesuffix("0")


def split_address(address: str) -> tuple[str, str]:
    """``host:port/path`` -> (``host:port``, ``/path``)."""
    hostport, slash, path = address.partition("/")
    return hostport, "/" + path if slash else "/"


#: what a listener answers when wsproto cannot make the answer itself
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_UNDECODABLE = "a header that does not decode (not ASCII, or a bad IDNA host)"


class Refused(RemoteProtocolError):
    """The upgrade was refused (by us, with an HTTP answer to send first, or by the peer)."""

    handshake_reason = "sp-protocol"

    def __init__(self, message: str, farewell: bool = False) -> None:
        super().__init__(message)
        self.farewell = farewell


class WsSpCodec:
    """One SP connection over WebSocket (see the module doc)."""

    family = "sp"

    def __init__(self, role: SpRole, *, max_message_size: int = 1 << 20, address: str = "",
                 client: bool = False) -> None:
        self.role = role
        self.protocol = role.protocol
        self.max_message_size = max_message_size
        self.client = client
        self.host, self.path = split_address(address)
        self.handshake_done = False
        self.peer_type: str | None = None
        self._ws = WSConnection(ConnectionType.CLIENT if client else ConnectionType.SERVER)
        self._events = self._ws.events()
        self._out = bytearray()
        self._pong = b""
        self._parts: list[bytes] = []
        self._size = 0
        self._limit = max_message_size + _HEADER_ROOM
        self._error: RemoteProtocolError | None = None
        peers = sorted(role.accepts)
        if len(peers) != 1:
            raise LocalProtocolError("an SP WebSocket dial names one peer protocol")
        self._ours = ws_name(role, role.protocol) + SUFFIX
        self._theirs = ws_name(role, peers[0]) + SUFFIX
        self._peer_name = role.name(peers[0])

    # -- outgoing ----------------------------------------------------------------------------
    def initiate(self) -> bytes:
        """A dialer's upgrade request; a listener says nothing first."""
        if not self.client:
            return b""
        return self._ws.send(Request(host=self.host, target=self.path,
                                     subprotocols=[self._theirs]))

    def data_to_send(self) -> bytes:
        """Handshake answers, pongs and close answers the codec owes the peer."""
        if self._pong:
            self._out += self._pong
            self._pong = b""
        out = bytes(self._out)
        self._out.clear()
        return out

    def discard_pong(self) -> None:
        self._pong = b""

    def send_message(self, parts: tuple[bytes, ...]) -> bytes:
        if not self.handshake_done:
            raise LocalProtocolError("SP WebSocket handshake not complete")
        return self._ws.send(BytesMessage(data=parts[0] if len(parts) == 1 else b"".join(parts)))

    # -- incoming ----------------------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        """Never raises: what wsproto (or h11, or a decoder under them) makes of a peer's
        bytes, any exception, is kept for :meth:`next_event` to raise as a protocol error; a
        listener refuses a bad upgrade request in HTTP (400, or wsproto's 426)."""
        try:
            self._ws.receive_data(data)
        except Exception as exc:  # noqa: BLE001 (peer bytes: whatever wsproto raises)
            if self._error is None:
                self._error = self._failed(exc)

    def _failed(self, exc: Exception) -> RemoteProtocolError:
        """The protocol error for what wsproto raised on the peer's bytes."""
        what = (str(exc) if isinstance(exc, (WsRemoteError, WsLocalError))
                else _UNDECODABLE if isinstance(exc, UnicodeError)
                else f"{type(exc).__name__} in the WebSocket layer")
        if self.handshake_done:
            return RemoteProtocolError(f"WebSocket: {what}")
        if self.client:  # the server's answer is bad: a failed handshake all the same
            return Refused(f"WebSocket upgrade failed: {what}")
        hint = getattr(exc, "event_hint", None)
        try:
            answer = self._ws.send(hint if isinstance(hint, RejectConnection)
                                   else RejectConnection(status_code=400))
        except Exception:  # noqa: BLE001 (wsproto cannot answer in its state: answer raw)
            answer = _BAD_REQUEST
        self._out += answer
        return Refused(f"WebSocket upgrade refused: {what}", farewell=True)

    @property
    def partial(self) -> bool:
        """True while a fragmented message waits for its last fragment."""
        return bool(self._parts)

    def next_event(self) -> Event | None:
        if self._error is not None:
            raise self._error
        while True:  # (as many events as the bytes received made)
            try:
                event = next(self._events, None)  # suspended where it is while events wait
            except Exception as exc:  # noqa: BLE001 (peer bytes: whatever wsproto raises)
                self._error = self._failed(exc)
                raise self._error from None
            if event is None:
                self._events = self._ws.events()  # exhausted: a fresh one for the next bytes
                return None
            try:
                got = self._on(event)
            except (WsRemoteError, WsLocalError) as exc:
                self._error = RemoteProtocolError(f"WebSocket: {exc}")
                raise self._error from None
            except RemoteProtocolError as exc:
                self._error = exc
                raise
            if got is not None:
                return got

    def _on(self, event: object) -> Event | None:
        if isinstance(event, BytesMessage):
            return self._message(bytes(event.data), event.message_finished)
        if isinstance(event, Ping):
            self._pong = self._ws.send(event.response())  # replaces one not yet sent
            return events.Ping(ttl=0, context=b"")
        if isinstance(event, Request):
            return self._request(event)
        if isinstance(event, AcceptConnection):
            got = event.subprotocol or ""
            if got != self._theirs:
                raise PairingError(f"the server accepted subprotocol {got!r}, not "
                                   f"{self._theirs!r}", ours=self.role.name(self.protocol),
                                   theirs=got)
            return self._done()
        if isinstance(event, RejectConnection):
            raise Refused(f"the server refused the WebSocket upgrade (HTTP {event.status_code})")
        if isinstance(event, TextMessage):
            raise RemoteProtocolError("a text WebSocket message (SP sends binary ones)")
        if isinstance(event, CloseConnection):
            if self._ws.state.name != "CLOSED":
                self._out += self._ws.send(event.response())
        return None

    def _request(self, event: Request) -> Event:
        if event.target.split("?")[0] != self.path:
            return self._reject(404, f"no SP listener at {event.target!r} (this one: "
                                     f"{self.path!r})")
        if self._ours not in event.subprotocols:
            return self._reject(400, f"the client asks for {list(event.subprotocols) or 'none'}; "
                                     f"this is {self._ours}")
        self._out += self._ws.send(AcceptConnection(subprotocol=self._ours))
        return self._done()

    def _reject(self, status: int, why: str) -> Event:
        self._out += self._ws.send(RejectConnection(status_code=status))
        raise Refused(f"WebSocket upgrade refused: {why}", farewell=True)

    def _done(self) -> HandshakeComplete:
        self.handshake_done = True
        self.peer_type = self._peer_name
        return HandshakeComplete(peer_type=self._peer_name, version=(0, 0))

    def _message(self, data: bytes, finished: bool) -> Event | None:
        if not self.handshake_done:
            raise RemoteProtocolError("a WebSocket message before the upgrade")
        self._size += len(data)
        if self._size > self._limit:
            raise MessageTooLarge(f"a WebSocket message over {self._limit} bytes")
        if not finished:
            self._parts.append(data)
            return None
        if self._parts:
            self._parts.append(data)
            data = b"".join(self._parts)
            self._parts = []
        self._size = 0
        return (data,)


__all__ = ["SUFFIX", "WsSpCodec", "split_address", "ws_name"]
