"""Live bridges between real ZeroMQ (pyzmq) and nng (pynng) peers, through the gateway CLI.

``run_demo()`` runs eight short scenes, each with its own ``gateway bridge`` process:

* zmq -> nng with the library backends (pyzmq front, pynng back), then with the native engine:
  a ZeroMQ REQ and a ZeroMQ DEALER with an application envelope talk to a raw nng REP server
  that shows the SP backtrace it receives (the gateway's token stands for the whole ZeroMQ
  envelope);
* nng -> zmq, the same two ways: an nng REQ talks to a ZeroMQ ROUTER server that shows the
  envelope it receives (the SP backtrace as 4-byte frames) and returns it, as ROUTERs do;
* one port, both wires (``any+tcp://``): a ZeroMQ REQ, a ZeroMQ DEALER and an nng REQ on the
  same gateway port, to the nng server and then to the ZeroMQ server;
* pub/sub: an nng publisher (pub0) -> gateway -> two ZeroMQ SUB subscribers, each getting only
  the prefix it subscribed to (the gateway subscribes at the publisher to their union);
* CURVE: a gateway front that lets in only the ZeroMQ clients whose public key it knows, in
  front of an nng server: a known client gets its reply, an unknown key is refused and counted.

It prints what crossed (requests, replies, envelopes in hex), stops each gateway with SIGTERM
(exit code 0) and finishes in a few seconds. Run it alone with ``python examples/demo_bridges.py``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pynng
import zmq
from pynng import ffi, lib

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
TIMEOUT_MS = 5000


def _hex(frames: list[bytes]) -> str:
    return "[" + " ".join(f.hex() or "''" for f in frames) + "]"


def _say(who: str, text: str) -> None:
    print(f"  {who:<18} {text}", flush=True)


# ---------------------------------------------------------------------------------------------
# the gateway process


class _Gateway:
    """``gateway bridge FRONT BACK`` as a child process; ``front``/``back`` from its READY line."""

    def __init__(self, front: str, back: str, *extra: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "bridge", front, back, "--log-level", "warning",
             *extra],
            cwd=REPO, env=env, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        lines: queue.Queue[str] = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None

        def pump() -> None:
            for line in stdout:
                lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        try:
            line = lines.get(timeout=15)
        except queue.Empty:
            self.stop()
            raise RuntimeError("the gateway did not report READY") from None
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"the gateway said {line!r}")
        fields = dict(part.split("=", 1) for part in line.split()[1:])
        self.front, self.back = fields["front"], fields["back"]
        self.metrics = fields.get("metrics", "")
        _say("gateway", line.strip())

    def lib_front(self) -> str:  # zmq+tcp://h:p -> tcp://h:p, what pyzmq / pynng dial
        return self.front.split("+", 1)[1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(10)
                _say("gateway", f"SIGTERM -> exit code {code}")
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                _say("gateway", "killed (did not stop within 10 s)")


# ---------------------------------------------------------------------------------------------
# servers, each in its own thread (a libzmq socket never leaves the thread that made it)


class _RawNngServer:
    """nng raw rep0: receives the SP backtrace words in front of the body and returns them."""

    def __init__(self, explain: str = " (its pipe id, then the gateway's token)") -> None:
        self.explain = explain
        self.sock = pynng.Rep0(opener=lib.nng_rep0_open_raw, recv_timeout=100)
        listener = self.sock.listen(f"tcp://{HOST}:0")
        self.port = int(str(listener.local_address).rsplit(":", 1)[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        msg_p = ffi.new("nng_msg **")
        while not self._stop.is_set():
            if lib.nng_recvmsg(self.sock.socket, msg_p, 0):  # timeout or closed
                continue
            m = msg_p[0]
            header = ffi.buffer(lib.nng_msg_header(m), lib.nng_msg_header_len(m))[:]
            body = ffi.buffer(lib.nng_msg_body(m), lib.nng_msg_len(m))[:]
            words = [header[i : i + 4] for i in range(0, len(header), 4)]
            _say("nng REP (raw)", f"got {body!r}, SP backtrace {_hex(words)}{self.explain}")
            reply = body + b" -> nng"
            lib.nng_msg_clear(m)
            lib.nng_msg_append(m, reply, len(reply))  # header kept: it routes the reply
            if lib.nng_sendmsg(self.sock.socket, m, 0):
                lib.nng_msg_free(m)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


class _ZmqRouterServer:
    """A ZeroMQ ROUTER server: shows the envelope it got and returns it with the reply."""

    def __init__(self, explain: str = " (identity, SP pipe id, request id, delimiter)") -> None:
        self.explain = explain
        self._stop = threading.Event()
        self._port: queue.Queue[int] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self.port = self._port.get(timeout=10)

    def _serve(self) -> None:
        ctx = zmq.Context()
        sock = ctx.socket(zmq.ROUTER)
        sock.linger = 0
        self._port.put(sock.bind_to_random_port(f"tcp://{HOST}"))
        try:
            while not self._stop.is_set():
                if not sock.poll(100):
                    continue
                *envelope, body = sock.recv_multipart()
                _say("zmq ROUTER", f"got {body!r}, envelope {_hex(envelope)}{self.explain}")
                sock.send_multipart([*envelope, body + b" -> zmq"])
        finally:
            sock.close(0)
            ctx.term()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


# ---------------------------------------------------------------------------------------------
# scenes


@contextlib.contextmanager
def _bridging(server: _RawNngServer | _ZmqRouterServer, front: str,
              back: str) -> Iterator[_Gateway]:
    """A gateway from ``front`` to ``back`` (``{port}``: the server's); on the way out the
    gateway stops, then the server."""
    try:
        gw = _Gateway(front, back.format(port=server.port))
        try:
            yield gw
        finally:
            gw.stop()
    finally:
        server.stop()


def _zmq_client(ctx: zmq.Context[zmq.Socket[bytes]], kind: int, url: str) -> zmq.Socket[bytes]:
    sock = ctx.socket(kind)
    sock.linger, sock.rcvtimeo = 0, TIMEOUT_MS
    sock.connect(url)
    return sock


def _zmq_to_nng(backend: str) -> None:
    front_be, back_be = ("pyzmq", "pynng") if backend == "lib" else ("native", "native")
    print(f"\n== ZeroMQ clients -> gateway -> nng server (front {front_be}, back {back_be}) ==",
          flush=True)
    with zmq.Context() as ctx, _bridging(_RawNngServer(), f"@zmq+tcp://{HOST}:0?backend={front_be}",
                                         f">sp+tcp://{HOST}:{{port}}?backend={back_be}") as gw:
        req = _zmq_client(ctx, zmq.REQ, gw.lib_front())
        req.send(b"hello from REQ")
        _say("zmq REQ", "sent b'hello from REQ'")
        _say("zmq REQ", f"got {req.recv()!r}")
        req.close()

        dealer = _zmq_client(ctx, zmq.DEALER, gw.lib_front())
        for i in (1, 2):
            frames = [b"app", b"order-%d" % i, b"", b"item %d" % i]
            dealer.send_multipart(frames)
            _say("zmq DEALER", f"sent envelope {_hex(frames[:-1])} body {frames[-1]!r}")
        for _ in (1, 2):
            *envelope, body = dealer.recv_multipart()
            _say("zmq DEALER", f"got envelope {_hex(envelope)} body {body!r} (its own, back)")
        dealer.close()


def _nng_to_zmq(backend: str) -> None:
    front_be, back_be = ("pynng", "pyzmq") if backend == "lib" else ("native", "native")
    print(f"\n== nng client -> gateway -> ZeroMQ server (front {front_be}, back {back_be}) ==",
          flush=True)
    with _bridging(_ZmqRouterServer(), f"@sp+tcp://{HOST}:0?backend={front_be}",
                   f">zmq+tcp://{HOST}:{{port}}?backend={back_be}") as gw:
        with pynng.Req0(recv_timeout=TIMEOUT_MS, send_timeout=TIMEOUT_MS) as req:
            req.dial(gw.lib_front(), block=False)
            for i in (1, 2):
                body = b"hello %d from nng REQ" % i
                req.send(body)
                _say("nng REQ", f"sent {body!r}")
                _say("nng REQ", f"got {req.recv()!r}")


def _one_port(back: str) -> None:
    """``any+tcp://``: a libzmq REQ, a libzmq DEALER and an nng REQ on the same gateway port."""
    print(f"\n== one port, both wires: ZeroMQ and nng clients -> gateway any+tcp -> "
          f"{'nng' if back == 'sp' else 'ZeroMQ'} server ==", flush=True)
    server: _RawNngServer | _ZmqRouterServer = (
        _RawNngServer(" (pipe id; a token for a ZeroMQ client, its backtrace for an nng one)")
        if back == "sp" else
        _ZmqRouterServer(" (identity; the ZeroMQ client's envelope or the nng client's hops)"))
    with zmq.Context() as ctx, _bridging(server, f"@any+tcp://{HOST}:0",
                                         f">{back}+tcp://{HOST}:{{port}}") as gw:
        port = gw.lib_front()
        req, dealer = _zmq_client(ctx, zmq.REQ, port), _zmq_client(ctx, zmq.DEALER, port)
        with pynng.Req0(recv_timeout=TIMEOUT_MS, send_timeout=TIMEOUT_MS) as nreq:
            nreq.dial(port, block=False)
            req.send(b"hello from zmq REQ")
            _say("zmq REQ", f"got {req.recv()!r}")
            dealer.send_multipart([b"order-1", b"", b"from zmq DEALER"])
            *envelope, body = dealer.recv_multipart()
            _say("zmq DEALER", f"got envelope {_hex(envelope)} body {body!r}")
            nreq.send(b"hello from nng REQ")
            _say("nng REQ", f"got {nreq.recv()!r}")
        req.close()
        dealer.close()


def _pubsub() -> None:
    """An nng publisher, two ZeroMQ subscribers with their own prefixes, the gateway between."""
    print("\n== pub/sub: nng publisher -> gateway -> ZeroMQ subscribers ==", flush=True)
    pub = pynng.Pub0()
    listener = pub.listen(f"tcp://{HOST}:0")
    port = int(str(listener.local_address).rsplit(":", 1)[1])
    stop = threading.Event()

    def publish() -> None:  # a publisher sends whether anyone listens or not
        n = 0
        while not stop.is_set():
            for topic in (b"prices.eur", b"prices.usd", b"weather.paris"):
                pub.send(b"%s %d" % (topic, n))
            n += 1
            time.sleep(0.05)

    gw = None
    ctx = zmq.Context()
    publisher = threading.Thread(target=publish, daemon=True)
    try:
        gw = _Gateway(f"@zmq+tcp://{HOST}:0?pattern=pubsub", f">sp+tcp://{HOST}:{port}",
                      "--metrics", f"{HOST}:0")
        publisher.start()
        subs = {}
        for prefix in (b"prices.", b"weather."):
            sub = ctx.socket(zmq.SUB)
            sub.linger, sub.rcvtimeo = 0, TIMEOUT_MS
            sub.subscribe(prefix)
            sub.connect(gw.lib_front())
            subs[prefix] = sub
        for prefix, sub in subs.items():
            got = [sub.recv() for _ in range(3)]
            assert all(m.startswith(prefix) for m in got), got
            _say("zmq SUB", f"subscribed {prefix!r}, got {got}")
        prefixes = _metric(gw.metrics, "gateway_subscribed_prefixes")
        _say("gateway", f"holds {prefixes:.0f} prefixes at the publisher (the union of its "
                        "subscribers')")
        for sub in subs.values():
            sub.close()
    finally:
        stop.set()
        if publisher.is_alive():
            publisher.join(5)
        if gw is not None:
            gw.stop()
        pub.close()
        ctx.term()


def _curve() -> None:
    """A CURVE front: a ZeroMQ client with a known key gets through, an unknown one does not."""
    import tempfile

    import zmq.auth

    print("\n== CURVE: ZeroMQ clients with keys -> gateway (CURVE server) -> nng server ==",
          flush=True)
    server = _RawNngServer(" (a plain SP request: CURVE ends at the gateway)")
    gw = None
    ctx = zmq.Context()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "clients").mkdir()
        keys = {}
        for name in ("server", "alice", "mallory"):
            _public, secret = zmq.auth.create_certificates(tmp, name)
            os.chmod(secret, 0o600)
            keys[name] = zmq.auth.load_certificate(secret)
        (base / "clients" / "alice.key").write_text((base / "alice.key").read_text())
        try:
            gw = _Gateway(f"@zmq+tcp://{HOST}:0?curve_server=1&curve_cert={base}/server.key_secret"
                          f"&curve_allow={base}/clients", f">sp+tcp://{HOST}:{server.port}",
                          "--metrics", f"{HOST}:0")
            for who in ("alice", "mallory"):
                req = ctx.socket(zmq.REQ)
                req.linger, req.rcvtimeo = 0, TIMEOUT_MS
                req.curve_publickey, req.curve_secretkey = keys[who]
                req.curve_serverkey = keys["server"][0]
                req.connect(gw.lib_front())
                req.send(b"hello from " + who.encode())
                if who == "alice":
                    _say(f"zmq REQ ({who})", f"got {req.recv()!r}")
                else:  # refused at the handshake: its request never leaves the client
                    deadline = time.monotonic() + TIMEOUT_MS / 1000
                    while not _metric(gw.metrics, "gateway_auth_failures_total"):
                        assert time.monotonic() < deadline, "mallory was not refused"
                        time.sleep(0.05)
                    assert not req.poll(100), "mallory got a reply"
                    _say(f"zmq REQ ({who})", "refused: its key is not in curve_allow")
                req.close()
            refused = _metric(gw.metrics, "gateway_auth_failures_total")
            _say("gateway", f"gateway_auth_failures_total{{reason=\"unknown-key\"}} {refused:.0f}")
        finally:
            if gw is not None:
                gw.stop()
            server.stop()
            ctx.term()


def _metric(address: str, name: str) -> float:
    """The sum of a metric's samples on a gateway's /metrics."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name)


def run_demo() -> None:
    """The eight scenes; raises if a reply does not come within 5 s."""
    t0 = time.monotonic()
    for backend in ("lib", "native"):
        _zmq_to_nng(backend)
        _nng_to_zmq(backend)
    for back in ("sp", "zmq"):
        _one_port(back)
    _pubsub()
    _curve()
    print(f"\nbridges demo done in {time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    run_demo()
