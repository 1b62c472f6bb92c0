"""Harness ``ws``: the WebSocket layer of ``sp+ws://`` (``gateway_plugins.ws.WsShim``, on
wsproto) with both roles, between a stand-in for the engine's pipe and a stand-in for the TCP
transport; no event loop and no socket.

``WsShim`` is an ``asyncio.Protocol`` and not sans-IO, but it only calls its pipe
(``connection_made``, ``data_received``, ``abort``, ``codec.max_message_size``) and its
transport (``write``, ``close``, ``abort``, ``is_closing``): the harness gives it a pipe that
holds a real :class:`gateway.wire.sp.SpCodec` (which reads what the shim hands on, as the
engine does, and echoes each message back) and a transport that records what is written. Not
reached this way: ``WsTransport.listen``/``dial`` (TCP and TLS setup, ``TlsShim``) and the
engine's pipe itself (timers, back-pressure): interop_tests/test_gateway_ws.py covers them.

Input: ``role proto path mode size ncuts cuts[2 bytes each]`` then either raw bytes (mode 0;
mode 1 puts a valid upgrade before them) or steps (mode 2: a valid upgrade made by a wsproto
peer, then frames built from the steps: binary messages in fragments, text, ping, pong, close,
a frame with any header bits, raw bytes). ``role`` 0 is a listener (the harness is an nng
dialer), 1 a dialer (the harness is the server answering our request).

Oracles: ``data_received`` never raises; the pipe's codec gets only whole, well-framed SP
messages (no error but ``MessageTooLarge``); the dialer's request asks for the peer's subprotocol on the configured path, the
listener accepts only its own; and for a valid stream (steps of whole binary messages, pings and
pongs) every binary message is delivered once, in order and unchanged, up to the first one over
the size limit, which is refused; each ping gets its pong and each echoed message reaches the
peer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway_plugins.ws import NAMES, PEERS, SUFFIX, WsShim
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    Event,
    Pong,
    Request,
)

from gateway.engine.pipe import sp_role
from gateway.errors import MessageTooLarge, ProtocolError
from gateway.patterns import pairing
from gateway.testing.codec_checks import chunked
from gateway.wire.sp import SpCodec

from ._data import Data, Finding, Writer, check, raised_in

NAME = "ws"

#: our socket kind -> its nng protocol name on the WebSocket
KINDS = ("REQ", "REP", "PUB", "SUB", "PUSH", "PULL", "PAIR", "PAIR1")
PATHS = ("/", "/svc", "/a/b")
SIZES = (1 << 20, 64, 1000, 4096)
MAX_STEPS = 32
MASK = b"\x37\xfa\x21\x3d"


def encode_input(*, role: int = 0, proto: int = 0, path: int = 0, mode: int = 0, size: int = 0,
                 cuts: tuple[int, ...] = (), rest: bytes = b"") -> bytes:
    w = Writer().byte(role).byte(proto).byte(path).byte(mode).byte(size).byte(len(cuts))
    for cut in cuts:
        w.uint(cut, 2)
    return w.raw(rest).bytes()


def ws_frame(opcode: int, payload: bytes, *, fin: bool = True, rsv: int = 0,
             mask: bytes | None = None) -> bytes:
    """One RFC 6455 frame, any header bits."""
    head = bytes((0x80 * fin | (rsv & 7) << 4 | opcode & 0x0F,))
    bit = 0x80 if mask is not None else 0
    n = len(payload)
    if n < 126:
        head += bytes((bit | n,))
    elif n < 1 << 16:
        head += bytes((bit | 126,)) + n.to_bytes(2, "big")
    else:
        head += bytes((bit | 127,)) + n.to_bytes(8, "big")
    if mask is not None:
        head += mask
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + payload


class _Raw:
    """The TCP transport under the shim: records writes, close and abort."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.out += data

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def take(self) -> bytes:
        out = bytes(self.out)
        self.out.clear()
        return out


@dataclass
class _Pipe:
    """The engine's side: a real SP codec reads what the shim hands on; every message is sent
    back (through the shim's outgoing path)."""

    codec: SpCodec
    handshake_timeout: float = 10.0
    layer: Any = None
    messages: list[bytes] = field(default_factory=list)
    failed: tuple[str, str] | None = None
    error: ProtocolError | None = None

    def connection_made(self, layer: Any) -> None:
        self.layer = layer
        layer.write(self.codec.initiate())

    def data_received(self, data: bytes) -> None:
        self.codec.receive_data(data)
        if self.failed is not None:  # the engine's pipe reads nothing once it is closing
            return
        try:
            while (ev := self.codec.next_event()) is not None:
                if type(ev) is tuple:
                    self.messages.append(ev[0])
                    self.layer.write(self.codec.send_message(ev))
        except MessageTooLarge as exc:  # the engine's pipe aborts, as here
            self.error = exc
            self.abort(exc.reason or type(exc).__name__, str(exc))
        except ProtocolError as exc:
            raise Finding(f"the shim handed the SP codec bad framing: {exc!r}") from exc

    def abort(self, reason: str, detail: str = "") -> None:
        self.failed = (reason, detail)
        self.layer.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        pass

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass


@dataclass
class _Model:
    """What a correct shim does with a stream of valid steps."""

    messages: list[bytes] = field(default_factory=list)  # binary messages, in order
    pings: list[bytes] = field(default_factory=list)
    valid: bool = True  # every step so far was one the model knows


def _payload(data: Data) -> bytes:
    """Up to 64 KiB: a short piece repeated (to pass the size limits cheaply)."""
    piece = data.short()
    return piece * (1 + data.byte() % 64) if data.flag() else piece


def _steps(data: Data, mask: bytes | None) -> tuple[bytes, _Model]:
    model = _Model()
    out = bytearray()
    for _ in range(MAX_STEPS):
        if not len(data):
            break
        op = data.byte() % 8
        if op == 0:  # a binary message in 1..4 fragments, maybe a ping between two of them
            payload = _payload(data)
            parts = 1 + data.byte() % 4
            ping_at = data.byte() % 8
            size = -(-len(payload) // parts) if payload else 0
            pieces = [payload[i:i + size] for i in range(0, len(payload), size)] if size else []
            pieces = pieces or [b""]
            for i, piece in enumerate(pieces):
                out += ws_frame(2 if i == 0 else 0, piece, fin=i == len(pieces) - 1, mask=mask)
                if i == ping_at and i < len(pieces) - 1:
                    out += ws_frame(9, b"mid", mask=mask)
                    model.pings.append(b"mid")
            model.messages.append(payload)
        elif op == 1:  # text: SP sends binary only
            out += ws_frame(1, data.short(), mask=mask)
            model.valid = False
        elif op == 2:
            ping = data.take(data.byte() % 126)
            out += ws_frame(9, ping, mask=mask)
            model.pings.append(ping)
        elif op == 3:
            out += ws_frame(10, data.take(data.byte() % 126), mask=mask)
        elif op == 4:  # close, with a code and a reason
            out += ws_frame(8, data.uint(2).to_bytes(2, "big") + data.take(data.byte() % 64),
                            mask=mask)
            model.valid = False
        elif op == 5:  # any header bits
            bits = data.byte()
            out += ws_frame(bits & 0x0F, data.short(), fin=bool(bits & 0x80), rsv=bits >> 4,
                            mask=data.take(4).ljust(4, b"\x00") if data.flag() else None)
            model.valid = False
        elif op == 6:
            out += data.short()
            model.valid = False
        else:
            break
    return bytes(out), model


def _events(conn: WSConnection, data: bytes) -> list[Event]:
    conn.receive_data(data)
    return list(conn.events())


def one_input(buf: bytes, strict: bool = False) -> None:
    data = Data(buf)
    client = bool(data.byte() & 1)
    kind = data.choice(KINDS)
    path = data.choice(PATHS)
    mode = data.byte() % 3
    max_size = data.choice(SIZES)
    cuts = [data.uint(2) for _ in range(data.byte() % 16)]
    codec = SpCodec(sp_role(kind), max_message_size=max_size)
    ours = NAMES[codec.protocol]
    pipe = _Pipe(codec)
    raw = _Raw()
    shim = WsShim(pipe, client, "127.0.0.1:5555", path)
    shim.connection_made(raw)  # type: ignore[arg-type]
    peer = WSConnection(ConnectionType.SERVER if client else ConnectionType.CLIENT)
    prelude = b""
    if client:  # our request: the peer's subprotocol, our path
        request = [e for e in _events(peer, raw.take()) if isinstance(e, Request)]
        want = PEERS[ours] + SUFFIX
        if len(request) != 1 or request[0].target != path or request[0].subprotocols != [want]:
            raise Finding(f"our upgrade request is {request!r:.200}, not {path} with {want}")
        if mode:
            prelude = peer.send(AcceptConnection(subprotocol=want))
    elif mode:
        prelude = peer.send(Request(host="127.0.0.1:5555", target=path,
                                    subprotocols=[ours + SUFFIX]))
    if mode == 2:
        rest, model = _steps(data, None if client else MASK)
    else:
        rest, model = data.rest(), _Model(valid=False)
    if client:  # a server may send its first frames with the 101 (wsproto keeps them)
        chunks = chunked(prelude + rest, cuts)
    else:  # a client waits for the 101 before it sends a frame (RFC 6455 4.1; nng does):
        chunks = [prelude] + chunked(rest, cuts)  # wsproto drops what comes with the request
    for chunk in chunks:
        if raw.is_closing():
            break
        if not chunk:  # (asyncio and TlsShim never hand on an empty read: b"" is EOF to h11)
            continue
        try:
            shim.data_received(chunk)  # nothing may escape
        except UnicodeError as exc:
            if not raised_in(exc, "wsproto"):
                raise
            check(False, "ws-non-ascii-header", f"wsproto's {exc!r} left WsShim.data_received",
                  strict)
            return
    limit = shim.limit
    if any(len(m) > max_size for m in pipe.messages):
        raise Finding(f"a message over max_message_size {max_size} reached the pipe")
    if mode != 2 or not model.valid:
        return
    # -- a valid stream: exactly the model
    expect = []
    for m in model.messages:
        if len(m) > max_size:
            break
        expect.append(m)
    refused = len(expect) < len(model.messages)
    if pipe.messages != expect:
        raise Finding(f"delivered {[len(m) for m in pipe.messages]} byte messages, the peer "
                      f"sent {[len(m) for m in model.messages]} (limit {max_size}/{limit})")
    if refused != (pipe.failed is not None or pipe.error is not None):
        raise Finding(f"refused {pipe.failed or pipe.error}, expected refused={refused}")
    if refused:
        return
    if pipe.failed is not None or raw.is_closing():
        raise Finding(f"a valid stream was failed: {pipe.failed}")
    seen = _events(peer, raw.take())
    pongs = [bytes(e.payload) for e in seen if isinstance(e, Pong)]
    echoed = b"".join(bytes(e.data) for e in seen if isinstance(e, BytesMessage))
    if pongs != model.pings:
        raise Finding(f"pongs {pongs!r:.100} for pings {model.pings!r:.100}")
    if echoed != b"".join(expect):
        raise Finding("the echoed messages did not reach the peer unchanged")


#: SP protocols the harness's kinds speak (for the seeds)
PROTOCOL_OF = {kind: pairing.sp_protocol(kind) for kind in KINDS}
