"""The interop matrix: cells (one pairing, one wire/transport, one route, one message shape),
the peers that play them (native engine, libzmq, nng, nanomsg and nng 1.5 CLIs, the gateway),
their expected outcome derived from the pairing tables, and the pytest selection.

``gateway.tools.matrix.cells`` is the one cell library used by pytest and by ``gateway matrix run``.
"""
