"""The asyncio runtime: sockets, pipes, listeners and dialers (all I/O lives here)."""

from gateway.engine.socket import Pipe, Socket

__all__ = ["Pipe", "Socket"]
