"""Harness ``ws``: SP over WebSocket (``gateway_plugins.ws.codec.WsSpCodec``, the sans-IO wire
codec of ``sp+ws://`` and ``sp+wss://``, on wsproto), both roles, against a wsproto peer.

Not reached here: ``WsTransport``'s TCP and TLS setup and ``TlsShim`` (interop_tests cover
them), and the engine's pipe around the codec.

Input: ``role proto path mode size ncuts cuts[2 bytes each]`` then either raw bytes (mode 0;
mode 1 puts a valid upgrade before them) or steps (mode 2: a valid upgrade made by the wsproto
peer, then frames built from the steps: binary messages in fragments, text, ping, pong, close,
a frame with any header bits, raw bytes). ``role`` 0 is a listener (the harness is an nng
dialer), 1 a dialer (the harness is the server answering our request); ``proto`` the socket
kind, ``size`` the codec's ``max_message_size``.

Oracles: ``receive_data`` never raises and ``next_event`` raises nothing but a
``RemoteProtocolError`` (the codec contract of ``gateway.wire``), and nothing after its first
error; one ``HandshakeComplete``, naming the peer protocol, before any message; no message over
``max_message_size`` plus the backtrace room; the dialer's request asks for the peer's
subprotocol on its path, the listener accepts only its own and answers a refusal in HTTP; and
for a valid stream (steps of whole binary messages, pings and pongs) every binary message is
delivered once, in order and unchanged, up to the first one over the limit, which is refused;
pongs answer pings in order (one pending at most: a later ping's replaces an earlier one not
yet sent), the last ping is answered, and every message sent back reaches the peer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway_plugins.ws.codec import SUFFIX, WsSpCodec, ws_name
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Event, Pong, Request

from gateway.engine.codecs import sp_role
from gateway.errors import MessageTooLarge, ProtocolError, RemoteProtocolError
from gateway.testing.codec_checks import chunked
from gateway.wire.events import HandshakeComplete

from ._data import Data, Finding, Writer, check, raised_in

NAME = "ws"

#: our socket kind (its nng protocol name on the WebSocket is the subprotocol)
KINDS = ("REQ", "REP", "PUB", "SUB", "PUSH", "PULL", "PAIR", "PAIR1")
PATHS = ("/", "/svc", "/a/b")
SIZES = (1 << 20, 64, 1000, 4096)
MAX_STEPS = 32
MAX_EVENTS = 10_000
MASK = b"\x37\xfa\x21\x3d"
ROOM = 1024  # what the codec lets a message carry beyond max_message_size (the backtrace)


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


@dataclass
class _Model:
    """What a correct codec does with a stream of valid steps."""

    messages: list[bytes] = field(default_factory=list)  # binary messages, in order
    pings: list[bytes] = field(default_factory=list)
    valid: bool = True  # every step so far was one the model knows


def _payload(data: Data) -> bytes:
    """Up to 16 KiB: a short piece repeated (to pass the size limits cheaply)."""
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


@dataclass
class _Run:
    """What the codec did with the whole stream."""

    messages: list[bytes] = field(default_factory=list)
    out: bytearray = field(default_factory=bytearray)  # what it wrote: answers, pongs, echoes
    handshakes: int = 0
    error: RemoteProtocolError | None = None


def _feed(codec: WsSpCodec, chunks: list[bytes], peer_type: str, strict: bool) -> _Run | None:
    """The engine's way: each read into ``receive_data``, then every event; each message is sent
    back. None when a known finding ended the run."""
    run = _Run()
    for chunk in chunks:
        if not chunk:  # (asyncio and TlsShim never hand on an empty read: b"" is EOF to h11)
            continue
        try:
            codec.receive_data(chunk)  # never raises
        except UnicodeError as exc:
            if not raised_in(exc, "wsproto"):
                raise
            check(False, "ws-non-ascii-header", f"wsproto's {exc!r} left receive_data", strict)
            return None
        try:
            for _ in range(MAX_EVENTS):
                ev = codec.next_event()
                if ev is None:
                    break
                if isinstance(ev, HandshakeComplete):
                    run.handshakes += 1
                    if run.handshakes > 1 or ev.peer_type != peer_type:
                        raise Finding(f"handshake #{run.handshakes} with {ev.peer_type!r}, the "
                                      f"peer is {peer_type!r}")
                elif type(ev) is tuple:
                    if not run.handshakes:
                        raise Finding(f"a message before the upgrade: {ev!r:.80}")
                    if len(ev) != 1 or len(ev[0]) > codec.max_message_size + ROOM:
                        raise Finding(f"a message of {[len(p) for p in ev]} bytes (limit "
                                      f"{codec.max_message_size} + {ROOM})")
                    run.messages.append(ev[0])
                    run.out += codec.send_message(ev)
            else:
                raise Finding("next_event never returned None")
        except RemoteProtocolError as exc:
            run.error = exc
        except ProtocolError as exc:
            raise Finding(f"{exc!r} (our fault?) on the peer's bytes") from exc
        run.out += codec.data_to_send()
        if run.error is not None:
            try:
                again = codec.next_event()
            except ProtocolError:
                again = None
            if again is not None:
                raise Finding(f"an event after {run.error!r}: {again!r:.80}")
            if getattr(run.error, "farewell", False) and not run.out.startswith(b"HTTP/1.1 4"):
                raise Finding(f"a refused upgrade without an HTTP answer: {bytes(run.out)!r:.80}")
            break
    return run


def one_input(buf: bytes, strict: bool = False) -> None:
    data = Data(buf)
    client = bool(data.byte() & 1)
    kind = data.choice(KINDS)
    path = data.choice(PATHS)
    mode = data.byte() % 3
    max_size = data.choice(SIZES)
    cuts = [data.uint(2) for _ in range(data.byte() % 16)]
    role = sp_role(kind)
    (peer_protocol,) = role.accepts
    ours = ws_name(role, role.protocol) + SUFFIX
    theirs = ws_name(role, peer_protocol) + SUFFIX
    codec = WsSpCodec(role, max_message_size=max_size, address="127.0.0.1:5555" + path,
                      client=client)
    peer = WSConnection(ConnectionType.SERVER if client else ConnectionType.CLIENT)
    first = codec.initiate()
    prelude = b""
    if client:  # our request: the peer's subprotocol, our path
        request = [e for e in _events(peer, first) if isinstance(e, Request)]
        if len(request) != 1 or request[0].target != path or request[0].subprotocols != [theirs]:
            raise Finding(f"our upgrade request is {request!r:.200}, not {path} with {theirs}")
        if mode:
            prelude = peer.send(AcceptConnection(subprotocol=theirs))
    else:
        if first:
            raise Finding(f"a listener spoke first: {first!r:.80}")
        if mode:
            prelude = peer.send(Request(host="127.0.0.1:5555", target=path,
                                        subprotocols=[ours]))
    if mode == 2:
        rest, model = _steps(data, None if client else MASK)
    else:
        rest, model = data.rest(), _Model(valid=False)
    if client:  # a server may send its first frames with the 101 (wsproto keeps them)
        chunks = chunked(prelude + rest, cuts)
    else:  # a client waits for the 101 before it sends a frame (RFC 6455 4.1; nng does):
        chunks = [prelude] + chunked(rest, cuts)  # wsproto drops what comes with the request
    run = _feed(codec, chunks, role.name(peer_protocol), strict)
    if run is None or mode != 2 or not model.valid:
        return
    # -- a valid stream: exactly the model
    limit = max_size + ROOM
    expect = []
    for m in model.messages:
        if len(m) > limit:
            break
        expect.append(m)
    refused = len(expect) < len(model.messages)
    if run.messages != expect:
        raise Finding(f"delivered {[len(m) for m in run.messages]} byte messages, the peer "
                      f"sent {[len(m) for m in model.messages]} (limit {limit})")
    if refused != isinstance(run.error, MessageTooLarge) or not refused and run.error:
        raise Finding(f"error {run.error!r}, expected a refusal: {refused}")
    if refused:
        return
    seen = _events(peer, bytes(run.out))
    pongs = [bytes(e.payload) for e in seen if isinstance(e, Pong)]
    echoed = b"".join(bytes(e.data) for e in seen if isinstance(e, BytesMessage))
    left = iter(model.pings)
    if not all(p in left for p in pongs) or (model.pings and pongs[-1:] != model.pings[-1:]):
        raise Finding(f"pongs {pongs!r:.100} for pings {model.pings!r:.100}")
    if echoed != b"".join(expect):
        raise Finding("the messages sent back did not reach the peer unchanged")
