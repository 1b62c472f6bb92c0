"""The asyncio runtime: sockets, pipes, listeners and dialers (all I/O lives here)."""

from gateway.engine.pipe import Pipe
from gateway.engine.socket import Socket

__all__ = ["Pipe", "Socket"]
