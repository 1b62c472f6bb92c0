"""The Message <-> frames mapping of the pyzmq adapter (the ZMTP rule of
:mod:`gateway.message`), and the socket kinds it opens.

Every frame up to and including the first empty frame is a hop (for a ROUTER the identity
libzmq prepends comes first), the rest is the body, so ``hops + body`` is exactly the list of
frames. Without an empty frame only the ROUTER identity is a hop (a DEALER client that sends no
delimiter keeps its frames as body). The other patterns' messages (pub/sub, pipeline, pair)
have no hops: every frame is body. Sending writes ``hops + body`` as one multipart message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import zmq

from gateway.errors import PeerGone, TransportError
from gateway.message import Message

#: a bridge side's kind (and the raw REP/REQ names) -> the libzmq socket kind that serves it
KINDS = {"ROUTER": "ROUTER", "DEALER": "DEALER", "REP": "ROUTER", "REQ": "DEALER",
         "XPUB": "XPUB", "XSUB": "XSUB", "PUSH": "PUSH", "PULL": "PULL", "PAIR": "PAIR"}
ZMQ_TYPE = {"ROUTER": zmq.ROUTER, "DEALER": zmq.DEALER, "XPUB": zmq.XPUB, "XSUB": zmq.XSUB,
            "PUSH": zmq.PUSH, "PULL": zmq.PULL, "PAIR": zmq.PAIR}
_PORT_ZERO = re.compile(r"^(tcp://.*):0$")
_new = tuple.__new__


def split_router(frames: list[bytes]) -> Message:
    # identity, then up to and including the first empty frame
    for i in range(1, len(frames)):
        if not frames[i]:
            return _new(Message, (tuple(frames[: i + 1]), tuple(frames[i + 1 :])))
    return _new(Message, ((frames[0],), tuple(frames[1:])))


def split_dealer(frames: list[bytes]) -> Message:
    for i, f in enumerate(frames):
        if not f:
            return _new(Message, (tuple(frames[: i + 1]), tuple(frames[i + 1 :])))
    return _new(Message, ((), tuple(frames)))


def split_plain(frames: list[bytes]) -> Message:
    # pub/sub, pipeline, pair: no envelope, every frame is body
    return _new(Message, ((), tuple(frames)))


def splitter(kind: str) -> Callable[[list[bytes]], Message]:
    """The frames -> Message mapping of a libzmq ``kind``."""
    return {"ROUTER": split_router, "DEALER": split_dealer}.get(kind, split_plain)


def send_error(e: zmq.ZMQError) -> TransportError:
    """What a failed send is, in the device's terms (see :mod:`gateway.adapter`)."""
    if e.errno == zmq.EHOSTUNREACH:  # ROUTER_MANDATORY: no such peer
        return PeerGone("client gone")
    return TransportError(f"pyzmq: {e.strerror}")


def lib_bind(sock: Any, url: str) -> str:
    """Bind; return the real endpoint (``tcp://h:0`` and ``tcp://h:*`` get their port)."""
    sock.bind(_PORT_ZERO.sub(r"\1:*", url))
    last = sock.getsockopt(zmq.LAST_ENDPOINT)
    return last.decode() if isinstance(last, bytes) else str(last)


__all__ = ["KINDS", "ZMQ_TYPE", "lib_bind", "send_error", "split_dealer",
           "split_plain", "split_router", "splitter"]
