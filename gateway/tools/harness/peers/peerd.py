# ruff: noqa: UP006, UP007, UP035, UP045
"""A peer process: sockets of one library driven line by line, run by path under the
interpreter that has the library (``python peerd.py DRIVER``; it imports no ``gateway``).

It serves the implementations that cannot live in the matrix's own process: another
generation of a library that the process already has (libzmq 4.3.4 from Debian's pyzmq,
libzmq 4.1.6 from pyzmq 16 on Python 3.6, nng 1.1.1 from pynng 0.4 on Python 3.7, nng 2.0 from
python-nng), or a library with its own runtime (omq.rs through pyomq). Kept to Python 3.6.

Drivers: ``pyzmq`` (module ``zmq``), ``pyomq``, ``pynng``, ``nng`` (python-nng). Protocol: one
``READY {json}`` line (library and version), then one JSON command per stdin line and one
``RESULT {json}`` line per command (``{"error": ...}`` when it failed; a command's ``seq``
comes back in its result):

    {"op": "open", "sock": 1, "kind": "REQ", "side": "client", "options": {...}}
    {"op": "bind", "sock": 1, "url": "tcp://127.0.0.1:0"}     -> {"url": real url}
    {"op": "connect", "sock": 1, "url": ...}
    {"op": "request", "sock": 1, "frames": [hex...], "timeout": s}  -> {"frames": [...]} | {}
    {"op": "serve", "sock": 1}       answer every message: same envelope, every body byte + 1
    {"op": "seen", "sock": 1}        -> {"seen": [[hex, ...], ...]} what the responder got
    {"op": "send", "sock": 1, "data": hex}
    {"op": "drain", "sock": 1, "quiet": s, "timeout": s}     -> {"messages": [hex...]}
    {"op": "subscribe" | "unsubscribe", "sock": 1, "topic": hex}
    {"op": "evidence", "sock": 1}    -> {"evidence": "ok" | "lost" | "refused" | null}
    {"op": "close", "sock": 1}, {"op": "reset"} (closes every socket)

Options of ``open``: ``identity`` (hex), ``router_mandatory``, ``heartbeat`` ([ivl_ms,
timeout_ms]), ``topics`` ([hex]), ``curve`` ({secret, public, server, allow}), ``plain``
({username, password} or {users}), ``zap_dir`` (a CURVE server's allowed keys, pyzmq).
The process exits when stdin closes.
"""

import importlib
import json
import os
import sys
import threading
import time
from typing import Any, Dict, List, Optional

# run by path: this folder's zmq.py and nng.py must not stand in for the libraries
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]

INC = bytes((b + 1) & 0xFF for b in range(256))


def hx(frames: List[bytes]) -> List[str]:
    return [bytes(f).hex() for f in frames]


def unhx(frames: List[str]) -> List[bytes]:
    return [bytes.fromhex(f) for f in frames]


class Driver:
    """One socket of one library; ``frames`` are ZeroMQ frames or one SP body."""

    def __init__(self, kind: str, side: str, options: Dict[str, Any]) -> None:
        self.kind, self.side, self.options = kind, side, options

    def bind(self, url: str) -> str:
        raise NotImplementedError

    def connect(self, url: str) -> None:
        raise NotImplementedError

    def send(self, frames: List[bytes], timeout: float) -> bool:
        raise NotImplementedError

    def recv(self, timeout: float) -> Optional[List[bytes]]:
        raise NotImplementedError

    def subscribe(self, topic: bytes, on: bool) -> None:
        raise NotImplementedError

    def evidence(self) -> Optional[str]:
        return None

    def close(self) -> None:
        pass


# -- pyzmq and pyomq ----------------------------------------------------------------------
class HandshakeEvents:
    """A libzmq socket monitor's events, read as the matrix's handshake evidence: ``ok`` once
    a handshake succeeded, ``refused`` when a connection failed or closed before any did,
    ``lost`` when one that had succeeded closed (also used in the matrix's own process)."""

    def __init__(self, z: Any) -> None:
        self.ok_event = z.EVENT_HANDSHAKE_SUCCEEDED if hasattr(z, "EVENT_HANDSHAKE_SUCCEEDED") else -1
        self.bad_events = {getattr(z, name) for name in (
            "EVENT_DISCONNECTED", "EVENT_HANDSHAKE_FAILED_PROTOCOL",
            "EVENT_HANDSHAKE_FAILED_NO_DETAIL", "EVENT_HANDSHAKE_FAILED_AUTH") if hasattr(z, name)}
        self.ok = self.refused = self.lost = False

    def feed(self, event: int) -> None:
        if event == self.ok_event:
            self.ok = True
        elif event in self.bad_events:
            if self.ok:
                self.lost = True
            else:
                self.refused = True

    def verdict(self) -> Optional[str]:
        if self.ok:
            return "lost" if self.lost else "ok"
        return "refused" if self.refused else None


class ZmqDriver(Driver):
    module = "zmq"
    contexts = {}  # type: Dict[str, Any]

    def __init__(self, kind: str, side: str, options: Dict[str, Any]) -> None:
        Driver.__init__(self, kind, side, options)
        z = self.z = importlib.import_module(self.module)
        if self.module not in self.contexts:
            self.contexts[self.module] = z.Context()
        self.ctx = self.contexts[self.module]
        self.s = s = self.ctx.socket(getattr(z, kind))
        s.setsockopt(z.LINGER, 0)
        self.auth = None  # type: Any
        self._security(options)
        if options.get("identity"):
            s.setsockopt(getattr(z, "ROUTING_ID", None) or z.IDENTITY, bytes.fromhex(options["identity"]))
        if kind == "ROUTER" and options.get("router_mandatory"):
            s.setsockopt(z.ROUTER_MANDATORY, 1)
        if options.get("heartbeat"):
            ivl, timeout = options["heartbeat"]
            s.setsockopt(z.HEARTBEAT_IVL, ivl)
            s.setsockopt(z.HEARTBEAT_TIMEOUT, timeout)
        for t in options.get("topics", []):
            self.subscribe(bytes.fromhex(t), True)
        self.mon = None  # type: Any
        self.events = HandshakeEvents(z)
        if hasattr(z, "EVENT_HANDSHAKE_SUCCEEDED") and hasattr(s, "get_monitor_socket"):
            self.mon = s.get_monitor_socket()

    def _security(self, options: Dict[str, Any]) -> None:
        z, s = self.z, self.s
        curve = options.get("curve")
        plain = options.get("plain")
        if curve:
            s.setsockopt(z.CURVE_SECRETKEY, curve["secret"].encode())
            s.setsockopt(z.CURVE_PUBLICKEY, curve["public"].encode())
            if self.side == "server":
                s.setsockopt(z.CURVE_SERVER, 1)
            else:
                s.setsockopt(z.CURVE_SERVERKEY, curve["server"].encode())
        if plain:
            if self.side == "server":
                s.setsockopt(z.PLAIN_SERVER, 1)
            else:
                s.setsockopt(z.PLAIN_USERNAME, plain["username"].encode())
                s.setsockopt(z.PLAIN_PASSWORD, plain["password"].encode())
        if (curve or plain) and self.side == "server":
            self._admit(curve, plain)

    def _admit(self, curve: Any, plain: Any) -> None:
        """A ZAP handler that admits the known CURVE keys and PLAIN users only."""
        from zmq.auth.thread import ThreadAuthenticator

        self.auth = ThreadAuthenticator(self.ctx)
        self.auth.start()
        if curve:
            self.auth.configure_curve(domain="*", location=self.options["zap_dir"])
        else:
            self.auth.configure_plain(domain="*", passwords=plain["users"])

    def bind(self, url: str) -> str:
        if url.startswith("tcp://") and url.endswith(":0"):
            url = url[:-2] + ":*"
        self.s.bind(url)
        last = self.s.getsockopt(self.z.LAST_ENDPOINT)
        return last.decode() if isinstance(last, bytes) else str(last)

    def connect(self, url: str) -> None:
        self.s.connect(url)

    def send(self, frames: List[bytes], timeout: float) -> bool:
        z = self.z
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.s.send_multipart(frames, flags=z.NOBLOCK)
                return True
            except z.Again:
                pass
            except z.ZMQError as exc:
                if exc.errno != z.EHOSTUNREACH:
                    raise
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)

    def recv(self, timeout: float) -> Optional[List[bytes]]:
        if not self.s.poll(max(1, int(timeout * 1000))):
            return None
        return list(self.s.recv_multipart())

    def subscribe(self, topic: bytes, on: bool) -> None:
        z = self.z
        if self.kind == "SUB":
            self.s.setsockopt(z.SUBSCRIBE if on else z.UNSUBSCRIBE, topic)
        elif self.kind == "XSUB":
            self.s.send((b"\x01" if on else b"\x00") + topic)

    def evidence(self) -> Optional[str]:
        while self.mon is not None and self.mon.poll(0):
            frames = self.mon.recv_multipart()
            self.events.feed(int.from_bytes(frames[0][:2], "little"))
        return self.events.verdict()

    def close(self) -> None:
        if self.mon is not None:
            self.s.disable_monitor()
            self.mon.close(0)
        self.s.close(0)
        if self.auth is not None:
            self.auth.stop()


class OmqDriver(ZmqDriver):
    """pyomq (omq.rs): pyzmq's API; admission is the socket's own (``set_curve_auth``,
    ``set_plain_auth``), not a ZAP handler."""

    module = "pyomq"

    def send(self, frames: List[bytes], timeout: float) -> bool:
        """pyomq 0.21 ignores ``NOBLOCK`` and blocks for ``SNDTIMEO`` (forever by default)
        while no peer is attached (a refused pairing): a short ``SNDTIMEO`` makes each try of
        the retrying send return (``Again``, or a ROUTER's unreachable peer) in 20 ms."""
        self.s.setsockopt(self.z.SNDTIMEO, 20)
        return super().send(frames, timeout)

    def recv(self, timeout: float) -> Optional[List[bytes]]:
        """A receive timeout, not ``poll``: pyomq's poll does not see a SUB's messages."""
        self.s.setsockopt(self.z.RCVTIMEO, max(1, int(timeout * 1000)))
        try:
            return list(self.s.recv_multipart())
        except self.z.Again:
            return None

    def _admit(self, curve: Any, plain: Any) -> None:
        if curve:
            z85 = importlib.import_module("pyomq").z85 if hasattr(
                importlib.import_module("pyomq"), "z85") else None
            keys = [k.encode() for k in curve["allow"]]
            if z85 is not None:
                keys = [z85.decode(k) for k in keys]
            self.s.set_curve_auth(keys)
        else:
            self.s.set_plain_auth(sorted(plain["users"].items()))


# -- nng: pynng (old generations) and python-nng (nng 2) ------------------------------------
class SpDriver(Driver):
    """What both nng bindings share: one body per message, timeouts in milliseconds."""

    s = None  # type: Any
    timeout_error = TimeoutError  # type: Any

    def _recv_one(self) -> bytes:
        return bytes(self.s.recv())

    def send(self, frames: List[bytes], timeout: float) -> bool:
        self.s.send_timeout = max(1, int(timeout * 1000))
        try:
            self.s.send(frames[-1])
            return True
        except self.timeout_error:
            return False

    def recv(self, timeout: float) -> Optional[List[bytes]]:
        self.s.recv_timeout = max(1, int(timeout * 1000))
        try:
            return [self._recv_one()]
        except self.timeout_error:
            return None

    def subscribe(self, topic: bytes, on: bool) -> None:
        if on:
            self.s.subscribe(topic)
        else:
            self.s.unsubscribe(topic)

    def close(self) -> None:
        self.s.close()


class PynngDriver(SpDriver):
    def __init__(self, kind: str, side: str, options: Dict[str, Any]) -> None:
        Driver.__init__(self, kind, side, options)
        import pynng

        self.timeout_error = pynng.Timeout
        cls = {"REQ": pynng.Req0, "REP": pynng.Rep0, "PUB": pynng.Pub0, "SUB": pynng.Sub0,
               "PUSH": pynng.Push0, "PULL": pynng.Pull0, "PAIR0": pynng.Pair0,
               "PAIR1": pynng.Pair1}[kind]
        self.s = cls()
        if kind in ("SUB", "PULL", "PAIR0", "PAIR1"):
            try:  # nng 1.1's queues are short: a burst would be dropped
                self.s.recv_buffer_size = 1024
            except Exception:  # noqa: BLE001 - an older binding without the option
                pass
        for t in options.get("topics", []):
            self.subscribe(bytes.fromhex(t), True)

    def _recv_one(self) -> bytes:
        return bytes(self.s.recv_msg().bytes)  # recv() fails on an empty message

    def bind(self, url: str) -> str:
        listener = self.s.listen(url)
        if url.startswith("tcp://"):
            import socket

            return f"tcp://127.0.0.1:{socket.ntohs(listener.local_address.port)}"
        return url

    def connect(self, url: str) -> None:
        self.s.dial(url, block=False)


class NngDriver(SpDriver):
    """python-nng (nng 2.0)."""

    def __init__(self, kind: str, side: str, options: Dict[str, Any]) -> None:
        Driver.__init__(self, kind, side, options)
        import nng

        self.timeout_error = nng.NngTimeout
        if kind == "PAIR0":
            self.s = nng.PairSocket(v0=True)
        else:
            self.s = {"REQ": nng.ReqSocket, "REP": nng.RepSocket, "PUB": nng.PubSocket,
                      "SUB": nng.SubSocket, "PUSH": nng.PushSocket, "PULL": nng.PullSocket,
                      "PAIR1": nng.PairSocket}[kind]()
        self.max_pipes = 0
        for t in options.get("topics", []):
            self.subscribe(bytes.fromhex(t), True)

    def bind(self, url: str) -> str:
        listener = self.s.add_listener(url)
        listener.start()
        if url.startswith(("tcp://", "ws://")):
            scheme, _, rest = url.partition("://")
            path = rest.partition("/")[2]
            return f"{scheme}://127.0.0.1:{listener.port}{'/' + path if path else ''}"
        return url

    def connect(self, url: str) -> None:
        self.s.add_dialer(url).start(block=False)

    def evidence(self) -> Optional[str]:
        n = len(self.s.pipes)
        self.max_pipes = max(self.max_pipes, n)
        if self.max_pipes:
            return "ok" if n else "lost"
        return None


DRIVERS = {"pyzmq": ZmqDriver, "pyomq": OmqDriver, "pynng": PynngDriver, "nng": NngDriver}


def version(driver: str) -> Dict[str, str]:
    """What library (and library version) this process drives."""
    if driver == "pyzmq":
        import zmq

        return {"library": "libzmq " + zmq.zmq_version(), "binding": "pyzmq " + zmq.pyzmq_version()}
    if driver == "pyomq":
        import pyomq

        return {"library": "omq.rs", "binding": "pyomq " + pyomq.pyomq_version()}
    if driver == "pynng":
        import pynng

        return {"library": "nng " + pynng.ffi.string(pynng.lib.nng_version()).decode(),
                "binding": "pynng " + pynng.__version__}
    import nng

    return {"library": "nng " + str(nng.version()), "binding": "python-nng"}


# -- the peer: a socket and what it does ----------------------------------------------------
class Sock:
    def __init__(self, driver: Driver) -> None:
        self.d = driver
        self.seen = []  # type: List[List[bytes]]
        self.lock = threading.Lock()  # one user of the socket at a time
        self.stop = threading.Event()
        self.thread = None  # type: Optional[threading.Thread]

    def request(self, frames: List[bytes], timeout: float) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.lock:
            if not self.d.send(frames, timeout):
                return {}
            left = deadline - time.monotonic()
            got = self.d.recv(left) if left > 0 else None
        return {"frames": hx(got)} if got is not None else {}

    def serve(self) -> None:
        def loop() -> None:
            while not self.stop.is_set():
                with self.lock:
                    got = self.d.recv(0.05)
                    if got is None:
                        continue
                    self.seen.append(got)
                    self.d.send(got[:-1] + [got[-1].translate(INC)], 1.0)

        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()

    def drain(self, quiet: float, timeout: float) -> List[bytes]:
        out = []  # type: List[bytes]
        if self.d.kind in ("PUB", "PUSH"):
            return out
        deadline = time.monotonic() + timeout
        with self.lock:
            while time.monotonic() < deadline:
                got = self.d.recv(quiet)
                if got is None:
                    break
                if self.d.kind != "XPUB":
                    out.append(b"".join(got))
        return out

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(2)
        self.d.close()


def handle(socks: Dict[int, Sock], driver: str, cmd: Dict[str, Any]) -> Dict[str, Any]:
    op = cmd["op"]
    if op == "reset":
        for s in list(socks.values()):
            s.close()
        socks.clear()
        return {}
    n = int(cmd["sock"])
    if op == "open":
        socks[n] = Sock(DRIVERS[driver](cmd["kind"], cmd["side"], cmd.get("options", {})))
        return {}
    s = socks[n]
    if op == "bind":
        return {"url": s.d.bind(cmd["url"])}
    if op == "connect":
        s.d.connect(cmd["url"])
        return {}
    if op == "request":
        return s.request(unhx(cmd["frames"]), float(cmd["timeout"]))
    if op == "serve":
        s.serve()
        return {}
    if op == "seen":
        return {"seen": [hx(f) for f in s.seen]}
    if op == "send":
        with s.lock:
            s.d.send([bytes.fromhex(cmd["data"])], 1.0)
        return {}
    if op == "drain":
        return {"messages": hx(s.drain(float(cmd["quiet"]), float(cmd["timeout"])))}
    if op in ("subscribe", "unsubscribe"):
        s.d.subscribe(bytes.fromhex(cmd["topic"]), op == "subscribe")
        return {}
    if op == "evidence":
        return {"evidence": s.d.evidence()}
    if op == "close":
        socks.pop(n).close()
        return {}
    raise ValueError(f"unknown op {op!r}")


def main(argv: List[str]) -> int:
    driver = argv[1]
    emit = sys.stdout.write
    emit("READY " + json.dumps(version(driver)) + "\n")
    sys.stdout.flush()
    socks = {}  # type: Dict[int, Sock]
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = {}  # type: Dict[str, Any]
        try:
            cmd = json.loads(line)
            out = handle(socks, driver, cmd)
        except Exception as exc:  # noqa: BLE001 - said to the caller, which decides
            out = {"error": f"{type(exc).__name__}: {exc}"}
        if "seq" in cmd:  # the caller's number: it skips an answer it stopped waiting for
            out["seq"] = cmd["seq"]
        emit("RESULT " + json.dumps(out) + "\n")
        sys.stdout.flush()
    handle(socks, driver, {"op": "reset"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
