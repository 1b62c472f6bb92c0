"""The implementations the matrix plays, as data: one row each, read by the cell library (which
cells exist), the runner (which peer plays them) and the report (what each one is).

Ten outside implementations or generations on the wire, plus this project's engine:

========================  ======  ===============================================================
name                      wire    the wire implementation inside
========================  ======  ===============================================================
``native``                both    this project's engine (Python, its own ZMTP and SP code)
``libzmq``                zmq     libzmq 4.3.5, bundled in pyzmq (in the matrix's process)
``libzmq-4.3.4``          zmq     libzmq 4.3.4, Debian's libzmq5 through Debian's python3-zmq
``libzmq-4.1``            zmq     libzmq 4.1.6, bundled in pyzmq 16.0.4 (Python 3.6): ZMTP 3.0
``omq``                   zmq     omq.rs 0.21, a ZeroMQ implementation in Rust (pyomq)
``jeromq-0.3``            zmq     JeroMQ 0.3.6, Debian's pure-Java ZeroMQ: ZMTP 2.0
``jszmq``                 zmq     jszmq 0.1.2, the JavaScript ZeroMQ under Node: ZWS 2.0 only
``nng`` / ``nng-raw``     sp      nng 1.11, bundled in pynng 0.9 (cooked / raw sockets)
``nng-2.0``               sp      nng 2.0.0-dev, bundled in python-nng 0.2.0
``nng-1.5``               sp      nng 1.5.2, Debian's ``nngcat``
``nng-1.1``               sp      nng 1.1.1, bundled in pynng 0.4.1 (Python 3.7)
``nanomsg``               sp      nanomsg 1.1.5, Debian's ``nanocat`` (nng's predecessor)
========================  ======  ===============================================================

Each row says what the implementation can play (socket types, transports, mechanisms), how
it is run (in this process, a CLI, a Java or another Python's process: ``runtime``) and what
it can tell (``evidence``: a completed handshake vs a refused one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

MIB = 1 << 20
_ZMTP_REQREP = frozenset({"REQ", "REP", "DEALER", "ROUTER"})
_ZMTP_PATTERNS = frozenset({"PUB", "SUB", "XPUB", "XSUB", "PUSH", "PULL", "PAIR"})
_SP_REQREP = frozenset({"REQ", "REP"})
_SP_PATTERNS = frozenset({"PUB", "SUB", "PUSH", "PULL", "PAIR0", "PAIR1"})


@dataclass(frozen=True)
class Impl:
    name: str
    wires: tuple[str, ...]
    what: str
    runtime: str  # in-process | remote (a peer process) | cli | java
    reqrep: frozenset[str] = frozenset()
    patterns: frozenset[str] = frozenset()
    nets: frozenset[str] = frozenset({"tcp", "ipc"})
    mechanisms: frozenset[str] = frozenset()  # PLAIN, CURVE on its ZeroMQ hops
    sp_transports: frozenset[str] = frozenset()  # tls+tcp, ws, wss on its SP hops
    zmq_transports: frozenset[str] = frozenset()  # ws (ZWS 2.0) on its ZeroMQ hops
    #: default maximum *received* message size (None: no limit), measured, not assumed
    recv_limit: int | None = None
    evidence: bool = False  # it tells a completed handshake from a refused one
    heartbeat: bool = False  # it sends ZMTP heartbeats (PING/PONG, ZMTP 3.1)
    router_client: bool = False  # a ROUTER client that names its peer (CONNECT_ROUTING_ID)
    #: pattern kinds it can play only as a repeating sender or a plain receiver (CLIs)
    fixed_sender: bool = False
    unsubscribe: bool = True  # a subscriber that can drop a subscription while running
    #: the ZMTP major versions it speaks (a 3.x peer that negotiates also meets a 2.0 one)
    zmtp: tuple[int, ...] = (2, 3)
    tags: tuple[str, ...] = field(default=())


IMPLEMENTATIONS: dict[str, Impl] = {i.name: i for i in (
    Impl("native", ("zmq", "sp"), "this project's engine (its own ZMTP and SP code)",
         "in-process", _ZMTP_REQREP | _SP_REQREP, _ZMTP_PATTERNS | _SP_PATTERNS,
         mechanisms=frozenset({"PLAIN", "CURVE"}),
         sp_transports=frozenset({"tls+tcp", "ws", "wss"}), zmq_transports=frozenset({"ws"}),
         recv_limit=MIB, evidence=True, heartbeat=True),
    Impl("libzmq", ("zmq",), "libzmq 4.3.5, bundled in pyzmq", "in-process", _ZMTP_REQREP,
         _ZMTP_PATTERNS, mechanisms=frozenset({"PLAIN", "CURVE"}), evidence=True,
         heartbeat=True, router_client=True),
    Impl("libzmq-4.3.4", ("zmq",), "libzmq 4.3.4: Debian's libzmq5 through Debian's "
         "python3-zmq", "remote", _ZMTP_REQREP, _ZMTP_PATTERNS,
         mechanisms=frozenset({"PLAIN", "CURVE"}), evidence=True, heartbeat=True),
    Impl("libzmq-4.1", ("zmq",), "libzmq 4.1.6, bundled in pyzmq 16.0.4 on Python 3.6 "
         "(ZMTP 3.0: no heartbeats, no handshake events)", "remote", _ZMTP_REQREP,
         _ZMTP_PATTERNS, mechanisms=frozenset({"PLAIN", "CURVE"})),
    Impl("omq", ("zmq",), "omq.rs 0.21, a ZeroMQ implementation in Rust (its own ZMTP code), "
         "through pyomq", "remote", _ZMTP_REQREP, _ZMTP_PATTERNS,
         mechanisms=frozenset({"PLAIN", "CURVE"}), zmtp=(3,)),  # measured: no ZMTP 2.0
    Impl("jeromq-0.3", ("zmq",), "JeroMQ 0.3.6, Debian's pure-Java ZeroMQ (ZMTP 2.0)", "java",
         _ZMTP_REQREP, nets=frozenset({"tcp"}), zmtp=(2,)),
    Impl("jszmq", ("zmq",), "jszmq 0.1.2, the JavaScript ZeroMQ under Node (ZWS 2.0 without "
         "a mechanism: no socket type is exchanged)", "node", _ZMTP_REQREP, nets=frozenset({"tcp"}),
         zmq_transports=frozenset({"ws"}), tags=("ws-only",)),
    Impl("nng", ("sp",), "nng 1.11, bundled in pynng 0.9", "in-process", _SP_REQREP,
         _SP_PATTERNS, sp_transports=frozenset({"tls+tcp", "ws", "wss"}), evidence=True),
    Impl("nng-raw", ("sp",), "nng 1.11 raw sockets (pynng, headers by hand)", "in-process",
         _SP_REQREP, evidence=True),
    Impl("nng-2.0", ("sp",), "nng 2.0.0-dev, bundled in python-nng 0.2.0", "remote",
         _SP_REQREP, _SP_PATTERNS, sp_transports=frozenset({"ws"}), evidence=True),
    Impl("nng-1.5", ("sp",), "nng 1.5.2, Debian's nngcat", "cli", _SP_REQREP, _SP_PATTERNS,
         fixed_sender=True, unsubscribe=False),
    Impl("nng-1.1", ("sp",), "nng 1.1.1, bundled in pynng 0.4.1 on Python 3.7", "remote",
         _SP_REQREP, _SP_PATTERNS, recv_limit=MIB),  # measured: 1 MiB by default (then none)
    Impl("nanomsg", ("sp",), "nanomsg 1.1.5, Debian's nanocat", "cli", _SP_REQREP,
         _SP_PATTERNS - {"PAIR1"}, recv_limit=MIB, fixed_sender=True, unsubscribe=False),
)}

#: the reference implementation of each wire: the other implementations meet it on every
#: pairing, and the gateway's cells use it on the far side
REFERENCE = {"zmq": "libzmq", "sp": "nng"}


def impls_of(wire: str, *, runtime: str | None = None, pattern: bool = False) -> tuple[str, ...]:
    """The implementations that speak ``wire`` (that play patterns, with ``pattern``)."""
    return tuple(n for n, i in IMPLEMENTATIONS.items()
                 if wire in i.wires and (runtime is None or i.runtime == runtime)
                 and (not pattern or i.patterns))


def kinds_of(impl: str, wire: str) -> frozenset[str]:
    """Every socket type ``impl`` plays on ``wire``."""
    i = IMPLEMENTATIONS[impl]
    own = _ZMTP_REQREP | _ZMTP_PATTERNS if wire == "zmq" else _SP_REQREP | _SP_PATTERNS
    return (i.reqrep | i.patterns) & own
