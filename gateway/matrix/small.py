"""A small matrix (about 20 cells, well under a minute of cell time) for ``make demo`` and the
Spark test: every implementation once, the four illegal ZMTP pairings the seed note got wrong,
both SP illegal pairings, one size-limit refusal, and each cross-family gateway route.

    gateway matrix run --out /tmp/matrix --select @small && gateway matrix report /tmp/matrix
"""

from __future__ import annotations

from interop_tests.cells import Cell


def small_selection() -> list[Cell]:
    d, g = "direct", "gateway"
    cells = [
        # ZMTP, libzmq both ends: two legal, the four illegal pairings of the seed note
        Cell("libzmq", "REQ", "libzmq", "REP", "zmq+tcp", d, "small"),
        Cell("libzmq", "DEALER", "libzmq", "ROUTER", "zmq+tcp", d, "64k"),
        Cell("libzmq", "REQ", "libzmq", "REQ", "zmq+tcp", d, "small"),
        Cell("libzmq", "REQ", "libzmq", "DEALER", "zmq+tcp", d, "small"),
        Cell("libzmq", "REP", "libzmq", "REP", "zmq+tcp", d, "small"),
        Cell("libzmq", "REP", "libzmq", "ROUTER", "zmq+tcp", d, "small"),
        # the native engine against libzmq and nng
        Cell("native", "REQ", "libzmq", "ROUTER", "zmq+tcp", d, "small"),
        Cell("libzmq", "DEALER", "native", "REP", "zmq+ipc", d, "empty"),
        Cell("nng", "REQ", "native", "REP", "sp+tcp", d, "small"),
        Cell("native", "REQ", "nng-raw", "REP", "sp+tcp", d, "small"),
        # SP libraries and CLIs
        Cell("nanomsg", "REQ", "nng", "REP", "sp+tcp", d, "small"),
        Cell("nng-raw", "REQ", "nng-1.5", "REP", "sp+tcp", d, "small"),
        Cell("nng", "REQ", "nng", "REQ", "sp+tcp", d, "small"),
        Cell("nng", "REP", "nng", "REP", "sp+tcp", d, "small"),
        Cell("nng", "REQ", "nanomsg", "REP", "sp+tcp", d, "oversize"),  # nanomsg's 1 MiB limit
        # through the gateway, both directions, library and native backends
        Cell("libzmq", "REQ", "nng", "REP", "zmq+tcp->sp+tcp", f"{g}:pyzmq->pynng", "small"),
        Cell("libzmq", "DEALER", "nanomsg", "REP", "zmq+tcp->sp+tcp", f"{g}:native->native", "small"),
        Cell("nng", "REQ", "libzmq", "REP", "sp+tcp->zmq+tcp", f"{g}:pynng->pyzmq", "small"),
        Cell("nng-1.5", "REQ", "libzmq", "ROUTER", "sp+tcp->zmq+tcp", f"{g}:native->pyzmq", "small"),
        Cell("libzmq", "REQ", "libzmq", "REP", "zmq+tcp->zmq+tcp", f"{g}:pyzmq->pyzmq", "small"),
        Cell("nng", "REQ", "nng-raw", "REP", "sp+tcp->sp+tcp", f"{g}:pynng->pynng", "small"),
    ]
    for c in cells:
        c.validate()
    return cells
