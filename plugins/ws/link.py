"""The WebSocket layer both ws wires share, sans-IO, on wsproto: the HTTP upgrade as the
handshake (the path, the subprotocol, the browser's ``Origin``), one binary WebSocket message
per wire message, pings answered, fragments reassembled within a bound, a refused upgrade
answered in HTTP. A wire is a subclass (:class:`gateway_plugins.ws.codec.WsSpCodec`, SP;
:class:`gateway_plugins.ws.zws.ZwsCodec`, ZeroMQ's ZWS 2.0) that says which subprotocols it
offers or takes and what a whole message means.

Nothing but the project's protocol errors leaves the layer: ``receive_data`` never raises,
``next_event`` raises what wsproto's failure meant (a :class:`Refused` upgrade is a failed
handshake, its reason the wire's; an ``Origin`` outside the allow-list is :class:`Forbidden`,
answered 403).
"""

from __future__ import annotations

from urllib.parse import urlsplit

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

from gateway.errors import MessageTooLarge, PairingError, RemoteProtocolError
from gateway.settings.convert import normal_origin
from gateway.wire import events
from gateway.wire.events import Event

#: what a listener answers when wsproto cannot make the answer itself
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_UNDECODABLE = "a header that does not decode (not ASCII, or a bad IDNA host)"
#: how much of a peer's Origin a message keeps
_SHOWN = 120


def split_address(address: str) -> tuple[str, str]:
    """``host:port/path`` -> (``host:port``, ``/path``)."""
    hostport, slash, path = address.partition("/")
    return hostport, "/" + path if slash else "/"


class Refused(RemoteProtocolError):
    """The upgrade was refused (by us, with an HTTP answer to send first, or by the peer)."""

    handshake_reason = "sp-protocol"

    def __init__(self, message: str, farewell: bool = False, reason: str = "") -> None:
        super().__init__(message)
        self.farewell = farewell
        if reason:
            self.handshake_reason = reason


class Forbidden(Refused):
    """A browser page from an origin this endpoint does not allow (answered 403): counted as a
    refused connection (``gateway_refused_connections_total{reason="origin"}``)."""

    handshake_reason = "origin"

    def __init__(self, message: str, origin: str) -> None:
        super().__init__(message, farewell=True)
        self.origin = origin


def origin_allowed(origin: str | None, host: str, allowed: tuple[str, ...] | None) -> bool:
    """The Origin rule of a ws listener: a request without ``Origin`` (not a browser) is
    allowed; with an allow-list (``origin=``), the origin must be in it (``*``: any);
    without one, it must be the listener's own (same-origin: its host and port are the
    request's ``Host``)."""
    if origin is None:
        return True
    seen = normal_origin(origin)
    if allowed is not None:
        return "*" in allowed or seen in {normal_origin(a) for a in allowed}
    if "://" not in seen:
        return False
    try:
        page, here = urlsplit(seen), urlsplit("//" + host.strip().lower())
        page_port, here_port = page.port, here.port
    except ValueError:
        return False
    default = 443 if page.scheme in ("https", "wss") else 80
    return page.hostname == here.hostname and (page_port or default) == (here_port or default)


class WsLink:
    """One WebSocket connection carrying a wire (see the module doc). A subclass sets
    ``family`` and implements :meth:`_offers`, :meth:`_choose`, :meth:`_opened` and
    :meth:`_whole`; ``refusal`` is the handshake reason of its refused upgrades."""

    family = ""
    refusal = "sp-protocol"
    #: the wire's name in messages ("SP", "ZWS")
    label = ""

    def __init__(self, *, max_message_size: int, address: str, client: bool,
                 limit: int, origins: tuple[str, ...] | None = None) -> None:
        self.max_message_size = max_message_size
        self.client = client
        self.host, self.path = split_address(address)
        self.origins = origins
        self.handshake_done = False
        self.subprotocol = ""
        self._ws = WSConnection(ConnectionType.CLIENT if client else ConnectionType.SERVER)
        self._events = self._ws.events()
        self._out = bytearray()
        self._pong = b""
        self._parts: list[bytes] = []
        self._size = 0
        self._limit = limit
        self._upgraded = False
        self._error: RemoteProtocolError | None = None

    # -- what a wire says ---------------------------------------------------------------------
    def _offers(self) -> list[str]:
        """A dialer's subprotocols, in order of preference."""
        raise NotImplementedError

    def _choose(self, offered: list[str]) -> str | None:
        """A listener's pick among the client's subprotocols (None: refuse, 400)."""
        raise NotImplementedError

    def _opened(self, subprotocol: str) -> Event | None:
        """The upgrade is done with ``subprotocol``: the wire's own handshake starts."""
        raise NotImplementedError

    def _whole(self, data: bytes) -> Event | None:
        """One whole binary WebSocket message."""
        raise NotImplementedError

    def _refuse(self, message: str, farewell: bool = False) -> Refused:
        return Refused(message, farewell, self.refusal)

    # -- outgoing ----------------------------------------------------------------------------
    def initiate(self) -> bytes:
        """A dialer's upgrade request; a listener says nothing first."""
        if not self.client:
            return b""
        return self._ws.send(Request(host=self.host, target=self.path,
                                     subprotocols=self._offers()))

    def data_to_send(self) -> bytes:
        """Handshake answers, pongs and close answers the layer owes the peer."""
        if self._pong:
            self._out += self._pong
            self._pong = b""
        out = bytes(self._out)
        self._out.clear()
        return out

    def discard_pong(self) -> None:
        self._pong = b""

    def _binary(self, data: bytes) -> bytes:
        return self._ws.send(BytesMessage(data=data))

    def _ping(self, payload: bytes = b"") -> bytes:
        return self._ws.send(Ping(payload=payload))

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
        if self._upgraded:
            return RemoteProtocolError(f"WebSocket: {what}")
        if self.client:  # the server's answer is bad: a failed handshake all the same
            return self._refuse(f"WebSocket upgrade failed: {what}")
        hint = getattr(exc, "event_hint", None)
        try:
            answer = self._ws.send(hint if isinstance(hint, RejectConnection)
                                   else RejectConnection(status_code=400))
        except Exception:  # noqa: BLE001 (wsproto cannot answer in its state: answer raw)
            answer = _BAD_REQUEST
        self._out += answer
        return self._refuse(f"WebSocket upgrade refused: {what}", farewell=True)

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
            if got not in self._offers():
                raise PairingError(f"the server accepted subprotocol {got!r}, not one of "
                                   f"{self._offers()}", ours=",".join(self._offers()),
                                   theirs=got)
            return self._upgrade(got)
        if isinstance(event, RejectConnection):
            raise self._refuse(f"the server refused the WebSocket upgrade (HTTP "
                               f"{event.status_code})")
        if isinstance(event, TextMessage):
            raise RemoteProtocolError("a text WebSocket message (the wire sends binary ones)")
        if isinstance(event, CloseConnection):
            if self._ws.state.name != "CLOSED":
                self._out += self._ws.send(event.response())
        return None

    def _request(self, event: Request) -> Event | None:
        if event.target.split("?")[0] != self.path:
            return self._reject(404, f"no {self.label} listener at {event.target!r} (this one: "
                                     f"{self.path!r})")
        origin = next((v.decode("latin-1") for k, v in event.extra_headers
                       if k.lower() == b"origin"), None)
        if not origin_allowed(origin, event.host, self.origins):
            self._out += self._ws.send(RejectConnection(status_code=403))
            shown = origin if origin is not None and len(origin) <= _SHOWN \
                else f"{(origin or '')[:_SHOWN]}..."
            rule = (",".join(self.origins) if self.origins is not None
                    else f"same origin as {event.host!r}")
            raise Forbidden(f"WebSocket upgrade refused: Origin {shown!r} is not allowed "
                            f"({rule})", shown)
        chosen = self._choose(list(event.subprotocols))
        if chosen is None:
            return self._reject(400, f"the client asks for {list(event.subprotocols) or 'none'}; "
                                     f"this takes {self._takes()}")
        self._out += self._ws.send(AcceptConnection(subprotocol=chosen))
        return self._upgrade(chosen)

    def _takes(self) -> str:
        return "another subprotocol"

    def _reject(self, status: int, why: str) -> Event:
        self._out += self._ws.send(RejectConnection(status_code=status))
        raise self._refuse(f"WebSocket upgrade refused: {why}", farewell=True)

    def _upgrade(self, subprotocol: str) -> Event | None:
        self._upgraded = True
        self.subprotocol = subprotocol
        return self._opened(subprotocol)

    def _message(self, data: bytes, finished: bool) -> Event | None:
        if not self._upgraded:
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
        return self._whole(data)


__all__ = ["Forbidden", "Refused", "WsLink", "origin_allowed", "split_address"]
