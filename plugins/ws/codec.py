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

from gateway.errors import LocalProtocolError
from gateway.wire.events import Event, HandshakeComplete
from gateway.wire.sp import SpRole

from .link import Forbidden, Refused, WsLink, split_address

SUFFIX = ".sp.nanomsg.org"
#: what the backtrace may add to a message beyond ``max_message_size`` (15 hops of 4 bytes)
_HEADER_ROOM = 1024


def ws_name(role: SpRole, protocol: int) -> str:
    """nng's WebSocket name of an SP protocol: its name without the version 0 (``req``,
    ``pair1``)."""
    return role.name(protocol).removesuffix("0")


class WsSpCodec(WsLink):
    """One SP connection over WebSocket (see the module doc)."""

    family = "sp"
    refusal = "sp-protocol"
    label = "SP"

    def __init__(self, role: SpRole, *, max_message_size: int = 1 << 20, address: str = "",
                 client: bool = False, origins: tuple[str, ...] | None = None) -> None:
        super().__init__(max_message_size=max_message_size, address=address, client=client,
                         limit=max_message_size + _HEADER_ROOM, origins=origins)
        self.role = role
        self.protocol = role.protocol
        self.peer_type: str | None = None
        peers = sorted(role.accepts)
        if len(peers) != 1:
            raise LocalProtocolError("an SP WebSocket dial names one peer protocol")
        self._ours = ws_name(role, role.protocol) + SUFFIX
        self._theirs = ws_name(role, peers[0]) + SUFFIX
        self._peer_name = role.name(peers[0])

    def _offers(self) -> list[str]:
        return [self._theirs]

    def _choose(self, offered: list[str]) -> str | None:
        return self._ours if self._ours in offered else None

    def _takes(self) -> str:
        return self._ours

    def _opened(self, subprotocol: str) -> Event:
        self.handshake_done = True
        self.peer_type = self._peer_name
        return HandshakeComplete(peer_type=self._peer_name, version=(0, 0))

    def _whole(self, data: bytes) -> Event:
        return (data,)

    def send_message(self, parts: tuple[bytes, ...]) -> bytes:
        if not self.handshake_done:
            raise LocalProtocolError("SP WebSocket handshake not complete")
        return self._binary(parts[0] if len(parts) == 1 else b"".join(parts))


__all__ = ["SUFFIX", "Forbidden", "Refused", "WsSpCodec", "split_address", "ws_name"]
