"""The pattern cells' rules: pub/sub, pipeline and pair (docs/patterns.md) on the same
:class:`~gateway.tools.matrix.cells.Cell`, with the patterns' socket types.

Shapes: ``topic`` (the subscriber holds ``a.``), ``prefix`` (``a``: a prefix of ``a.`` and
``ab``), ``all`` (the empty subscription: everything, the empty message too), ``multi`` (``a.``
and ``b.``), all four publishing one round of messages for subscribed, unsubscribed and
prefix-of-another topics; ``stream`` (20 numbered messages, each way for pair). Delivery is
checked exactly: count, order per sender, nothing for topics nobody subscribed to. Observed:
``exchanged`` (the delivery check passed), ``refused-handshake`` (nothing crossed within the
timeout), ``bad-delivery``, ``error``.

This module holds the patterns' tables (socket types, families, who pairs with whom, the
gateway's own sockets), who sends, and what a receiver must get; the pattern cells themselves
are :func:`gateway.tools.matrix.suites.pattern_cells`.
"""

from __future__ import annotations

from typing import Protocol

from gateway.tools.harness.peers import SENDERS
from gateway.tools.matrix.impls import IMPLEMENTATIONS


class PatternCell(Protocol):
    """What these rules read of a :class:`gateway.tools.matrix.cells.Cell` (which imports
    them: a protocol, not that class, keeps the two modules out of an import cycle)."""

    @property
    def client_type(self) -> str: ...
    @property
    def server_type(self) -> str: ...
    @property
    def shape(self) -> str: ...
    @property
    def direct(self) -> bool: ...
    @property
    def client_wire(self) -> str: ...
    @property
    def server_wire(self) -> str: ...
    @property
    def gateway_pattern(self) -> str: ...


#: the patterns' socket types per wire (SP pair0/pair1 are distinct protocols, 0x10/0x11)
PATTERN_TYPES = {"zmq": ("PUB", "SUB", "XPUB", "XSUB", "PUSH", "PULL", "PAIR"),
                 "sp": ("PUB", "SUB", "PUSH", "PULL", "PAIR0", "PAIR1")}
FAMILY_OF = {"PUB": "pubsub", "SUB": "pubsub", "XPUB": "pubsub", "XSUB": "pubsub",
             "PUSH": "pipeline", "PULL": "pipeline", "PAIR": "pair", "PAIR0": "pair",
             "PAIR1": "pair"}
PATTERN_SHAPES = ("topic", "prefix", "all", "multi", "unsubscribe", "late", "stream")
PUBSUB_SHAPES = ("topic", "prefix", "all", "multi")
#: pub/sub shapes over time: ``unsubscribe`` (the subscriber holds ``a.`` and ``b.``, gets a
#: round, drops ``b.``, gets the next round without it), ``late`` (a second subscriber of the
#: same implementation, holding ``b.``, joins after a first round: the next round reaches both)
DYNAMIC_SHAPES = ("unsubscribe", "late")
#: ZMTP (RFC 37's compatibility table, as libzmq 4.3.5 checks it at READY)
ZMTP_PATTERN_PEERS: dict[str, frozenset[str]] = {
    "PUB": frozenset({"SUB", "XSUB"}), "XPUB": frozenset({"SUB", "XSUB"}),
    "SUB": frozenset({"PUB", "XPUB"}), "XSUB": frozenset({"PUB", "XPUB"}),
    "PUSH": frozenset({"PULL"}), "PULL": frozenset({"PUSH"}), "PAIR": frozenset({"PAIR"}),
}
#: SP (nng: only the declared peer protocol; pub0 0x20/sub0 0x21, push0 0x50/pull0 0x51,
#: pair0 0x10, pair1 0x11)
SP_PATTERN_PEERS: dict[str, frozenset[str]] = {
    "PUB": frozenset({"SUB"}), "SUB": frozenset({"PUB"}), "PUSH": frozenset({"PULL"}),
    "PULL": frozenset({"PUSH"}), "PAIR0": frozenset({"PAIR0"}), "PAIR1": frozenset({"PAIR1"}),
}
#: the gateway's own sockets per pattern: (front, back) per wire
GATEWAY_PATTERN_KINDS = {
    "pubsub": {"zmq": ("XPUB", "XSUB"), "sp": ("PUB", "SUB")},
    "pipeline": {"zmq": ("PULL", "PUSH"), "sp": ("PULL", "PUSH")},
    "pair": {"zmq": ("PAIR", "PAIR"), "sp": ("PAIR0", "PAIR0")},
    "pair1": {"zmq": ("PAIR", "PAIR"), "sp": ("PAIR1", "PAIR1")},
}
PATTERN_BACKENDS = {"zmq": ("pyzmq", "native"), "sp": ("pynng", "native")}
PATTERN_IMPLS = tuple(n for n, i in IMPLEMENTATIONS.items() if i.patterns)


def pattern_legal(wire: str, a: str, b: str) -> bool:
    table = ZMTP_PATTERN_PEERS if wire == "zmq" else SP_PATTERN_PEERS
    return b in table.get(a, frozenset()) and a in table.get(b, frozenset())


def pattern_hops_legal(cell: PatternCell) -> list[tuple[str, bool]]:
    if cell.direct:
        w = cell.client_wire
        return [(f"{w}: {cell.client_type}-{cell.server_type}",
                 pattern_legal(w, cell.client_type, cell.server_type))]
    kinds = GATEWAY_PATTERN_KINDS[cell.gateway_pattern]
    cw, sw = cell.client_wire, cell.server_wire
    front, back = kinds[cw][0], kinds[sw][1]
    return [(f"{cw}: {cell.client_type}-gateway {front}",
             pattern_legal(cw, cell.client_type, front)),
            (f"{sw}: gateway {back}-{cell.server_type}",
             pattern_legal(sw, back, cell.server_type))]


def pattern_sender(cell: PatternCell) -> str:
    """Which side sends (for pair: first; the other answers the same way)."""
    if cell.server_type in ("PUB", "XPUB", "PUSH") or cell.client_type not in SENDERS:
        return "server"
    return "client"


#: what the subscribing side holds, per pub/sub shape
SHAPE_TOPICS: dict[str, tuple[bytes, ...]] = {"topic": (b"a.",), "prefix": (b"a",),
                                             "all": (b"",), "multi": (b"a.", b"b."),
                                             "unsubscribe": (b"a.", b"b."), "late": (b"a.",)}
#: ``unsubscribe``: what the subscriber drops after its first round; ``late``: what the late
#: joiner holds
SHAPE_CHANGE: dict[str, bytes] = {"unsubscribe": b"b.", "late": b"b."}
#: one round: subscribed, not subscribed, a prefix of another (``a`` vs ``a.``), the empty one
PUBSUB_ROUND = (b"a.1", b"b.1", b"c.1", b"a", b"ab", b"a.2", b"", b"b.2", b"bb", b"a.3")
STREAM_ROUND = tuple(b"m-%02d" % i for i in range(20))


def delivery_expected(cell: PatternCell, topics: tuple[bytes, ...] | None = None) -> list[bytes]:
    """What the receiving side must get from one round, exactly and in order (``topics``:
    what it holds, when not the shape's first set)."""
    if topics is not None or cell.shape in SHAPE_TOPICS:
        held = SHAPE_TOPICS[cell.shape] if topics is None else topics
        return [m for m in PUBSUB_ROUND if any(m.startswith(t) for t in held)]
    return list(STREAM_ROUND)
