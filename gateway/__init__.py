"""Bridges between ZeroMQ (ZMTP) and nanomsg/nng (SP) applications, and a native engine that
speaks both wires: request-reply, pub/sub, pipeline and pair.

    async with gateway.Socket("REQ") as s:
        s.connect("zmq+tcp://127.0.0.1:5555")     # or sp+tcp://...
        await s.send(b"hello")
        print(await s.recv())
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.errors import (
    Closed,
    ConfigError,
    GatewayError,
    LocalProtocolError,
    PairingError,
    ProtocolError,
    RemoteProtocolError,
    StateError,
    TransportError,
)
from gateway.hookspecs import hookimpl
from gateway.message import Message

__version__ = "0.1.0"

if TYPE_CHECKING:
    from gateway.engine.socket import Socket


def __getattr__(name: str) -> Any:  # the engine is loaded on first use, not by every command
    if name == "Socket":
        from gateway.engine.socket import Socket

        return Socket
    raise AttributeError(name)


__all__ = [
    "Closed", "ConfigError", "GatewayError", "LocalProtocolError", "Message", "PairingError",
    "ProtocolError", "RemoteProtocolError", "Socket", "StateError", "TransportError",
    "__version__", "hookimpl",
]
