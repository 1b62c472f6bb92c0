"""The interop suites' simple peers: server threads and client sockets of the libraries.

* :class:`ZmqServer` (REP or ROUTER in its own thread: a libzmq socket is created, used and
  closed by that thread only), :class:`NngServer` (cooked rep0), :class:`NngRawServer` (raw
  rep0 that sees the backtrace words; the raw helpers are in
  :mod:`gateway.tools.harness.peers.nng`); :func:`zmq_client`, :func:`nng_req`.

Every loop is bounded, every wait has a timeout; only 127.0.0.1 and ephemeral ports.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pynng
import zmq
from pynng import lib

from gateway.tools.harness.peers.nng import nng_raw_recv, nng_raw_send, open_raw
from gateway.tools.harness.procs import LOCAL, port_of


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
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
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
