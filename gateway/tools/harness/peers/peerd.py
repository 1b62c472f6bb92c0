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

This module holds the process (the command loop, each socket's requests, answers and drains);
the libraries' sockets are :mod:`~gateway.tools.harness.peers.peerd_drivers`. Run by path, this
module first makes its folder a package of its own (``_peerd``, no ``__init__`` run) and imports
the drivers relatively from it, so the process still imports nothing of ``gateway``.
"""

import json
import os
import sys
import threading
import time
import types
from typing import Any, Dict, List, Optional  # noqa: F401 - Optional: in a type comment

# run by path: this folder's zmq.py and nng.py must not stand in for the libraries
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]

if not __package__:  # run by path: the drivers' module as part of package ``_peerd`` (above)
    _package = types.ModuleType("_peerd")
    _package.__path__ = [HERE]
    sys.modules["_peerd"] = _package
    __package__ = "_peerd"

from .peerd_drivers import DRIVERS, Driver  # noqa: E402

INC = bytes((b + 1) & 0xFF for b in range(256))


def hx(frames: List[bytes]) -> List[str]:
    return [bytes(f).hex() for f in frames]


def unhx(frames: List[str]) -> List[bytes]:
    return [bytes.fromhex(f) for f in frames]


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
