"""Opening nng's sockets for the pynng adapter's faces: which nng socket serves a bridge side's
kind, its options from the side's settings, listening on an ephemeral port, sub0's
subscriptions, and the connected pipes (:class:`LivePipes`)."""

from __future__ import annotations

import re
import socket as _socket
from collections.abc import Callable
from typing import Any

import pynng
from pynng import ffi, lib

from gateway.errors import ConfigError, LocalProtocolError, PeerGone, TransportError

from .message import TAKERS, strerror, take_plain

#: a bridge side's kind (and its ZeroMQ names) -> the nng socket that serves it
KINDS = {"REP": "REP", "REQ": "REQ", "ROUTER": "REP", "DEALER": "REQ",
         "XPUB": "XPUB", "PUB": "XPUB", "XSUB": "XSUB", "SUB": "XSUB", "PUSH": "PUSH",
         "PULL": "PULL", "PAIR": "PAIR", "PAIR0": "PAIR", "PAIR1": "PAIR1"}
OPENERS = {"REP": (pynng.Rep0, lib.nng_rep0_open_raw), "REQ": (pynng.Req0, lib.nng_req0_open_raw)}
#: the other patterns' bridge faces, nng's cooked sockets (no header on the wire but pair1's,
#: which nng's cooked pair1 writes itself): pub0 toward subscribers, sub0 toward a publisher
#: (a sent 0x01/0x00 + prefix message (un)subscribes), push0, pull0, pair0, pair1
PLAIN = {"XPUB": pynng.Pub0, "XSUB": pynng.Sub0, "PUSH": pynng.Push0, "PULL": pynng.Pull0,
         "PAIR": pynng.Pair0, "PAIR1": pynng.Pair1}
RECEIVES = frozenset({"REP", "REQ", "XSUB", "PULL", "PAIR", "PAIR1"})
SENDS = frozenset({"REP", "REQ", "XPUB", "PUSH", "PAIR", "PAIR1"})
_TCP_PORT = re.compile(r"^((?:tls\+)?tcp[46]?://)(.*):(0|\*)$")

#: the endpoint settings (``gateway.settings.schema``) this adapter hands to nng (nng has no handshake
#: deadline, no linger and no listen backlog setting; its TCP keepalive is on or off, with the
#: system's timings: no tcp_keepalive_idle/intvl/cnt)
HONOURED = frozenset({"hwm", "max_message_size", "reconnect_ivl", "reconnect_ivl_max",
                      "tcp_keepalive", "tls_cert", "tls_key", "tls_ca", "tls_verify",
                      "tls_server_name"})


def subscribe(sock: Any, frame: bytes) -> None:
    """sub0: a 0x01/0x00 + prefix message as nng's (un)subscribe option."""
    if frame[:1] not in (b"\x01", b"\x00"):
        raise LocalProtocolError(f"sub0 takes subscriptions only, not {frame[:16]!r}")
    option = b"sub:subscribe" if frame[:1] == b"\x01" else b"sub:unsubscribe"
    topic = frame[1:]
    rv = lib.nng_socket_set(sock.socket, option, topic, len(topic))
    if rv and rv != lib.NNG_ENOENT:  # cancelling what nng does not hold: nothing to undo
        raise TransportError(f"pynng {option.decode()}: {strerror(rv)}")


def lib_listen(sock: Any, url: str) -> str:
    """Listen; return the real URL (``tcp://h:0`` or ``tcp://h:*`` get the bound port)."""
    m = _TCP_PORT.match(url)
    nurl = f"{m.group(1)}{m.group(2)}:0" if m else url
    listener = sock.listen(nurl)
    if m is None:
        return url
    port = ffi.new("int *")
    rv = lib.nng_listener_get_int(listener.listener, b"tcp-bound-port", port)
    if rv == 0:
        bound = port[0]
    else:  # older nng: read the port from the local address (network byte order)
        bound = _socket.ntohs(listener.local_address.port)
    return f"{m.group(1)}{m.group(2)}:{bound}"


def open_socket(kind: str, raw: bool, recv_max_size: int, *, tcp_keepalive: bool = True,
                **kwargs: Any) -> tuple[str, Any]:
    """The nng socket for a side of ``kind``: (its kind in :data:`KINDS`, the pynng socket);
    ``kwargs`` are pynng's socket options (a buffer the socket does not have is left out)."""
    k = KINDS.get(kind.upper())
    if k is None or (not raw and k in OPENERS):
        raise ConfigError(f"pynng adapter: no raw socket of kind {kind!r} (raw={raw})")
    if k not in SENDS:
        kwargs.pop("send_buffer_size", None)
    if k in OPENERS or k not in RECEIVES:
        kwargs.pop("recv_buffer_size", None)
    if k in OPENERS:
        cls, opener = OPENERS[k]
        sock = cls(opener=opener, recv_max_size=recv_max_size, **kwargs)
    else:
        extra = {"polyamorous": False} if k == "PAIR1" else {}
        sock = PLAIN[k](recv_max_size=recv_max_size, **extra, **kwargs)
    sock.tcp_keepalive = tcp_keepalive  # NNG_OPT_TCP_KEEPALIVE, before any dialer or listener
    return k, sock


def set_ttl(sock: Any, ttl: int | None) -> None:
    if ttl is not None:
        check = lib.nng_socket_set_int(sock.socket, b"ttl-max", int(ttl))
        if check:
            raise ConfigError(f"pynng adapter: bad ttl {ttl}: {strerror(check)}")


class LivePipes:
    """The ids of a socket's connected pipes, kept by nng's pipe notifications: a raw rep0 refuses
    a reply to a client that left (:class:`PeerGone`) instead of letting nng take it and drop it
    without a word, and ``peers`` counts them. When a pipe goes, its id is gone before
    ``face.on_peer_lost`` is called (pynng runs the callbacks before it forgets the pipe
    itself, so ``len(sock.pipes)`` would still count it)."""

    def __init__(self, sock: Any, face: Any) -> None:
        self.ids: set[int] = {p.id for p in sock.pipes}
        # nng starts the pipe (its first request can reach us) between ADD_PRE and ADD_POST
        # (socket.c): a reply may come back before ADD_POST, so the id is added at ADD_PRE
        add = lambda pipe: self.ids.add(pipe.id)  # noqa: E731
        sock.add_pre_pipe_connect_cb(add)
        sock.add_post_pipe_connect_cb(add)

        def removed(pipe: Any) -> None:  # on nng's thread
            self.ids.discard(pipe.id)
            callback = face.on_peer_lost
            if callback is not None:
                callback()

        sock.add_post_pipe_remove_cb(removed)

    def check(self, hops: tuple[bytes, ...]) -> None:
        if not hops or int.from_bytes(hops[0], "big") not in self.ids:
            raise PeerGone(f"no client pipe {hops[0].hex() if hops else '-'}")


class NngFace:
    """What both faces of the adapter keep of their nng socket (:meth:`_adopt`): the kind, the
    connected pipes, the header codec, and what the adapter contract asks of a face."""

    callbacks = False  # (the adapter contract, gateway.adapter)
    backlog = 0  # nng holds what it received

    def _adopt(self, kind: str, sock: Any) -> None:
        self.kind = kind
        # replies: nng takes them, then drops one silently when the client's pipe queue is
        # full; pub0 drops for a full subscriber without a word
        self.confirms_delivery = kind == "REQ"
        #: called (on nng's thread) when a peer's pipe goes away
        self.on_peer_lost: Callable[[], None] | None = None
        self._pipes = LivePipes(sock, self)
        self._live = self._pipes if kind == "REP" else None
        self._takes = TAKERS.get(kind, take_plain)

    @property
    def peers(self) -> int:
        """Connected pipes (see :class:`LivePipes`)."""
        return len(self._pipes.ids)


def reconnect_options(ivl: tuple[float, float]) -> dict[str, int]:
    """nng's redial backoff (NNG_OPT_RECONNMINT / RECONNMAXT, milliseconds)."""
    return {"reconnect_time_min": round(ivl[0] * 1000), "reconnect_time_max": round(ivl[1] * 1000)}


__all__ = ["HONOURED", "KINDS", "LivePipes", "NngFace", "OPENERS", "PLAIN", "RECEIVES", "SENDS",
           "lib_listen", "open_socket", "reconnect_options", "set_ttl", "subscribe"]
