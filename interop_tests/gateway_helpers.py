"""Shared helpers of the gateway end-to-end tests: the real ``gateway`` CLI and real peers.

* :class:`Gateway` starts ``python -m gateway ...`` (cwd = the repo, ``PYTHONPATH`` = the repo),
  waits for its ``READY front=<url> back=<url>`` line(s), collects stderr (``--log-format
  json`` gives one JSON object per line), reads ``--metrics`` in Prometheus text, and is always
  killed on exit.
* Peers: :class:`ZmqServer` (REP or ROUTER in its own thread: a libzmq socket is created, used
  and closed by that thread only), :class:`NngServer` (cooked rep0), :class:`NngRawServer`
  (raw rep0 that sees the backtrace words), :func:`nng_raw_send` / :func:`nng_raw_recv` for raw
  req0 clients. Every loop is bounded, every wait has a timeout.
* Endpoint builders: :func:`url` and the backend matrix :data:`BACKENDS`.

Only 127.0.0.1 and ephemeral ports.
"""

from __future__ import annotations

import contextlib
import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pynng
import pytest
import zmq
from pynng import ffi, lib

# re-exported for the suites: one copy of each, in gateway.testing.procs
from gateway.testing.procs import child_env
from gateway.testing.procs import free_port as free_port
from gateway.testing.procs import lib_url as lib_url
from gateway.testing.procs import port_of as port_of

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
LOCAL = "127.0.0.1"
ANY = f"{LOCAL}:0"  # an ephemeral local port: what a gateway binds its front on

#: (front backend, back backend): the library adapter ("lib": pyzmq / pynng) or the engine.
BACKENDS = [("lib", "lib"), ("lib", "native"), ("native", "lib"), ("native", "native")]
BACKEND_IDS = [f"front_{f}-back_{b}" for f, b in BACKENDS]
LIB = {"zmq": "pyzmq", "sp": "pynng"}

backends = pytest.mark.parametrize(("front_be", "back_be"), BACKENDS, ids=BACKEND_IDS)


def url(wire: str, address: str, backend: str = "lib", prefix: str = "") -> str:
    """``url("zmq", "127.0.0.1:0", "native", "@")`` -> ``@zmq+tcp://127.0.0.1:0?backend=native``."""
    chosen = LIB[wire] if backend == "lib" else backend
    return f"{prefix}{wire}+tcp://{address}?backend={chosen}"


env = child_env  # the environment for a child gateway (one copy: gateway.testing.procs)


def run_cli(*args: str, timeout: float = 20, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run ``gateway ARGS`` to completion (for commands that exit by themselves)."""
    return subprocess.run([PY, "-m", "gateway", *args], cwd=REPO, env=env(), text=True,
                          capture_output=True, timeout=timeout, **kw)


# ---------------------------------------------------------------------------------------------
# the gateway process

_READY = re.compile(r"^READY front=(\S+) back=(\S+)(?: name=(\S+))?(?: metrics=(\S+))?"
                    r"(?: workers=(\d+))?$")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class GatewayDied(AssertionError):
    pass


class Gateway:
    """``python -m gateway ARGS`` as a context manager; ``ready`` holds the parsed READY lines.

    ``metrics=True`` adds ``--metrics 127.0.0.1:<free port>`` (``bridge`` only; for ``run`` put
    it in the config or pass ``metrics_port``).
    """

    def __init__(self, *args: str, bridges: int = 1, metrics: bool = False,
                 metrics_port: int | None = None, ready_timeout: float = 15,
                 extra_env: dict[str, str] | None = None,
                 command: list[str] | None = None) -> None:
        self.command = command or [PY, "-m", "gateway"]  # or a script that execs the gateway
        self.args = list(args)
        self.metrics_port = metrics_port
        if metrics:
            self.metrics_port = metrics_port or free_port()
            self.args += ["--metrics", f"{LOCAL}:{self.metrics_port}"]
        self.bridges = bridges
        self.ready_timeout = ready_timeout
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.ready: list[dict[str, str]] = []
        self.stdout: queue.Queue[str | None] = queue.Queue()
        self.stderr_lines: list[str] = []
        self._threads: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Gateway:
        self.proc = subprocess.Popen(
            [*self.command, *self.args], cwd=REPO, env=env(**self.extra_env), text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for stream, sink, eof in ((self.proc.stdout, self.stdout.put, True),
                                  (self.proc.stderr, self.stderr_lines.append, False)):
            t = threading.Thread(target=_pump, args=(stream, sink, eof), daemon=True)
            t.start()
            self._threads.append(t)
        deadline = time.monotonic() + self.ready_timeout
        while len(self.ready) < self.bridges:
            left = deadline - time.monotonic()
            try:
                line = self.stdout.get(timeout=max(left, 0.01))
            except queue.Empty:
                self.kill()
                raise GatewayDied(f"no READY within {self.ready_timeout}s: {self.stderr}") from None
            if line is None:
                self.proc.wait(5)
                raise GatewayDied(f"gateway exited {self.proc.returncode} before READY: "
                                  f"{self.stderr}")
            m = _READY.match(line.strip())
            if m:
                self.ready.append({"front": m[1], "back": m[2], "name": m[3] or ""})
        if self.metrics_port:
            self._wait_metrics()
        return self

    def _wait_metrics(self) -> None:
        deadline = time.monotonic() + 5
        while True:
            try:
                self.metrics_text()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def __enter__(self) -> Gateway:
        try:
            return self.start()
        except BaseException:
            self.kill()
            raise

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def kill(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            p.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5)
        for t in self._threads:
            t.join(2)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        """Send ``sig`` and wait for the exit code (raises ``TimeoutExpired`` past ``timeout``)."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        for t in self._threads:
            t.join(2)
        return rc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- what it printed ---------------------------------------------------------------------
    @property
    def front(self) -> str:
        return self.ready[0]["front"]

    @property
    def back(self) -> str:
        return self.ready[0]["back"]

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines so far (``--log-format json``)."""
        out = []
        for line in list(self.stderr_lines):
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
        return out

    def wait_event(self, event: str, timeout: float = 5.0, **fields: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for ev in self.events():
                if ev.get("event") == event and all(ev.get(k) == v for k, v in fields.items()):
                    return ev
            if time.monotonic() > deadline:
                raise AssertionError(f"no log event {event} {fields} within {timeout}s:\n"
                                     f"{self.stderr}")
            time.sleep(0.05)

    # -- metrics ---------------------------------------------------------------------------
    def metrics_text(self) -> str:
        assert self.metrics_port, "start the gateway with metrics=True"
        with urllib.request.urlopen(f"http://{LOCAL}:{self.metrics_port}/metrics",
                                    timeout=5) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain")
            return str(r.read().decode())

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        return parse_prometheus(self.metrics_text())

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels`` (0 if none)."""
        want = set(labels.items())
        return sum(v for (n, lab), v in self.metrics().items() if n == name and want <= lab)

    def wait_metric(self, name: str, at_least: float, timeout: float = 5.0,
                    **labels: str) -> float:
        deadline = time.monotonic() + timeout
        while True:
            value = self.metric(name, **labels)
            if value >= at_least:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{name}{labels} = {value} < {at_least} after {timeout}s\n"
                                     f"{self.metrics_text()}\n{self.stderr}")
            time.sleep(0.05)


def _pump(stream: Any, sink: Callable[[Any], None], eof: bool) -> None:
    try:
        for line in stream:
            sink(line)
    except ValueError:  # closed
        pass
    finally:
        if eof:
            sink(None)


def parse_prometheus(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not Prometheus text: {line!r}"
        labels = frozenset(_LABEL.findall(m[2] or ""))
        out[(m[1], labels)] = float(m[3])
    return out


# ---------------------------------------------------------------------------------------------
# peers

class _Server:
    """A server thread with a stop flag; ``received`` lists what it got, in order."""

    def __init__(self) -> None:
        self.received: list[Any] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def _start(self, target: Callable[[], None]) -> None:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # surfaced by stop()
                self.error = exc
                self._ready.set()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("server did not start")
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            assert not self._thread.is_alive(), "server thread did not stop"

    def wait_received(self, n: int = 1, timeout: float = 5.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while len(self.received) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"server got {len(self.received)} of {n}: {self.received}")
            time.sleep(0.01)
        return self.received

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ZmqServer(_Server):
    """A libzmq REP or ROUTER server living in one thread (bind, serve, close: same thread).

    ``handler(frames) -> frames | None``: REP gets the body frames (libzmq strips the envelope),
    ROUTER the whole message (identity first) and must return the envelope it wants. ``None``
    means no reply. Default: REP answers ``b"re:" + body``, ROUTER returns the envelope it got
    with ``b"re:" + body``. ``address`` is what to bind (default an ephemeral TCP port).
    """

    def __init__(self, kind: str = "REP", handler: Callable[[list[bytes]], Any] | None = None,
                 address: str | None = None, options: dict[str, Any] | None = None,
                 plain_passwords: dict[str, str] | None = None) -> None:
        super().__init__()
        self.options = options or {}  # socket options by name (curve_server=1 ...)
        #: a PLAIN server needs a ZAP handler in libzmq: pyzmq's, with these users
        self.plain_passwords = plain_passwords
        self.kind = kind
        self.handler = handler or (echo_rep if kind == "REP" else echo_router)
        self.address = address
        self.url = ""
        self._start(self._serve)

    @property
    def port(self) -> int:
        return port_of(self.url)

    def _serve(self) -> None:
        ctx = zmq.Context()
        auth = None
        if self.plain_passwords is not None:
            from zmq.auth.thread import ThreadAuthenticator

            auth = ThreadAuthenticator(ctx)
            auth.start()
            auth.configure_plain(domain="*", passwords=self.plain_passwords)
        s = ctx.socket(zmq.REP if self.kind == "REP" else zmq.ROUTER)
        s.linger = 0
        for name, value in self.options.items():
            s.setsockopt(getattr(zmq, name.upper()), value)
        try:
            if self.address:
                s.bind(self.address)
                self.url = s.getsockopt_string(zmq.LAST_ENDPOINT)
            else:
                port = s.bind_to_random_port(f"tcp://{LOCAL}")
                self.url = f"tcp://{LOCAL}:{port}"
            self._ready.set()
            poller = zmq.Poller()
            poller.register(s, zmq.POLLIN)
            while not self._stop.is_set():
                if not poller.poll(50):
                    continue
                frames = s.recv_multipart()
                self.received.append(frames)
                reply = self.handler(frames)
                if reply is not None:
                    s.send_multipart(reply)
                elif self.kind == "REP":  # a REP must answer before the next recv: reopen it
                    raise RuntimeError("a REP handler returned None")
        finally:
            s.close(0)
            if auth is not None:
                auth.stop()
            ctx.term()


def echo_rep(frames: list[bytes]) -> list[bytes]:
    return [b"re:" + frames[-1]]


def echo_router(frames: list[bytes]) -> list[bytes]:
    return [*frames[:-1], b"re:" + frames[-1]]


class _NngServer(_Server):
    """An nng server thread on ``sock`` (short recv timeout): ``_receive`` one request, record it
    in ``received``, ``_answer`` it; until stopped or the socket closes."""

    sock: pynng.Socket

    def _listen_tcp(self, port: int = 0) -> None:
        listener = self.sock.listen(f"tcp://{LOCAL}:{port}")
        self.port = port_of(str(listener.local_address))
        self.url = f"tcp://{LOCAL}:{self.port}"

    def _receive(self) -> Any:
        raise NotImplementedError

    def _answer(self, request: Any) -> None:
        raise NotImplementedError

    def _serve(self) -> None:
        self._ready.set()
        try:
            while not self._stop.is_set():
                try:
                    request = self._receive()
                except pynng.Timeout:
                    continue
                self.received.append(request)
                self._answer(request)
        except pynng.Closed:
            pass
        except pynng.NNGException as exc:
            if exc.errno != lib.NNG_ECLOSED:
                raise

    def stop(self) -> None:
        super().stop()
        self.sock.close()


class NngServer(_NngServer):
    """A cooked nng rep0 server (pynng, thread-safe): ``handler(body) -> reply | None``.

    ``None`` leaves the request unanswered (nng's rep0 allows that: the next recv discards its
    backtrace). ``port=0`` listens on an ephemeral port.
    """

    def __init__(self, handler: Callable[[bytes], bytes | None] | None = None,
                 port: int = 0, address: str | None = None,
                 tls_config: pynng.TLSConfig | None = None) -> None:
        super().__init__()
        self.handler = handler or (lambda body: b"re:" + body)
        self.sock = pynng.Rep0(recv_timeout=50)
        if tls_config is not None:  # for tls+tcp:// and wss:// addresses
            self.sock.tls_config = tls_config
        if address is None:
            self._listen_tcp(port)
        else:
            self.sock.listen(address)
            self.port, self.url = 0, address
        self._start(self._serve)

    def _receive(self) -> bytes:
        return self.sock.recv()

    def _answer(self, request: bytes) -> None:
        reply = self.handler(request)
        if reply is not None:
            self.sock.send(reply)


def open_raw(kind: str, recv_timeout_ms: int = 5000) -> pynng.Socket:
    """A raw nng socket: ``"REP"`` (xrep) or ``"REQ"`` (xreq)."""
    if kind == "REP":
        s = pynng.Rep0(opener=lib.nng_rep0_open_raw)
    else:
        s = pynng.Req0(opener=lib.nng_req0_open_raw)
    s.recv_timeout = recv_timeout_ms
    return s


def nng_raw_recv(sock: pynng.Socket) -> tuple[list[bytes], bytes]:
    """Receive on a raw nng socket: (backtrace words, body). Raises ``pynng.Timeout``."""
    msg_p = ffi.new("nng_msg **")
    rv = lib.nng_recvmsg(sock.socket, msg_p, 0)
    if rv == lib.NNG_ETIMEDOUT:
        raise pynng.Timeout(ffi.string(lib.nng_strerror(rv)).decode(), rv)
    if rv:
        raise pynng.NNGException(ffi.string(lib.nng_strerror(rv)).decode(), rv)
    m = msg_p[0]
    data = (ffi.buffer(lib.nng_msg_header(m), lib.nng_msg_header_len(m))[:]
            + ffi.buffer(lib.nng_msg_body(m), lib.nng_msg_len(m))[:])
    lib.nng_msg_free(m)
    return split_backtrace(data)


def split_backtrace(data: bytes) -> tuple[list[bytes], bytes]:
    """An SP message's wire bytes -> (backtrace words up to the one with the top bit, body):
    nng and nanomsg split header and body differently, the wire bytes say it once."""
    words = []
    while len(data) >= 4:
        word, data = data[:4], data[4:]
        words.append(word)
        if word[0] & 0x80:
            break
    return words, data


def nng_raw_send(sock: pynng.Socket, words: list[bytes], body: bytes) -> None:
    """Send ``words`` (the backtrace, on the wire as is) + ``body`` on a raw nng socket."""
    msg_p = ffi.new("nng_msg **")
    assert lib.nng_msg_alloc(msg_p, 0) == 0
    m = msg_p[0]
    hdr = b"".join(words)
    assert lib.nng_msg_header_append(m, hdr, len(hdr)) == 0
    assert lib.nng_msg_append(m, body, len(body)) == 0
    rv = lib.nng_sendmsg(sock.socket, m, 0)
    if rv:
        lib.nng_msg_free(m)
        raise pynng.NNGException(ffi.string(lib.nng_strerror(rv)).decode(), rv)


class NngRawServer(_NngServer):
    """A raw nng rep0 server: sees the backtrace (pipe id first); returns it with ``re:`` body.

    ``received`` holds ``(words, body)``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.sock = open_raw("REP", 50)
        self._listen_tcp()
        self._start(self._serve)

    def _receive(self) -> tuple[list[bytes], bytes]:
        return nng_raw_recv(self.sock)

    def _answer(self, request: tuple[list[bytes], bytes]) -> None:
        words, body = request
        nng_raw_send(self.sock, words, b"re:" + body)


@contextlib.contextmanager
def zmq_client(kind: str, connect: str, timeout_ms: int = 5000, **options: Any) -> Iterator[zmq.Socket]:
    """A libzmq client socket for the calling thread; closed (linger 0) on exit."""
    ctx = zmq.Context.instance()
    s = ctx.socket(getattr(zmq, kind))
    s.linger = 0
    s.rcvtimeo = timeout_ms
    s.sndtimeo = timeout_ms
    for name, value in options.items():
        s.setsockopt(getattr(zmq, name.upper()), value)
    s.connect(connect)
    try:
        yield s
    finally:
        s.close(0)


@contextlib.contextmanager
def nng_req(connect: str, timeout_ms: int = 5000) -> Iterator[pynng.Req0]:
    s = pynng.Req0(recv_timeout=timeout_ms, send_timeout=timeout_ms)
    s.dial(connect, block=False)
    try:
        yield s
    finally:
        s.close()


@contextlib.contextmanager
def proc(*args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A helper process (nanocat, nngcat) that is killed on exit whatever happens."""
    p = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.communicate(timeout=5)


def bridge_args(front: str, back: str, *extra: str, log_format: str = "json") -> list[str]:
    return ["bridge", front, back, "--log-format", log_format, *extra]


def local_bridge(front: str, back: str, port: int, *extra: str, front_be: str = "lib",
                 back_be: str = "lib", prefix: str = "", **gateway: Any) -> Gateway:
    """``gateway bridge``: a ``front`` wire (``zmq``/``sp``) bound on an ephemeral local port,
    to a ``back`` wire server at the local ``port``; ``extra`` CLI options, ``gateway`` keywords
    for :class:`Gateway`, ``prefix`` on the front URL (``"@"``: bind)."""
    return Gateway(*bridge_args(url(front, ANY, front_be, prefix),
                                url(back, f"{LOCAL}:{port}", back_be), *extra), **gateway)
