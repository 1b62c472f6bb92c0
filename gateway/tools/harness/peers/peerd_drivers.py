# ruff: noqa: UP006, UP007, UP035, UP045
"""The sockets of the peer process (:mod:`~gateway.tools.harness.peers.peerd`), one driver per
library binding: pyzmq and pyomq (with libzmq's socket monitor read as handshake evidence,
:class:`HandshakeEvents`, which the matrix's own process uses too), pynng and python-nng. Kept
to Python 3.6, like the process; imported relatively by it (run by path).
"""

import importlib
import time
from typing import Any, Dict, List, Optional


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
