"""The asyncio runtime: sockets, pipes, listeners and dialers (all I/O lives here).

Nothing is imported here: ``gateway.engine.loop`` (the CLI's loop) must not load the engine,
and ``gateway.Socket`` loads it on first use.
"""
