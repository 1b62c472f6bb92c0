"""What the CURVE and PLAIN harnesses share: fixed keys, greetings, framing, and a reader that
drains a codec and says how a step ended."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from nacl import bindings as sodium
from nacl.exceptions import RuntimeError as NaclRuntimeError

from gateway.engine.codecs import zmtp_role
from gateway.errors import ProtocolError, RemoteProtocolError
from gateway.wire.events import HandshakeComplete, PeerError
from gateway.wire.zmtp import ZmtpCodec, encode_properties
from gateway.wire.zmtp_mechanism import AuthResult, Mechanism

from ._data import Data, Finding, Writer, check
from .zmtp_codec import greeting

MAX_EVENTS = 1000
#: the socket types both harnesses play, and how many steps one input may take
KINDS = ("REQ", "REP", "DEALER", "ROUTER")
MAX_STEPS = 24
#: what our codec sends of its greeting once the peer's is in (RFC 37: 11 bytes first)
GREETING_REST = 53
_U64 = struct.Struct(">Q")


def fixed_keypair(label: bytes) -> tuple[bytes, bytes]:
    """A Curve25519 key pair from a fixed seed: the same keys on every run, so an input
    replays exactly (the seeds' CURVE HELLO from libzmq was made for ``SERVER``)."""
    public, secret = sodium.crypto_box_seed_keypair(label.ljust(32, b".")[:32])
    return bytes(public), bytes(secret)


SERVER = fixed_keypair(b"zmq-sp-gateway fuzz server")
CLIENT = fixed_keypair(b"zmq-sp-gateway fuzz client")
#: an honest client the server does not know (its own key, its own vouch)
OTHER = fixed_keypair(b"zmq-sp-gateway fuzz other")
CLIENT_T = fixed_keypair(b"zmq-sp-gateway fuzz client t")
SERVER_T = fixed_keypair(b"zmq-sp-gateway fuzz server t")

LEGAL_PEERS = {"REQ": ("REP", "ROUTER"), "REP": ("REQ", "DEALER"),
               "DEALER": ("REP", "DEALER", "ROUTER"), "ROUTER": ("REQ", "DEALER", "ROUTER")}
PEER_TYPES = ("REQ", "REP", "DEALER", "ROUTER", "PUB", "PAIR", "")


def encode_input(*, target: int, kind: int = 0, minor: int = 1, auth: int = 0,
                 steps: bytes = b"") -> bytes:
    return Writer().byte(target).byte(kind).byte(minor).byte(auth).raw(steps).bytes()


def ops(data: Data) -> Iterator[int]:
    """The steps' ops (0-4) from the input: at most ``MAX_STEPS``, until the input ends or
    op 5 says stop."""
    for _ in range(MAX_STEPS):
        if not len(data):
            return
        op = data.byte() % 6
        if op == 5:
            return
        yield op


def u64(n: int) -> bytes:
    return _U64.pack(n & 0xFFFF_FFFF_FFFF_FFFF)


def frame(flags: int, body: bytes) -> bytes:
    """One ZMTP frame; LONG is set when the body needs it (and only then)."""
    if len(body) > 255:
        return bytes((flags | 0x02,)) + _U64.pack(len(body)) + body
    return bytes((flags & ~0x02 & 0xFF, len(body))) + body


def command(name: bytes, data: bytes) -> bytes:
    return frame(0x04, bytes((len(name) & 0xFF,)) + name[:255] + data)


def metadata(socket_type: str, identity: bytes | None = b"") -> bytes:
    props = [(b"Socket-Type", socket_type.encode())] if socket_type else []
    if identity is not None:
        props.append((b"Identity", identity))
    return encode_properties(props)


def commands_in(data: bytes) -> list[tuple[int, bytes]]:
    """Complete frames of ``data`` as (flags, body)."""
    out, pos = [], 0
    while len(data) - pos >= 2:
        flags = data[pos]
        if flags & 0x02:
            if len(data) - pos < 9:
                break
            (size,) = _U64.unpack_from(data, pos + 1)
            start = pos + 9
        else:
            size, start = data[pos + 1], pos + 2
        if start + size > len(data):
            break
        out.append((flags, data[start:start + size]))
        pos = start + size
    return out


def split_command(body: bytes) -> tuple[bytes, bytes]:
    n = body[0] if body else 0
    return body[1:1 + n], body[1 + n:]


@dataclass
class Step:
    """How the codec took one step: its events and the error that ended it, if any."""

    events: list[object] = field(default_factory=list)
    error: RemoteProtocolError | None = None

    @property
    def refused(self) -> bool:
        """It raised, or the stream holds the peer's ERROR (the connection is over)."""
        return self.error is not None or any(isinstance(e, PeerError) for e in self.events)

    @property
    def completed(self) -> HandshakeComplete | None:
        return next((e for e in self.events if isinstance(e, HandshakeComplete)), None)

    @property
    def messages(self) -> list[tuple[bytes, ...]]:
        return [e for e in self.events if type(e) is tuple]


def feed(codec: ZmtpCodec, data: bytes, strict: bool = False) -> Step:
    """Give ``data`` to the codec and read every event; only a ``RemoteProtocolError`` may
    leave it (the peer's fault; anything else is a finding, or a crash)."""
    step = Step()
    codec.receive_data(data)
    try:
        for _ in range(MAX_EVENTS):
            ev = codec.next_event()
            if ev is None:
                return step
            step.events.append(ev)
        raise Finding("next_event never returned None")
    except RemoteProtocolError as exc:
        step.error = exc
    except ProtocolError as exc:
        raise Finding(f"{type(exc).__name__} (our fault?) on the peer's bytes: {exc}") from exc
    except NaclRuntimeError as exc:
        if not _low_order(exc):
            raise
        check(False, "curve-low-order", "a CURVE transient key of low order made libsodium's "
              f"crypto_box_beforenm fail and {exc!r} left the codec", strict)
        step.error = RemoteProtocolError(f"(known finding) {exc!r}")
    return step


def _low_order(exc: BaseException) -> bool:
    """libsodium refuses a shared secret of all zeros (a public key of low order) in
    ``crypto_box_beforenm``; PyNaCl raises its RuntimeError for it."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "crypto_box_beforenm":
            return True
        tb = tb.tb_next
    return False


def start(codec: ZmtpCodec, minor: int, as_server: bool) -> bytes:
    """Our codec meets a 3.x CURVE/PLAIN greeting; what it sends after its greeting (a
    client's HELLO) is returned."""
    codec.initiate()
    mech = codec.mechanism.encode()
    step = feed(codec, greeting(minor, mech, as_server))
    if step.error is not None or step.events:
        raise Finding(f"a valid {codec.mechanism} greeting was refused: {step.error!r}")
    return codec.data_to_send()[GREETING_REST:]


class Auth:
    """A server's authenticator: records what it was asked, answers as the input says."""

    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self.asked: list[tuple[str, dict[str, str]]] = []

    def __call__(self, mechanism: str, credentials: Mapping[str, str]) -> AuthResult:
        self.asked.append((mechanism, dict(credentials)))
        return AuthResult(self.allow, "fuzz-allow" if self.allow else "fuzz-deny")


class Delivered:
    """The data frames the harness sent once the handshake was done (the model: frame, MORE),
    and the messages the codec gave; ``modelled`` False once a step did something the model
    does not follow (then only "nothing but a protocol error escapes" is left)."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bool]] = []
        self.got: list[tuple[bytes, ...]] = []
        self.modelled = True

    def check(self) -> None:
        """Delivered frames are the sent ones, in order, none missing up to the last complete
        message."""
        if not self.modelled:
            return
        flat = [f for m in self.got for f in m]
        frames = [f for f, _ in self.sent]
        if flat != frames[: len(flat)]:
            raise Finding(f"data frames changed: delivered {flat!r:.120}, sent {frames!r:.120}")
        complete = max((i + 1 for i, (_, more) in enumerate(self.sent) if not more), default=0)
        if len(flat) < complete:
            raise Finding(f"data frames lost: delivered {len(flat)} of {complete}")


def check_step(op: int, step: Step, must_refuse: bool, honest_op: int, honest: bool,
               kind: str) -> HandshakeComplete | None:
    """A dishonest or out-of-order command is refused in its own step; the handshake completes
    only on an honest ``honest_op`` and with a Socket-Type ``kind`` accepts."""
    if must_refuse and not step.refused:
        raise Finding(f"op {op}: a command that is not honest or not in order was taken "
                      f"({step.events!r:.160})")
    done = step.completed
    if done is not None:
        if op != honest_op or not honest:
            raise Finding(f"the handshake completed on op {op} (honest {honest})")
        if done.peer_type not in LEGAL_PEERS[kind]:
            raise Finding(f"{kind} completed with {done.peer_type!r}")
    return done


Steps = Callable[[Data, str, bool, int, bool], None]


def run(buf: bytes, strict: bool, kinds: tuple[str, ...], server: Steps, client: Steps,
        raw_server: Callable[[Auth], Mechanism]) -> None:
    """``target kind minor auth`` then the target's steps: 0 our server (``server``), 1 our
    client (``client``; the auth byte is the server greeting's as-server flag), 2 our server
    (``raw_server``) fed raw bytes after a valid greeting."""
    data = Data(buf)
    target = data.byte() % 3
    kind = data.choice(kinds)
    minor = data.byte() & 1
    allow = not data.byte() & 1
    if target == 0:
        server(data, kind, allow, minor, strict)
    elif target == 1:
        client(data, kind, allow, minor, strict)
    else:
        codec = ZmtpCodec(zmtp_role(kind, False), security=raw_server(Auth(allow)))
        codec.initiate()
        feed(codec, greeting(minor, codec.mechanism.encode()) + data.rest(), strict)
