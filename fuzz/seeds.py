"""``python -m fuzz seeds``: the corpora's starting inputs, from real peers on 127.0.0.1, so the
fuzzers start deep (a whole greeting, READY, a CURVE HELLO that opens, an nng upgrade request):

* libzmq 4.3.5 (pyzmq) sockets of every type dial a listener that answers with the gateway's
  own codec (NULL, PLAIN, CURVE with the harnesses' fixed server key): every byte libzmq sends
  (greeting, READY or HELLO/INITIATE, messages, subscriptions, heartbeat PINGs) is kept;
* nng (pynng) sockets of every protocol dial a listener that sends the right SP header (TCP and
  IPC): nng's header and messages are kept; an nng REQ over ``ws://`` gives its HTTP upgrade
  request and a masked frame, an nng REP over ``ws://`` its reply frame;
* the repository's example ``gateway.toml`` and the endpoint URLs the README shows;
* the kernel harnesses' (``fuzz/kernel_seeds.py``): the captures above, past their handshakes,
  as a bridge's peers send them, and the kernel tests' crafted cases (``--kernel``: these alone);
* one input per harness written with its own layout for an honest session (handshake, messages
  in several frames, a ping), one ``known-<id>`` input per known finding
  (``fuzz._data.KNOWN``), which ``tests/test_fuzz_corpus.py`` replays strictly, and one
  ``regression-<id>`` input per finding fixed since.

Each seed is ``fuzz/corpus/<harness>/seed-<what>``; running this again rewrites them (libzmq's
and nng's bytes differ between runs only in random fields: identities, request ids, nonces).
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynng
import zmq
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request

from gateway.engine.codecs import sp_role, zmtp_role
from gateway.wire import z85
from gateway.wire.events import HandshakeComplete
from gateway.wire.sp import SpCodec
from gateway.wire.zmtp import ZmtpCodec
from gateway.wire.zmtp_curve import CurveServer
from gateway.wire.zmtp_mechanism import allow_all
from gateway.wire.zmtp_plain import PlainServer

from . import config as config_h
from . import curve as curve_h
from . import plain as plain_h
from . import sp_codec as sp_h
from . import ws as ws_h
from . import zmtp_codec as zmtp_h
from ._data import Writer
from ._zmtp_sec import CLIENT, SERVER
from .ws import MASK, ws_frame

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fuzz" / "corpus"
WAIT = 2.0  # seconds a capture may take at most


def save(harness: str, name: str, data: bytes) -> None:
    d = CORPUS / harness
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)
    print(f"  {harness}/{name}: {len(data)} bytes")


def _listener(family: int = socket.AF_INET, path: str = "") -> tuple[socket.socket, str]:
    srv = socket.socket(family, socket.SOCK_STREAM)
    if family == socket.AF_UNIX:
        srv.bind(path)
    else:
        srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(WAIT)
    name = path or f"127.0.0.1:{srv.getsockname()[1]}"
    return srv, name


def _pump(conn: socket.socket, codec: Any, on_ready: Callable[[], None],
          ours: tuple[tuple[bytes, ...], ...] = ()) -> bytes:
    """Read the peer with ``codec`` (answering what it answers) until the peer is quiet; after
    the handshake send ``ours`` and call ``on_ready`` (the library's side acts). Returns every
    byte the peer sent."""
    got = bytearray()
    conn.settimeout(0.05)
    conn.sendall(codec.initiate())
    done = False
    deadline = time.monotonic() + WAIT
    quiet = 0.0
    while time.monotonic() < deadline and quiet < 0.4:
        try:
            data = conn.recv(65536)
        except TimeoutError:
            data = None
            quiet += 0.05
        if data == b"":
            break
        if data:
            quiet = 0.0
            got += data
            codec.receive_data(data)
            while (ev := codec.next_event()) is not None:
                if isinstance(ev, HandshakeComplete) and not done:
                    done = True
                    out = codec.data_to_send()
                    for parts in ours:
                        out += codec.send_message(parts)
                    conn.sendall(out)
                    on_ready()
        out = codec.data_to_send()
        if out:
            conn.sendall(out)
    return bytes(got)


# -- libzmq -------------------------------------------------------------------------------------
#: libzmq type -> (our kind that accepts it, raw, what we send it after the handshake)
ZMTP_PEERS: dict[int, tuple[str, bool, tuple[tuple[bytes, ...], ...]]] = {
    zmq.REQ: ("REP", False, ()),
    zmq.DEALER: ("REP", True, ()),
    zmq.REP: ("REQ", False, ((b"", b"hello"),)),
    zmq.ROUTER: ("REQ", True, ((b"", b"hello"),)),
    zmq.PUB: ("SUB", False, ((b"\x01",),)),  # a 3.0-style subscription to everything
    zmq.SUB: ("PUB", False, ()),
    zmq.XSUB: ("PUB", True, ()),
    zmq.PUSH: ("PULL", False, ()),
    zmq.PULL: ("PUSH", False, ()),
    zmq.PAIR: ("PAIR", False, ((b"hi",),)),
}


def _libzmq_acts(sock: zmq.Socket) -> Callable[[], None]:
    def act() -> None:
        kind = sock.type
        if kind == zmq.REQ:
            sock.send(b"hello")
        elif kind == zmq.DEALER:
            sock.send_multipart([b"", b"hello", b"x" * 300])
        elif kind in (zmq.PUB, zmq.PUSH, zmq.PAIR):
            for i in range(3):
                sock.send_multipart([b"topic", b"message %d" % i] if kind == zmq.PUB
                                    else [b"message %d" % i])
        elif kind in (zmq.SUB,):
            sock.setsockopt(zmq.SUBSCRIBE, b"topic")
        elif kind == zmq.XSUB:
            sock.send(b"\x01topic")
        threading.Thread(target=_answer, args=(sock,), daemon=True).start()

    return act


def _answer(sock: zmq.Socket) -> None:
    """REP and ROUTER answer the request they get."""
    if sock.type not in (zmq.REP, zmq.ROUTER):
        return
    if sock.poll(int(WAIT * 1000)):
        sock.send_multipart(sock.recv_multipart())


def capture_libzmq(ctx: zmq.Context, kind: int, mechanism: str = "NULL") -> bytes:
    ours, raw, first = ZMTP_PEERS[kind]
    srv, address = _listener()
    sock = ctx.socket(kind)
    sock.linger = 0
    sock.heartbeat_ivl = 100  # PINGs too
    security: CurveServer | PlainServer | None = None
    if mechanism == "CURVE":
        sock.curve_serverkey = z85.encode(SERVER[0]).encode()
        sock.curve_publickey = z85.encode(CLIENT[0]).encode()
        sock.curve_secretkey = z85.encode(CLIENT[1]).encode()
        security = CurveServer(SERVER[0], SERVER[1], allow_all)
    elif mechanism == "PLAIN":
        sock.plain_username = b"alice"
        sock.plain_password = b"s3cret"
        security = PlainServer(allow_all)
    if kind in (zmq.REQ, zmq.DEALER, zmq.ROUTER):
        sock.routing_id = b"libzmq-" + mechanism.lower().encode()
    sock.connect(f"tcp://{address}")
    try:
        conn, _ = srv.accept()
        codec = ZmtpCodec(zmtp_role(ours, raw), security=security)
        with conn:
            return _pump(conn, codec, _libzmq_acts(sock), first)
    finally:
        sock.close()
        srv.close()


# -- nng ----------------------------------------------------------------------------------------
#: our kind -> the pynng socket that talks to it, and what it does once connected
SP_PEERS: dict[str, tuple[type, str]] = {
    "REP": (pynng.Req0, "send"), "REQ": (pynng.Rep0, "answer"), "SUB": (pynng.Pub0, "send"),
    "PUB": (pynng.Sub0, "none"), "PULL": (pynng.Push0, "send"), "PUSH": (pynng.Pull0, "none"),
    "PAIR": (pynng.Pair0, "send"), "PAIR1": (pynng.Pair1, "send"),
}


def capture_nng(ours: str, ipc: bool = False) -> bytes:
    cls, what = SP_PEERS[ours]
    tmp = tempfile.mkdtemp(prefix="gateway-fuzz-seeds-")
    path = os.path.join(tmp, "sp.sock")
    srv, address = _listener(socket.AF_UNIX if ipc else socket.AF_INET, path if ipc else "")
    peer = cls(recv_timeout=int(WAIT * 1000), send_timeout=int(WAIT * 1000))
    peer.dial(f"ipc://{path}" if ipc else f"tcp://{address}", block=False)
    codec = SpCodec(sp_role(ours), message_prefix=b"\x01" if ipc else b"")
    first: tuple[tuple[bytes, ...], ...] = ()
    if what == "answer":
        first = ((b"\x80\x00\x00\x01hello",),)

    def act() -> None:
        def run() -> None:
            try:
                if what == "send":
                    time.sleep(0.1)  # nng has our header by now (a pub0 drops what it
                    for i in range(3):  # sends before its pipe is up)
                        peer.send(b"message %d" % i)
                elif what == "answer":
                    peer.send(peer.recv()[::-1])
            except pynng.NNGException:
                pass

        threading.Thread(target=run, daemon=True).start()

    try:
        conn, _ = srv.accept()
        with conn:
            return _pump(conn, codec, act, first)
    finally:
        peer.close()
        srv.close()


def capture_nng_ws() -> tuple[bytes, bytes]:
    """(what an nng REQ dialer sends a ws listener: its upgrade request and one masked frame;
    the request's length), as the ws harness's listener input."""
    srv, address = _listener()
    peer = pynng.Req0(recv_timeout=int(WAIT * 1000), send_timeout=int(WAIT * 1000))
    peer.dial(f"ws://{address}/svc", block=False)
    try:
        conn, _ = srv.accept()
        conn.settimeout(WAIT)
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            ws = WSConnection(ConnectionType.SERVER)
            ws.receive_data(request)
            asked = next(e for e in ws.events() if isinstance(e, Request))
            conn.sendall(ws.send(AcceptConnection(subprotocol=asked.subprotocols[0])))
            threading.Thread(target=lambda: peer.send(b"hello over ws"), daemon=True).start()
            frames = conn.recv(65536)
            return request + frames, request
    finally:
        peer.close()
        srv.close()


def capture_nng_ws_reply() -> bytes:
    """The frame an nng REP listener sends back over ws (after its 101), for the ws harness's
    dialer input (the harness makes the 101 itself: the accept key is the dialer's)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rep = pynng.Rep0(listen=f"ws://127.0.0.1:{port}/svc", recv_timeout=int(WAIT * 1000))
    try:
        ws = WSConnection(ConnectionType.CLIENT)
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as conn:
            conn.sendall(ws.send(Request(host=f"127.0.0.1:{port}", target="/svc",
                                         subprotocols=["rep.sp.nanomsg.org"])))
            got = b""
            while b"\r\n\r\n" not in got:
                got += conn.recv(65536)
            conn.sendall(ws_frame(2, b"\x80\x00\x00\x07hello", mask=MASK))
            threading.Thread(target=lambda: rep.send(rep.recv()[::-1]), daemon=True).start()
            head, _, rest = got.partition(b"\r\n\r\n")
            deadline = time.monotonic() + WAIT
            while len(rest) < 2 and time.monotonic() < deadline:
                rest += conn.recv(65536)
            return rest
    finally:
        rep.close()


# -- honest sessions in each harness's layout -----------------------------------------------
def curve_server_session(kind: int, peer: int) -> bytes:
    w = Writer().byte(0).byte(0)  # HELLO, honest
    w.byte(1).byte(0).raw(b"v" * 16).byte(peer)  # INITIATE, honest, Socket-Type PEER_TYPES[peer]
    w.byte(2).byte(0).short(b"")  # MESSAGE: a delimiter, then two frames (MORE), a PING
    w.byte(2).byte(2).short(b"part 1").byte(2).byte(0).short(b"part 2")
    w.byte(2).byte(1).byte(0x02).short(b"\x04PING\x00\x0aHI")
    return curve_h.encode_input(target=0, kind=kind, steps=w.bytes())


def curve_client_session(kind: int, peer: int) -> bytes:
    w = Writer().byte(0).byte(0).raw(b"n" * 16).raw(b"c" * 96)  # WELCOME, honest
    w.byte(1).byte(0).byte(peer)  # READY
    w.byte(2).byte(0).short(b"reply").byte(2).byte(8).short(b"replayed nonce")
    return curve_h.encode_input(target=1, kind=kind, steps=w.bytes())


def plain_sessions() -> dict[str, bytes]:
    server = Writer().byte(0).byte(0).short(b"alice").short(b"s3cret")
    server.byte(1).byte(0).byte(1).short(b"id")  # INITIATE as a REP, Identity "id"
    server.byte(2).byte(1).short(b"").byte(2).byte(0).short(b"body")
    client = Writer().short(b"bob").short(b"pw").byte(0).byte(0).byte(1).byte(0).byte(1)
    client.byte(2).byte(0).short(b"reply")
    return {
        "seed-server-session": plain_h.encode_input(target=0, kind=0, steps=server.bytes()),
        "seed-server-refuses": plain_h.encode_input(target=0, kind=0, auth=1,
                                                    steps=server.bytes()),
        "seed-client-session": plain_h.encode_input(target=1, kind=0, steps=client.bytes()),
    }


def ws_sessions() -> dict[str, bytes]:
    # a message in one frame; 800 bytes in three fragments with a ping after the first; a
    # ping; a pong
    steps = Writer().byte(0).short(b"\x80\x00\x00\x01hello").byte(0).byte(0).byte(0)
    steps.byte(0).short(b"x" * 200).byte(1).byte(3).byte(2).byte(0)
    steps.byte(2).byte(4).raw(b"ping").byte(3).byte(2).raw(b"po")
    return {f"seed-{'dialer' if role else 'listener'}-{size}-session": ws_h.encode_input(
        role=role, proto=1 - role, path=1, mode=2, size=size, rest=steps.bytes())
        for role in (0, 1) for size in (0, 1)}


def known_inputs() -> dict[str, tuple[str, bytes]]:
    """One input per known finding (``fuzz._data.KNOWN``): ``(harness, input)``; none open
    today (the fixed ones are :func:`fixed_inputs`)."""
    return {}


def fixed_inputs() -> dict[str, tuple[str, bytes]]:
    """One input per finding that was known and is fixed (issue 20, findings 10 and 14, then
    what the harnesses found), kept as ``regression-<id>``: its check now fails every run."""
    z85_key = next(k for k in (bytes([i]) * 32 for i in range(256))
                   if set(z85.encode(k)) & set("%+&"))
    return {
        "secret-echo": ("config", config_h.encode_input(
            0, b"zmq+tcp://127.0.0.1:5555?plain_password=s3cr3T-0123456789ab")),
        "z85-in-url": ("config", config_h.encode_input(4, b"\x01" + z85_key + b"\x00" * 8)),
        "secret-echo-loose": ("config", config_h.encode_input(
            0, b"zmq+tcp://127.0.0.1:5555?curve_server=1;curve_secretkey=s3cr3T-0123456789ab")),
        "secret-echo-z85-window": ("config", config_h.encode_input(
            0, b"zmq+tcp://127.0.0.1:5555?curve_serverkey=abc&plain_password=s3cr3T-0123456789abcd")),
        "secret-echo-loose-misspelt": ("config", config_h.encode_input(
            0, b"zmq+tcp://127.0.0.1:5555?hwm=5;plain_password=s3cr3T-0123456789ab"
               b"&plainpassword=s3cr3T-abcdef0123&curve_secret_key=s3cr3T-9876543210")),
        "secret-echo-loose-scheme": ("config", config_h.encode_input(
            0, b"zmq?x=1://127.0.0.1:5555?plain_password=s3cr3T-0123456789ab")),
        "curve-low-order": ("curve", curve_h.encode_input(
            target=1, kind=0, steps=Writer().byte(0).byte(1).raw(b"n" * 16).raw(bytes(32))
            .raw(b"c" * 96).bytes())),
        "ws-non-ascii-header": ("ws", ws_h.encode_input(
            role=0, proto=ws_h.KINDS.index("REP"), rest=(
                b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                b"Sec-WebSocket-Protocol: \x80\r\n\r\n"))),
        "config-name-too-long": ("config", config_h.encode_input(2, (
            '[[bridge]]\nfront = "@zmq+tcp://127.0.0.1:5555?curve_server=1&curve_cert='
            + "a" * 300 + '"\nback = ">sp+tcp://127.0.0.1:6000"\n').encode())),
    }


def _urls() -> list[str]:
    text = (ROOT / "README.md").read_text() + "".join(
        p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
    found = re.findall(r"[@>]?(?:zmq|sp|nng|nanomsg|any|inproc)[+a-z]*://[^\s`'\"<>)\]]+", text)
    return sorted(set(found))[:40]


def main() -> None:
    ctx = zmq.Context()
    try:
        print("libzmq (pyzmq) peers, NULL:")
        for kind, (ours, raw, _) in ZMTP_PEERS.items():
            name = zmq.SocketType(kind).name
            stream = capture_libzmq(ctx, kind)
            index = zmtp_h.KINDS.index((ours, raw))
            save("zmtp_codec", f"seed-libzmq-{name}", zmtp_h.encode_input(
                kind=index, prelude=0, stream=stream))
            save("zmtp_codec", f"seed-libzmq-{name}-cut", zmtp_h.encode_input(
                kind=index, prelude=0, size=1, limit=1, cuts=(1, 10, 11, 64, 70, 90),
                stream=stream))
        print("libzmq CURVE and PLAIN clients:")
        save("curve", "seed-libzmq-DEALER-raw", curve_h.encode_input(
            target=2, kind=3, steps=capture_libzmq(ctx, zmq.DEALER, "CURVE")[64:]))
        save("plain", "seed-libzmq-DEALER-raw", plain_h.encode_input(
            target=2, kind=3, steps=capture_libzmq(ctx, zmq.DEALER, "PLAIN")[64:]))
    finally:
        ctx.term()
    print("nng (pynng) peers:")
    for ours in SP_PEERS:
        index = sp_h.KINDS.index(ours)
        save("sp_codec", f"seed-nng-{SP_PEERS[ours][0].__name__}", sp_h.encode_input(
            kind=index, prelude=0, stream=capture_nng(ours)))
    save("sp_codec", "seed-nng-Req0-ipc", sp_h.encode_input(
        kind=sp_h.KINDS.index("REP"), ipc=True, prelude=0, size=1, cuts=(3, 9, 12),
        stream=capture_nng("REP", ipc=True)))
    stream, request = capture_nng_ws()
    save("ws", "seed-nng-Req0-listener", ws_h.encode_input(
        role=0, proto=ws_h.KINDS.index("REP"), path=1, mode=0, cuts=(len(request),),
        rest=stream))
    save("ws", "seed-nng-Rep0-dialer", ws_h.encode_input(
        role=1, proto=ws_h.KINDS.index("REQ"), path=1, mode=1, rest=capture_nng_ws_reply()))
    print("honest sessions:")
    for kind in range(4):
        peer = {0: 1, 1: 0, 2: 3, 3: 2}[kind]  # PEER_TYPES: REQ REP DEALER ROUTER
        save("curve", f"seed-server-{curve_h.KINDS[kind]}", curve_server_session(kind, peer))
        save("curve", f"seed-client-{curve_h.KINDS[kind]}", curve_client_session(kind, peer))
    for name, data in plain_sessions().items():
        save("plain", name, data)
    for name, data in ws_sessions().items():
        save("ws", name, data)
    print("configuration:")
    save("config", "seed-example-gateway-toml", config_h.encode_input(
        2, (ROOT / "examples" / "gateway.toml").read_bytes()))
    for i, url in enumerate(_urls()):
        save("config", f"seed-url-{i:02d}", config_h.encode_input(0, url.encode()))
    save("config", "seed-structured", config_h.encode_input(3, bytes(range(1, 200))))
    print("known findings, and fixed ones:")
    for finding, (harness, data) in known_inputs().items():
        save(harness, f"known-{finding}", data)
    for finding, (harness, data) in fixed_inputs().items():
        save(harness, f"regression-{finding}", data)
    kernel()


def kernel() -> None:
    """The kernel harnesses' seeds (fuzz/kernel_seeds.py), from the captures just kept."""
    from . import kernel_seeds

    print("the kernel harnesses: captures past their handshakes, crafted cases:")
    for harness, name, data in kernel_seeds.inputs():
        save(harness, name, data)
