"""The bench peer's servers and proxies (:mod:`gateway.tools.bench.peer` roles ``zmq-rep``,
``nng-rep``, ``zmq-echo``, ``sp-echo``, ``native-rep``, ``nng-blackhole``, ``zmq-proxy``,
``nng-device``, ``stalled-sub``): bind (or connect), say READY, serve until killed.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from .peer_base import _material, _tls_config, bound_url, emit, nng_port, zmq_port


def serve_echo(cfg: dict[str, Any], s: Any, dial: Callable[[str], Any],
               listen: Callable[[], int]) -> None:
    """The echo servers' common part: ``dial(cfg["connect"])`` when given, else ``listen()`` on
    a free local port (it returns the port); say READY with the url; echo until killed."""
    if cfg.get("connect"):
        dial(cfg["connect"])
        emit("READY", {"url": cfg["connect"]})
    else:
        emit("READY", {"url": bound_url(listen())})
    recv, send = s.recv, s.send
    while True:
        send(recv())


def serve_zmq_rep(cfg: dict[str, Any]) -> None:
    import zmq

    ctx: Any = zmq.Context.instance()
    s = ctx.socket(zmq.REP)
    s.linger = 0

    def listen() -> int:
        s.bind("tcp://127.0.0.1:*")
        return zmq_port(s)

    serve_echo(cfg, s, s.connect, listen)


def serve_nng_rep(cfg: dict[str, Any]) -> None:
    import pynng

    s = pynng.Rep0()

    def listen() -> int:
        s.listen("tcp://127.0.0.1:0")
        return nng_port(s)

    serve_echo(cfg, s, lambda url: s.dial(url, block=False), listen)


def serve_nng_blackhole(cfg: dict[str, Any]) -> None:
    """An nng server that reads requests and never answers (raw Rep0: keeps no state)."""
    import pynng

    s = pynng.Rep0(opener=pynng.lib.nng_rep0_open_raw)
    s.listen("tcp://127.0.0.1:0")
    emit("READY", {"url": bound_url(nng_port(s))})
    n = 0
    while True:
        s.recv()
        n += 1


def serve_native_rep(cfg: dict[str, Any]) -> None:

    import gateway

    async def main() -> None:
        async with gateway.Socket("REP") as s:
            url = s.bind(f"{cfg['wire']}+tcp://127.0.0.1:0")
            emit("READY", {"url": url})
            recv, send = s.recv, s.send
            while True:
                await send(await recv())

    from gateway.engine.loop import run

    run(main())


#: every echo server's queue bound (messages per peer): above any window the bench uses
ECHO_HWM = 100_000
#: nng's largest message the bench's nng middle takes (its default, 1 MiB, refuses a 1 MiB body)
NNG_MAX_MESSAGE = 64 << 20


def serve_zmq_echo(cfg: dict[str, Any]) -> None:
    """A libzmq echo that runs in C: ``zmq_proxy(ROUTER, ROUTER)`` with one socket on both sides
    sends every request (routing id, empty delimiter, body) back to the peer it came from, which
    is a REP's reply. No Python per message, so it out-runs a REP and the gateway."""
    import zmq

    ctx: Any = zmq.Context.instance()
    s = ctx.socket(zmq.ROUTER)
    s.linger = 0
    s.sndhwm = s.rcvhwm = ECHO_HWM
    s.bind("tcp://127.0.0.1:*")
    emit("READY", {"url": bound_url(zmq_port(s))})
    zmq.proxy(s, s)


SP_REP0_HEADER = b"\x00SP\x00\x00\x31\x00\x00"  # sp-tcp-mapping: magic, protocol rep0 (49), 0
SP_REQ0 = 0x30  # the only peer a rep0 accepts: req0 (48)


def serve_sp_echo(cfg: dict[str, Any]) -> None:
    """An SP rep0 echo that works on the byte stream: after the 8-byte SP header exchange, every
    byte a peer sends goes straight back to it. A REP's reply is the request's header words (the
    backtrace) followed by the body, i.e. the request frame itself, so echoing the stream answers
    every request correctly and in order, in as many frames per write as the kernel delivered.
    Replaces the pynng Rep0 (capped near 25k req/s by Python per message) as the bench's SP
    server."""
    import asyncio

    class Echo(asyncio.Protocol):
        def __init__(self) -> None:
            self.head = b""
            self.transport: Any = None

        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            transport.write(SP_REP0_HEADER)

        def data_received(self, data: bytes) -> None:
            if len(self.head) < 8:
                need = 8 - len(self.head)
                self.head += data[:need]
                data = data[need:]
                if len(self.head) == 8 and (self.head[:4] != b"\x00SP\x00"
                                            or int.from_bytes(self.head[4:6]) != SP_REQ0):
                    sys.stderr.write(f"sp-echo: refused header {self.head!r}\n")
                    self.transport.close()
                    return
            if data:
                self.transport.write(data)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Echo, "127.0.0.1", 0, backlog=4096)
        port = server.sockets[0].getsockname()[1]
        emit("READY", {"url": bound_url(port)})
        await asyncio.Event().wait()

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


def serve_zmq_proxy(cfg: dict[str, Any]) -> None:
    """zmq.proxy(ROUTER, DEALER): clients connect to the ROUTER, the DEALER dials the server."""
    import zmq

    ctx: Any = zmq.Context.instance()
    front = ctx.socket(zmq.ROUTER)
    back = ctx.socket(zmq.DEALER)
    front.linger = back.linger = 0
    for s in (front, back):  # a ROUTER drops replies past its HWM: above any bench window
        s.sndhwm = s.rcvhwm = ECHO_HWM
    if cfg.get("security") == "curve":  # libzmq's own CURVE server on the front (no ZAP)
        import zmq.auth

        front.curve_publickey, front.curve_secretkey = zmq.auth.load_certificate(
            str(_material(cfg).curve_secret("server")))
        front.curve_server = True
    front.bind("tcp://127.0.0.1:*")
    back.connect(cfg["server"])
    emit("READY", {"url": bound_url(zmq_port(front))})
    zmq.proxy(front, back)


def serve_nng_device(cfg: dict[str, Any]) -> None:
    """nng_device(raw Rep0, raw Req0) in a thread: clients connect to the raw Rep0."""
    import pynng

    front = pynng.Rep0(opener=pynng.lib.nng_rep0_open_raw)
    back = pynng.Req0(opener=pynng.lib.nng_req0_open_raw)
    # nng's largest queues; even so nng_device's raw rep0 drops replies to a client whose pipe
    # queue is full (measured: about 1 in 6 at 1,024 in flight against the echo), which the
    # bench reports as an error of that window
    for s in (front, back):
        s.send_buffer_size = s.recv_buffer_size = 8192
        s.recv_max_size = NNG_MAX_MESSAGE
    if cfg.get("security") == "tls":
        front.tls_config = _tls_config(cfg, "server")
        front.listen("tls+tcp://127.0.0.1:0")
    else:
        front.listen("tcp://127.0.0.1:0")
    back.dial(cfg["server"], block=False)
    run_nng_device(front, back)


def run_nng_device(front: Any, back: Any) -> None:
    """``nng_device(front, back)`` in a thread (it blocks in C with the GIL released until a
    socket closes); READY with the front's URL; exit 1 when the device returns."""
    import pynng

    result: list[int] = []

    def device() -> None:
        result.append(pynng.lib.nng_device(front.socket, back.socket))

    t = threading.Thread(target=device, daemon=True)
    t.start()
    emit("READY", {"url": bound_url(nng_port(front))})
    t.join()
    sys.stderr.write(f"nng_device returned {result}\n")
    sys.exit(1)


def serve_stalled_sub(cfg: dict[str, Any]) -> None:
    """A capture reader that never reads (``gateway.tools.bench.capture``): a libzmq SUB that
    connects to ``cfg["url"]``, subscribes to everything, says READY and never calls recv, so
    only libzmq's own queue (its RCVHWM) and the kernel's buffers take copies."""
    import zmq

    ctx: Any = zmq.Context.instance()
    s = ctx.socket(zmq.SUB)
    s.linger = 0
    s.subscribe(b"")
    s.connect(cfg["url"])
    emit("READY", {"url": cfg["url"]})
    threading.Event().wait()  # the watchdog ends the process (stdin closed, or its lifetime)
