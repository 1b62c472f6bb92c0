"""The peers that play a cell: one class per implementation, one common shape.

A peer is one socket of one implementation on one side of a cell:

* ``bind(url)`` (server) returns the real library URL (``tcp://127.0.0.1:P``, ``ipc:///p``);
  ``connect(url)`` (client) dials it. URLs here are always spelled as libzmq/nng spell them;
  the native peer adds its wire prefix (``zmq+`` / ``sp+``) itself.
* ``request(payload, deadline, abort)`` (requester role) sends one request and returns a
  ``Reply`` or None (no reply before ``deadline`` or ``abort()`` turned true).
* ``serve(reply_fn)`` (responder role) answers every request in the background and records
  what it saw in ``seen`` (``Seen``: the frames before the body on ZMTP, the raw SP header).
* ``evidence()``: ``"ok"`` once a handshake completed, ``"refused"`` when the peer saw the
  connection close before any handshake completed, ``"lost"`` when a completed pipe closed
  again, None when it cannot tell (CLI peers, or nothing happened yet).
* ``close()`` never raises and never hangs.

Nothing here decides an outcome: ``gateway.matrix.runner`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.matrix import security as sec_material
from gateway.matrix.cells import HEARTBEAT, Sec
from gateway.testing.procs import child_env, free_port, lib_url

SERVER_ID = b"srv"  # routing id announced by DEALER/ROUTER servers, so ROUTER clients can address them
GATEWAY_ID = b"gw"  # the local name a libzmq ROUTER client gives the gateway's front


@dataclass
class Reply:
    body: bytes
    frames: tuple[bytes, ...] = ()  # ZMTP: every frame of the reply (DEALER/ROUTER requesters)
    header: bytes | None = None  # SP raw: the reply's header as nng hands it over


@dataclass
class Seen:
    body: bytes
    frames: tuple[bytes, ...] = ()  # ZMTP: frames before the body (hops, then the delimiter)
    header: bytes | None = None  # SP raw REP: the header (pipe id, ..., request id)


@dataclass
class Peer:
    impl: str
    kind: str
    wire: str  # "zmq" | "sp"
    side: str  # "client" | "server"
    workdir: str = ""
    seen: list[Seen] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def bind(self, url: str) -> str:
        raise NotImplementedError

    def connect(self, url: str) -> None:
        raise NotImplementedError

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        raise NotImplementedError

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        raise NotImplementedError

    def idle(self) -> None:
        """Nothing to do: the socket only exists (its handshake is what the cell observes)."""

    def evidence(self) -> str | None:
        return None

    def close(self) -> None:
        pass

    @property
    def label(self) -> str:
        return f"{self.side} {self.impl} {self.kind}"


def _remaining(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


# -- libzmq (pyzmq) ----------------------------------------------------------------------------
class ZmqPeer(Peer):
    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "",
                 connect_routing_id: bytes | None = None, heartbeat: bool = False,
                 sec: Sec | None = None) -> None:
        super().__init__(impl, kind, wire, side, workdir)
        import zmq

        self._zmq = zmq
        self.ctx = zmq.Context(io_threads=1)
        self.sock = self.ctx.socket(getattr(zmq, kind))
        self.sock.linger = 0
        self._auth: Any = None  # a CURVE or PLAIN server's ZAP authenticator
        if sec is not None and sec.zmtp:
            self._auth = sec_material.configure_libzmq(
                self.sock, self.ctx, sec.zmtp, "server" if side == "server" else "client",
                sec.bad and side == "client")
        if heartbeat:
            self.sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT["ivl_ms"])
            self.sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT["timeout_ms"])
        if kind in ("DEALER", "ROUTER") and side == "server":
            self.sock.setsockopt(zmq.ROUTING_ID, SERVER_ID)
        if kind == "ROUTER":
            self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        if connect_routing_id is not None:
            self.sock.setsockopt(zmq.CONNECT_ROUTING_ID, connect_routing_id)
        self.mon = self.sock.get_monitor_socket()
        self._ev_ok = False
        self._ev_refused = False
        self._ev_lost = False
        self.events: list[str] = []
        self._ev_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def bind(self, url: str) -> str:
        if url.startswith("tcp://") and url.endswith(":0"):
            url = url[:-2] + ":*"
        self.sock.bind(url)
        return str(self.sock.getsockopt_string(self._zmq.LAST_ENDPOINT))

    def connect(self, url: str) -> None:
        self.sock.connect(url)

    def evidence(self) -> str | None:
        from zmq.utils.monitor import recv_monitor_message

        zmq = self._zmq
        with self._ev_lock, contextlib.suppress(Exception):
            while self.mon.poll(0):
                ev = recv_monitor_message(self.mon)["event"]
                name = zmq.Event(ev).name if ev in zmq.Event._value2member_map_ else str(ev)
                self.events.append(name)
                if ev == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    self._ev_ok = True
                elif ev in (zmq.EVENT_DISCONNECTED, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
                            zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                            zmq.EVENT_HANDSHAKE_FAILED_AUTH):
                    if self._ev_ok:
                        self._ev_lost = True
                    else:
                        self._ev_refused = True
        if self._ev_ok:
            return "lost" if self._ev_lost else "ok"
        return "refused" if self._ev_refused else None

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        zmq = self._zmq
        if self.kind == "REQ":
            frames: list[bytes] = [payload]
        elif self.kind == "DEALER":
            frames = [b"", payload]
        elif self.kind == "ROUTER":
            frames = [peer_id, b"", payload]
        else:
            raise RuntimeError(f"{self.kind} cannot send a request")
        while True:  # a REQ/DEALER with no pipe yet, a ROUTER whose peer is not up yet: retry
            try:
                self.sock.send_multipart(frames, flags=zmq.NOBLOCK)
                break
            except zmq.Again:
                pass
            except zmq.ZMQError as exc:
                if exc.errno != zmq.EHOSTUNREACH:
                    raise
            if time.monotonic() >= deadline or abort():
                return None
            time.sleep(0.005)
        while True:
            if self.sock.poll(20):
                got = self.sock.recv_multipart()
                return Reply(body=got[-1], frames=tuple(got))
            if time.monotonic() >= deadline or abort():
                return None

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        zmq = self._zmq
        sock = self.sock

        def loop() -> None:
            try:
                while not self._stop.is_set():
                    if not sock.poll(50):
                        continue
                    got = sock.recv_multipart()
                    body = got[-1]
                    self.seen.append(Seen(body=body, frames=tuple(got[:-1])))
                    reply = got[:-1] + [reply_fn(body)]
                    try:
                        sock.send_multipart(reply, flags=zmq.NOBLOCK)
                    except zmq.ZMQError as exc:
                        self.problems.append(f"{self.label}: reply failed: {exc}")
            except Exception as exc:  # noqa: BLE001 - a dying responder is a finding, not a crash
                if not self._stop.is_set():
                    self.problems.append(f"{self.label}: responder died: {exc!r}")
            finally:
                sock.close(0)

        self._thread = threading.Thread(target=loop, name=f"zmq-{self.side}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        with self._ev_lock:
            with contextlib.suppress(Exception):
                self.sock.disable_monitor()
            with contextlib.suppress(Exception):
                self.mon.close(0)
        if self._thread is None:
            with contextlib.suppress(Exception):
                self.sock.close(0)
        if self._auth is not None:
            with contextlib.suppress(Exception):
                self._auth.stop()
        if self._thread is None or not self._thread.is_alive():
            with contextlib.suppress(Exception):
                self.ctx.term()


# -- nng (pynng), cooked and raw ----------------------------------------------------------------
def nng_header(msg: Any) -> bytes:
    import pynng

    n = pynng.lib.nng_msg_header_len(msg._nng_msg)
    if not n:
        return b""
    return bytes(pynng.ffi.buffer(pynng.lib.nng_msg_header(msg._nng_msg), n))


def nng_message(body: bytes, header: bytes = b"") -> Any:
    import pynng

    msg = pynng.Message(body)
    if header:
        rc = pynng.lib.nng_msg_header_append(msg._nng_msg, pynng.ffi.from_buffer(header), len(header))
        if rc:
            raise RuntimeError(f"nng_msg_header_append failed: {rc}")
    return msg


class NngPeer(Peer):
    """pynng Req0/Rep0; ``impl == "nng-raw"`` opens them raw and handles the SP header by hand."""

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "",
                 sec: Sec | None = None) -> None:
        super().__init__(impl, kind, wire, side, workdir)
        import pynng

        self._pynng = pynng
        self.raw = impl == "nng-raw"
        cls = pynng.Req0 if kind == "REQ" else pynng.Rep0
        kw: dict[str, Any] = {}
        if self.raw:
            kw["opener"] = pynng.lib.nng_req0_open_raw if kind == "REQ" else pynng.lib.nng_rep0_open_raw
        self.sock = cls(**kw)
        if sec is not None and sec.sp in ("tls+tcp", "wss"):
            self.sock.tls_config = sec_material.nng_tls_config(
                "server" if side == "server" else "client", sec.bad and side == "client")
        self._ok = 0
        self._lost = 0
        self.sock.add_post_pipe_connect_cb(self._on_add)
        self.sock.add_post_pipe_remove_cb(self._on_rem)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rid = 0
        self._closed = False
        self._active = threading.Event()
        self._abort: Callable[[], bool] | None = None
        self._watcher: threading.Thread | None = None

    def _on_add(self, _pipe: Any) -> None:
        self._ok += 1

    def _on_rem(self, _pipe: Any) -> None:
        if self._ok:
            self._lost += 1

    def bind(self, url: str) -> str:
        listener = self.sock.listen(url)
        real = str(listener.url)  # the real port after :0 (tcp, ipc, tls+tcp)
        if url.startswith(("ws://", "wss://")):  # nng's ws listener keeps ":0" in its URL
            scheme, _, rest = url.partition("://")
            path = "/" + rest.partition("/")[2]
            port = str(listener.local_address).rsplit(":", 1)[1]
            real = f"{scheme}://127.0.0.1:{port}{path}"
        return real

    def connect(self, url: str) -> None:
        self.sock.dial(url, block=False)

    def evidence(self) -> str | None:
        if self._ok:
            return "lost" if self._lost >= self._ok else "ok"
        return None  # nng rejects a wrong peer before any pipe callback: silence, not proof

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        pynng = self._pynng
        self._abort = abort
        self._active.set()
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, daemon=True, name="nng-watch")
            self._watcher.start()
        try:
            ms = max(1, int(_remaining(deadline) * 1000))
            self.sock.send_timeout = ms
            if self.raw:
                if not self._rid:
                    self._rid = int.from_bytes(os.urandom(4), "big") | 0x80000000
                else:
                    self._rid = ((self._rid + 1) & 0x7FFFFFFF) | 0x80000000
                header = self._rid.to_bytes(4, "big")
                self.sock.send_msg(nng_message(payload, header))
            else:
                self.sock.send(payload)
            while True:
                ms = int(_remaining(deadline) * 1000)
                if ms <= 0:
                    return None
                self.sock.recv_timeout = ms
                if self.raw:
                    msg = self.sock.recv_msg()
                    hdr = nng_header(msg)
                    if hdr != header:  # a raw REQ matches replies itself: drop stale ones
                        self.notes.append(f"raw REQ dropped a reply with header {hdr.hex()}")
                        continue
                    return Reply(body=msg.bytes, header=hdr)
                # recv_msg, not recv: pynng 0.9.0's recv() raises on a zero-length message
                return Reply(body=self.sock.recv_msg().bytes)
        except (pynng.Timeout, pynng.Closed):
            return None
        finally:
            self._active.clear()

    def _watch(self) -> None:
        """nng cancels a request when its recv times out, so a request waits whole; an abort
        (a refused handshake seen elsewhere) closes the socket instead."""
        while not self._stop.is_set():
            if not self._active.wait(0.1):
                continue
            if self._abort is not None and self._abort():
                self._closed = True
                with contextlib.suppress(Exception):
                    self.sock.close()
                return
            time.sleep(0.02)

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        pynng = self._pynng
        sock = self.sock
        sock.recv_timeout = 100

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    if self.raw:
                        msg = sock.recv_msg()
                        hdr = nng_header(msg)
                        body = msg.bytes
                        self.seen.append(Seen(body=body, header=hdr))
                        sock.send_msg(nng_message(reply_fn(body), hdr))
                    else:
                        body = sock.recv_msg().bytes  # recv() raises on empty messages (pynng 0.9.0)
                        self.seen.append(Seen(body=body))
                        sock.send(reply_fn(body))
                except pynng.Timeout:
                    continue
                except pynng.Closed:
                    return
                except Exception as exc:  # noqa: BLE001
                    if not self._stop.is_set():
                        self.problems.append(f"{self.label}: responder error: {exc!r}")
                    return

        self._thread = threading.Thread(target=loop, name=f"nng-{self.side}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        with contextlib.suppress(Exception):
            self.sock.close()


# -- the native engine ----------------------------------------------------------------------------
class NativePeer(Peer):
    """``gateway.Socket`` on its own asyncio loop thread."""

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "",
                 heartbeat: bool = False, sec: Sec | None = None) -> None:
        super().__init__(impl, kind, wire, side, workdir)
        self.heartbeat = heartbeat
        self.options: dict[str, Any] = {}
        if sec is not None:
            self.options = sec_material.native_options(sec_material.settings(
                sec.zmtp, sec.sp, wire, "server" if side == "server" else "client",
                sec.bad and side == "client"))
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=f"native-{side}",
                                        daemon=True)
        self._thread.start()
        self._max_peers = 0
        self._serve_task: Any = None
        identity = SERVER_ID if (kind in ("DEALER", "ROUTER") and side == "server") else b""
        self.sock = self._call(self._make(kind, identity, heartbeat, self.options), 10)

    @staticmethod
    async def _make(kind: str, identity: bytes, heartbeat: bool, options: dict[str, Any]) -> Any:
        import gateway

        if heartbeat:
            return gateway.Socket(kind, identity=identity,
                                  heartbeat_ivl=HEARTBEAT["ivl_ms"] / 1000,
                                  heartbeat_timeout=HEARTBEAT["timeout_ms"] / 1000, **options)
        return gateway.Socket(kind, identity=identity, **options)

    def _call(self, coro: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _await_maybe(self, value: Any) -> Any:
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            return await value
        return value

    def bind(self, url: str) -> str:
        async def go() -> str:
            return await self._await_maybe(self.sock.bind(f"{self.wire}+{url}"))

        return lib_url(self._call(go(), 10))

    def connect(self, url: str) -> None:
        async def go() -> None:
            await self._await_maybe(self.sock.connect(f"{self.wire}+{url}"))

        self._call(go(), 10)

    def evidence(self) -> str | None:
        n = int(getattr(self.sock, "peers", 0) or 0)
        self._max_peers = max(self._max_peers, n)
        if self._max_peers:
            return "ok" if n else "lost"
        return None

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        sock = self.sock
        kind = self.kind

        async def go() -> Reply:
            if kind == "REQ":
                await sock.send(payload)
                return Reply(body=await sock.recv())
            if kind == "DEALER":
                await sock.send_multipart([b"", payload])
            elif kind == "ROUTER":  # drops to an unknown peer: wait until the server is up
                await sock.wait_peers(1, timeout=max(0.01, _remaining(deadline)))
                await sock.send_multipart([peer_id, b"", payload])
            else:
                raise RuntimeError(f"{kind} cannot send a request")
            frames = await sock.recv_multipart()
            return Reply(body=frames[-1], frames=tuple(frames))

        fut = asyncio.run_coroutine_threadsafe(go(), self.loop)
        while True:
            try:
                return fut.result(timeout=0.02)
            except TimeoutError:
                pass
            except Exception as exc:  # noqa: BLE001
                if type(exc).__name__ in ("TimeoutError", "CancelledError"):
                    return None
                self.notes.append(f"{self.label}: request raised {exc!r}")
                return None
            if time.monotonic() >= deadline or abort():
                fut.cancel()
                return None

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        sock = self.sock
        kind = self.kind

        async def loop() -> None:
            try:
                while True:
                    if kind == "REP":
                        body = await sock.recv()
                        self.seen.append(Seen(body=body))
                        await sock.send(reply_fn(body))
                    else:
                        frames = await sock.recv_multipart()
                        self.seen.append(Seen(body=frames[-1], frames=tuple(frames[:-1])))
                        await sock.send_multipart(list(frames[:-1]) + [reply_fn(frames[-1])])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                if not getattr(sock, "closed", False):
                    self.problems.append(f"{self.label}: responder error: {exc!r}")

        async def start() -> Any:
            return asyncio.ensure_future(loop())

        self._serve_task = self._call(start(), 5)

    def close(self) -> None:
        async def shut() -> None:
            if self._serve_task is not None:
                self._serve_task.cancel()
            with contextlib.suppress(Exception):
                self.sock.close(linger=0)
            await asyncio.sleep(0.01)

        with contextlib.suppress(Exception):
            self._call(shut(), 3)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(3)
        if not self._thread.is_alive():
            with contextlib.suppress(Exception):
                self.loop.close()


# -- nanomsg / nng 1.5 command-line tools -----------------------------------------------------------
CLI = {
    "nanomsg": {"exe": "nanocat", "bind": "--bind", "connect": "--connect"},
    "nng-1.5": {"exe": "nngcat", "bind": "--listen", "connect": "--dial"},
}


def parse_hex_line(line: str) -> bytes:
    """``"\\x70\\x6f"`` (``--hex`` output of nanocat/nngcat) -> ``b"po"``."""
    text = line.strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]
    return bytes.fromhex(text.replace("\\x", ""))


def tcp_listening(port: int, pid: int | None = None) -> bool:
    """True when ``port`` is in LISTEN state — and, with ``pid``, listened on by that process
    (another cell may have grabbed the port we picked: then our CLI failed, not succeeded)."""
    want = f":{port:04X}"
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                cols = row.split()
                if len(cols) > 9 and cols[1].endswith(want) and cols[3] == "0A":
                    inodes.add(f"socket:[{cols[9]}]")
    if not inodes or pid is None:
        return bool(inodes)
    fd_dir = f"/proc/{pid}/fd"
    with contextlib.suppress(OSError):
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                if os.readlink(f"{fd_dir}/{fd}") in inodes:
                    return True
    return False


def kill_proc(proc: subprocess.Popen[Any] | None, sig: int = signal.SIGKILL) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        proc.send_signal(sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(2)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(2)


class CliPeer(Peer):
    """``nanocat`` / ``nngcat``: one process per responder, one process per request.

    A responder answers every request with one fixed file (a CLI cannot compute its answer)
    and prints each request with ``--hex``; a requester process connects (or binds), sends one
    request from a file and prints the reply.
    """

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "") -> None:
        super().__init__(impl, kind, wire, side, workdir)
        self.tool = CLI[impl]
        self.proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self.url = ""
        self.mode = ""
        self.reply_file = ""
        self.request_file = ""
        self.stderr_path = os.path.join(workdir, f"{side}-{impl}.err")
        self.stdout_lines: list[bytes] = []
        self.requests_sent = 0

    def configure(self, reply: bytes | None = None, request: bytes | None = None) -> None:
        if reply is not None:
            self.reply_file = os.path.join(self.workdir, f"{self.side}-reply.bin")
            Path(self.reply_file).write_bytes(reply)
        if request is not None:
            self.request_file = os.path.join(self.workdir, f"{self.side}-request.bin")
            Path(self.request_file).write_bytes(request)

    def _argv(self, mode: str, url: str, data_file: str) -> list[str]:
        t = self.tool
        # nanocat 1.1.5 asserts on an empty --file (options.c:502 `data`): say --data "" instead
        data = ["--data", ""] if os.path.getsize(data_file) == 0 else ["--file", data_file]
        return [t["exe"], "--req" if self.kind == "REQ" else "--rep", t[mode], url, "--hex", *data]

    def _spawn(self, mode: str, url: str, data_file: str) -> subprocess.Popen[bytes]:
        with open(self.stderr_path, "ab") as err:
            return subprocess.Popen(self._argv(mode, url, data_file), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=err)

    def _data_file(self) -> str:
        f = self.reply_file if self.kind == "REP" else self.request_file
        if not f:  # an idle REQ (illegal pairing) still needs something to send
            f = os.path.join(self.workdir, f"{self.side}-idle.bin")
            Path(f).write_bytes(b"idle")
        return f

    def _start_long_running(self, mode: str, url: str) -> None:
        self.mode, self.url = mode, url
        self.proc = self._spawn(mode, url, self._data_file())
        if self.kind == "REP":
            self._reader = threading.Thread(target=self._read_requests, daemon=True)
            self._reader.start()

    def _read_requests(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            self.stdout_lines.append(raw)
            with contextlib.suppress(ValueError):
                self.seen.append(Seen(body=parse_hex_line(raw.decode("ascii", "replace"))))

    def bind(self, url: str) -> str:
        """Bind on a concrete port (the CLIs cannot report ``:0``), retrying if it was taken."""
        last = ""
        for _attempt in range(5):
            if url.startswith("tcp://"):
                port = free_port()
                real = f"tcp://127.0.0.1:{port}"
            else:
                port, real = 0, url
            self._start_long_running("bind", real)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    break
                pid = self.proc.pid if self.proc is not None else None
                if (port and tcp_listening(port, pid)) or (not port and os.path.exists(real[6:])):
                    return real
                time.sleep(0.005)
            last = self.stderr_tail()
            kill_proc(self.proc)
            if self._reader is not None:
                self._reader.join(1)
            self.seen.clear()
        raise RuntimeError(f"{self.tool['exe']} could not bind {url}: {last}")

    def connect(self, url: str) -> None:
        self.mode, self.url = "connect", url
        if self.kind == "REP" or not self.request_file:
            self._start_long_running("connect", url)  # responder (or idle) process
        # a requester client spawns one process per request()

    def stderr_tail(self, n: int = 300) -> str:
        with contextlib.suppress(OSError):
            return Path(self.stderr_path).read_bytes()[-n:].decode("utf-8", "replace").strip()
        return ""

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        pass  # the responder process answers from its file since bind()/connect()

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        if self.mode == "bind":  # a binding requester was spawned by bind(): wait for its output
            proc = self.proc
        else:
            Path(self.request_file).write_bytes(payload)
            proc = self._spawn("connect", self.url, self.request_file)
        self.requests_sent += 1
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        try:
            while b"\n" not in buf:
                if time.monotonic() >= deadline or abort():
                    return None
                r, _, _ = select.select([fd], [], [], 0.02)
                if r:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        return None
                    buf += chunk
            line = buf.split(b"\n", 1)[0]
            return Reply(body=parse_hex_line(line.decode("ascii", "replace")))
        finally:
            if proc is not self.proc:
                kill_proc(proc)
                with contextlib.suppress(Exception):
                    proc.stdout.close()

    def close(self) -> None:
        kill_proc(self.proc)
        if self._reader is not None:
            self._reader.join(1)
        if self.proc is not None and self.proc.stdout is not None:
            with contextlib.suppress(Exception):
                self.proc.stdout.close()


# -- JeroMQ 0.3 (ZMTP 2.0), a Java process driven over stdin ------------------------------------------
class JeromqPeer(Peer):
    """Debian's JeroMQ 0.3.6 (``gateway.matrix.jeromq``): one Java process per socket, driven
    line by line (``SEND`` a request and print the reply, or ``SERVE``). It greets with ZMTP
    2.0, so it talks to peers that negotiate versions (libzmq 4, the native engine); it cannot
    tell a completed handshake from a refused one (``evidence()`` is None)."""

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "") -> None:
        super().__init__(impl, kind, wire, side, workdir)
        self.proc: Any = None
        self.stderr_path = os.path.join(workdir, f"{side}-jeromq.err") if workdir else None

    def _start(self, action: str, url: str) -> str:
        from gateway.matrix.jeromq import JeromqProc

        identity = SERVER_ID if (self.kind in ("DEALER", "ROUTER") and self.side == "server") else None
        self.proc = JeromqProc(self.kind, action, url, count=-1, timeout_ms=10_000,
                               identity=identity, stderr_path=self.stderr_path).start()
        return str(self.proc.endpoint)

    def bind(self, url: str) -> str:
        if not url.startswith("tcp://"):
            raise RuntimeError(f"the JeroMQ peer binds tcp only, not {url}")
        return self._start("bind", url)

    def connect(self, url: str) -> None:
        self._start("connect", url)

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        if self.kind == "REQ":
            frames = [payload]
        elif self.kind == "DEALER":
            frames = [b"", payload]
        elif self.kind == "ROUTER":
            frames = [peer_id, b"", payload]
        else:
            raise RuntimeError(f"{self.kind} cannot send a request")
        self.proc.command("SEND " + ",".join(f.hex() for f in frames))
        while not abort():
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            line = self.proc.next_line(min(left, 0.2))
            if line is None:
                if self.proc.proc.poll() is not None:
                    return None
                continue
            if line.startswith("RECV "):
                got = tuple(bytes.fromhex(f) for f in line[5:].split(","))
                return Reply(body=got[-1], frames=got)
            if line == "TIMEOUT":  # the Java side's receive timeout (longer than any cell's)
                return None
        return None

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        """The Java side answers by itself, with the matrix's rule (every body byte + 1);
        ``seen`` fills from its RECV lines."""
        self.proc.command("SERVE")

        def read() -> None:
            while self.proc is not None and self.proc.proc.poll() is None:
                line = self.proc.next_line(0.2, "RECV ")
                if line is not None:
                    got = tuple(bytes.fromhex(f) for f in line[5:].split(","))
                    self.seen.append(Seen(body=got[-1], frames=got[:-1]))

        threading.Thread(target=read, name="jeromq-seen", daemon=True).start()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.close()


# -- the gateway process -----------------------------------------------------------------------------
class GatewayProc:
    """``python -m gateway bridge FRONT BACK``: waits for its ``READY front=... back=...`` line."""

    def __init__(self, front: str, back: str, workdir: str) -> None:
        self.front, self.back = front, back
        self.stderr_path = os.path.join(workdir, "gateway.err")
        self.proc: subprocess.Popen[bytes] | None = None
        self.front_url = ""
        self.back_url = ""

    @property
    def argv(self) -> list[str]:
        return [sys.executable, "-m", "gateway", "bridge", self.front, self.back,
                "--log-format", "json"]

    def start(self, timeout: float = 20.0) -> str:
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=err, env=child_env())
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        buf = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                buf += chunk
                for line in buf.decode("utf-8", "replace").splitlines():
                    if line.startswith("READY "):
                        fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
                        self.front_url = fields.get("front", "")
                        self.back_url = fields.get("back", "")
                        return lib_url(self.front_url)
            elif self.proc.poll() is not None:
                break
        rc = self.proc.poll()
        raise RuntimeError(f"gateway did not report READY (rc={rc}): {self.stderr_tail()}")

    def stderr_tail(self, n: int = 600) -> str:
        with contextlib.suppress(OSError):
            return Path(self.stderr_path).read_bytes()[-n:].decode("utf-8", "replace").strip()
        return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> int | None:
        """SIGTERM (the bridge drains and exits 0), then SIGKILL after 5 s."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                kill_proc(self.proc)
        if self.proc.stdout is not None:
            with contextlib.suppress(Exception):
                self.proc.stdout.close()
        return self.proc.returncode


def make_peer(impl: str, kind: str, wire: str, side: str, workdir: str,
              connect_routing_id: bytes | None = None, heartbeat: bool = False,
              sec: Sec | None = None) -> Peer:
    """``heartbeat``: a ZMTP peer sends heartbeats (``cells.HEARTBEAT``); ``sec``: the keys or
    certificates of a security cell's shape (``cells.SECURITY``), as this side's role needs."""
    if impl == "libzmq":
        return ZmqPeer(impl, kind, wire, side, workdir, connect_routing_id=connect_routing_id,
                       heartbeat=heartbeat, sec=sec)
    if impl in ("nng", "nng-raw"):
        return NngPeer(impl, kind, wire, side, workdir, sec=sec)
    if impl == "native":
        return NativePeer(impl, kind, wire, side, workdir, heartbeat=heartbeat and wire == "zmq",
                          sec=sec)
    if impl in CLI:
        return CliPeer(impl, kind, wire, side, workdir)
    if impl == "jeromq-0.3":
        return JeromqPeer(impl, kind, wire, side, workdir)
    raise ValueError(f"unknown impl {impl!r}")


# -- wire probe: what a listening peer puts on the wire at connection time ---------------------------
ZMTP_GREETING = (b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\x00")
                 + b"\x00" + b"\x00" * 31)


def _open_stream(url: str, timeout: float) -> socket.socket:
    scheme, _, rest = lib_url(url).partition("://")
    if scheme == "tcp":
        host, _, port = rest.rpartition(":")
        s = socket.create_connection((host, int(port)), timeout=timeout)
    elif scheme == "ipc":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(rest)
    else:
        raise ValueError(f"cannot probe {url}")
    s.settimeout(timeout)
    return s


def _read_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def wire_probe(url: str, wire: str, timeout: float = 1.0, sp_first: bool = False) -> dict[str, Any]:
    """Connect to a listening peer with a raw socket and decode what *it* sends first.

    ZMTP: we send a NULL-mechanism 3.1 greeting (its first 11 bytes, then the rest once the
    peer's major version says 3.x), read the peer's 64-byte greeting and its READY command
    (parsed here, independently of ``gateway.wire``), or a ZMTP 2.0 peer's socket-type byte
    (``zmtp2_type``); SP: read the 8-byte header the
    peer sends at once (``sp_first``: after ours, a req0 header, for a one-port listener that
    waits for the client's first byte). Nothing is ever sent past the handshake, and the
    connection is closed.
    """
    with _open_stream(url, timeout) as s:
        if wire == "sp":
            if sp_first:
                s.sendall(b"\x00SP\x00\x00\x30\x00\x00")
            hdr = _read_exact(s, 8)
            return {"raw": hdr.hex(), "ok_magic": hdr[:4] == b"\x00SP\x00" and hdr[6:] == b"\x00\x00",
                    "protocol": int.from_bytes(hdr[4:6], "big")}
        s.sendall(ZMTP_GREETING[:11])  # signature + major first (RFC 37 version negotiation)
        g = _read_exact(s, 11)
        if g[0] == 0xFF and g[9] & 0x01 and g[10] < 3:  # a ZMTP 2.0 peer (RFC 15): no more
            t = _read_exact(s, 1)[0]
            return {"raw": (g + bytes((t,))).hex(), "ok_magic": True, "version": (2, 0),
                    "zmtp2_type": t}
        s.sendall(ZMTP_GREETING[11:])
        g += _read_exact(s, 53)
        out: dict[str, Any] = {
            "raw": g[:12].hex(),
            "ok_magic": g[0] == 0xFF and g[9] == 0x7F,
            "version": (g[10], g[11]),
            "mechanism": g[12:32].rstrip(b"\x00").decode("ascii", "replace"),
        }
        flags = _read_exact(s, 1)[0]
        size = int.from_bytes(_read_exact(s, 8 if flags & 0x02 else 1), "big")
        body = _read_exact(s, size)
        out["command_flags"] = flags
        name_len = body[0] if body else 0
        out["command"] = body[1:1 + name_len].decode("ascii", "replace")
        props: dict[str, bytes] = {}
        i = 1 + name_len
        while i < len(body):
            n = body[i]
            name = body[i + 1:i + 1 + n].decode("ascii", "replace").lower()
            i += 1 + n
            vlen = int.from_bytes(body[i:i + 4], "big")
            props[name] = body[i + 4:i + 4 + vlen]
            i += 4 + vlen
        out["properties"] = props
        return out


# -- pub/sub, pipeline, pair peers (pattern cells; gateway.matrix.cells) ------------------------
class PatternPeer:
    """One socket of a pattern cell: ``send`` one message, ``drain`` what arrived.

    ``topics``: what a subscribing socket holds (set before it connects or binds)."""

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "",
                 topics: tuple[bytes, ...] = (), data: bytes = b"") -> None:
        self.impl, self.kind, self.wire, self.side = impl, kind, wire, side
        self.workdir, self.topics, self.data = workdir, topics, data

    def bind(self, url: str) -> str:
        raise NotImplementedError

    def connect(self, url: str) -> None:
        raise NotImplementedError

    def send(self, msg: bytes) -> None:
        raise NotImplementedError

    def drain(self, quiet: float, deadline: float) -> list[bytes]:
        """Everything received until ``quiet`` seconds pass without a message (or ``deadline``)."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    @property
    def label(self) -> str:
        return f"{self.side} {self.impl} {self.kind}"


class ZmqPatternPeer(PatternPeer):
    _TYPES = {"PUB": "PUB", "SUB": "SUB", "XPUB": "XPUB", "XSUB": "XSUB", "PUSH": "PUSH",
              "PULL": "PULL", "PAIR": "PAIR"}

    def __init__(self, *args: Any, **kw: Any) -> None:
        import zmq

        super().__init__(*args, **kw)
        self.zmq = zmq
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(getattr(zmq, self._TYPES[self.kind]))
        self.sock.linger = 0
        self.sock.sndtimeo = 1000
        for t in self.topics:
            if self.kind == "SUB":
                self.sock.subscribe(t)
            elif self.kind == "XSUB":
                self.sock.send(b"\x01" + t)

    def bind(self, url: str) -> str:
        if url.endswith(":0"):
            url = url[:-2] + ":*"
        self.sock.bind(url)
        last = self.sock.getsockopt(self.zmq.LAST_ENDPOINT)
        return last.decode() if isinstance(last, bytes) else str(last)

    def connect(self, url: str) -> None:
        self.sock.connect(url)

    def send(self, msg: bytes) -> None:
        with contextlib.suppress(self.zmq.Again):  # a PUSH/PAIR with no peer: nothing crosses
            self.sock.send(msg)

    def drain(self, quiet: float, deadline: float) -> list[bytes]:
        out: list[bytes] = []
        if self.kind in ("PUB", "PUSH"):
            return out
        while time.monotonic() < deadline and self.sock.poll(int(quiet * 1000)):
            frames = self.sock.recv_multipart()
            if self.kind == "XPUB":
                continue  # subscriptions
            out.append(b"".join(frames))
        return out

    def close(self) -> None:
        self.sock.close(0)
        self.ctx.term()


class NngPatternPeer(PatternPeer):
    def __init__(self, *args: Any, **kw: Any) -> None:
        import pynng

        super().__init__(*args, **kw)
        self.pynng = pynng
        cls = {"PUB": pynng.Pub0, "SUB": pynng.Sub0, "PUSH": pynng.Push0, "PULL": pynng.Pull0,
               "PAIR0": pynng.Pair0, "PAIR1": pynng.Pair1}[self.kind]
        extra: dict[str, Any] = {"polyamorous": False} if self.kind == "PAIR1" else {}
        self.sock = cls(recv_buffer_size=1024, **extra) if self.kind not in ("PUB", "PUSH") \
            else cls(**extra)
        self.sock.send_timeout = 1000
        if self.kind == "SUB":
            for t in self.topics:
                self.sock.subscribe(t)

    def bind(self, url: str) -> str:
        listener = self.sock.listen(url)
        if url.startswith("tcp://"):
            port = socket.ntohs(listener.local_address.port)
            return f"tcp://127.0.0.1:{port}"
        return url

    def connect(self, url: str) -> None:
        self.sock.dial(url, block=False)

    def send(self, msg: bytes) -> None:
        with contextlib.suppress(self.pynng.Timeout):
            self.sock.send(msg)

    def drain(self, quiet: float, deadline: float) -> list[bytes]:
        out: list[bytes] = []
        if self.kind in ("PUB", "PUSH"):
            return out
        self.sock.recv_timeout = int(quiet * 1000)
        while time.monotonic() < deadline:
            try:  # recv_msg: pynng's recv() fails on an empty message (a NULL buffer)
                out.append(self.sock.recv_msg().bytes)
            except self.pynng.Timeout:
                break
        return out

    def close(self) -> None:
        self.sock.close()


_CLI_FLAG = {("nanomsg", "PUB"): "--pub", ("nanomsg", "SUB"): "--sub",
             ("nanomsg", "PUSH"): "--push", ("nanomsg", "PULL"): "--pull",
             ("nanomsg", "PAIR0"): "--pair", ("nng-1.5", "PUB"): "--pub0",
             ("nng-1.5", "SUB"): "--sub0", ("nng-1.5", "PUSH"): "--push0",
             ("nng-1.5", "PULL"): "--pull0", ("nng-1.5", "PAIR0"): "--pair0",
             ("nng-1.5", "PAIR1"): "--pair1"}


class CliPatternPeer(PatternPeer):
    """nanocat / nngcat as a pattern peer: one long-running process. A sender repeats its one
    ``data`` every 0.1 s (a CLI cannot send a sequence); a receiver prints what arrives
    (``--hex``), a subscriber with ``--subscribe`` per topic (none: everything)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.tool = CLI[self.impl]
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: list[bytes] = []
        self._taken = 0
        self._reader: threading.Thread | None = None
        self.stderr_path = os.path.join(self.workdir, f"{self.side}-{self.impl}.err")

    #: seconds between a sender's repeats (nngcat takes whole seconds only)
    @property
    def interval(self) -> str:
        return "1" if self.impl == "nng-1.5" else "0.1"

    def _argv(self, mode: str, url: str) -> list[str]:
        # line-buffered: nngcat's stdio buffers a pipe until it exits
        argv = ["stdbuf", "-oL", self.tool["exe"], _CLI_FLAG[(self.impl, self.kind)],
                self.tool[mode], url]
        if self.kind not in ("PUB", "PUSH"):  # the CLIs refuse an output format on these
            argv.append("--hex")
        for t in self.topics:
            if t:
                argv += ["--subscribe", t.decode()]
        if self.kind in ("PUB", "PUSH", "PAIR0", "PAIR1") and self.data:
            argv += ["--data", self.data.decode(), "--interval", self.interval]
        return argv

    def _start(self, mode: str, url: str) -> None:
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(self._argv(mode, url), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=err)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            with contextlib.suppress(ValueError):
                self.lines.append(parse_hex_line(raw.decode("ascii", "replace")))

    def bind(self, url: str) -> str:
        port = free_port()
        real = f"tcp://127.0.0.1:{port}" if url.startswith("tcp://") else url
        self._start("bind", real)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pid = self.proc.pid if self.proc is not None else None
            if not url.startswith("tcp://") or tcp_listening(port, pid):
                return real
            time.sleep(0.01)
        raise RuntimeError(f"{self.tool['exe']} could not bind {real}")

    def connect(self, url: str) -> None:
        self._start("connect", url)

    def send(self, msg: bytes) -> None:
        pass  # the process repeats its data by itself

    def drain(self, quiet: float, deadline: float) -> list[bytes]:
        last_n, last_t = -1, time.monotonic()
        while time.monotonic() < deadline:
            n = len(self.lines)
            if n != last_n:
                last_n, last_t = n, time.monotonic()
            elif time.monotonic() - last_t >= quiet:
                break
            time.sleep(0.02)
        out = self.lines[self._taken:]
        self._taken += len(out)
        return out

    def close(self) -> None:
        kill_proc(self.proc)
        if self._reader is not None:
            self._reader.join(1)


def make_pattern_peer(impl: str, kind: str, wire: str, side: str, workdir: str,
                      topics: tuple[bytes, ...] = (), data: bytes = b"") -> PatternPeer:
    cls: type[PatternPeer] = {"libzmq": ZmqPatternPeer, "nng": NngPatternPeer}.get(
        impl, CliPatternPeer)
    return cls(impl, kind, wire, side, workdir, topics=topics, data=data)
