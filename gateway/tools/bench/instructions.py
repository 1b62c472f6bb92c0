"""Instructions per request in the gateway, counted by valgrind (callgrind): a measure of the
middle's own work that the machine's noise does not move, for changes too small for the timed
bench to resolve (a few per cent; the timed bench spreads 10-20 % run to run on a 2-core VM).

For each route, one bridge process runs under ``valgrind --tool=callgrind`` twice, forwarding
``small`` and then ``large`` requests (100-byte bodies, 64 in flight unless ``--window`` says
otherwise) between a client and an
echo server that run in this process, outside valgrind; instructions per request are the
difference of the two runs' totals over ``large - small`` (start-up and shutdown cancel out).
Repeated runs agree to about 1 %. Routes: ``zz``, ``zs``, ``sz``, ``ss`` (front family then back
family, ``z`` ZeroMQ, ``s`` SP; native sides). The pure path by default (``--kernel``: the
compiled one). With 64 in flight a read carries many requests, so per-read costs are shared
out; ``--window 1`` (one request per read) shows them whole. ``--size`` sets the body (100
bytes by default; 65536 or 1048576 for the large-message path, with a smaller ``--window``).

    python -m gateway.tools.bench.instructions --routes zz,zs,sz,ss
    python -m gateway.tools.bench.instructions --kernel --window 1 --requests 500,2500
    python -m gateway.tools.bench.instructions --kernel --size 65536 --window 8 --requests 200,1000
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import functools
import importlib.util
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

import pynng
import zmq

from gateway.tools.bench.runner import size_args
from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.procs import port_of

ROUTES = ("zz", "zs", "sz", "ss")
_FAMILY = {"z": "zmq", "s": "sp"}
WINDOW = 64
SIZE = 100  # bytes of a request body (the echo sends it back)


@contextlib.contextmanager
def _echo_server(family: str) -> Iterator[int]:
    """An echo server on an ephemeral port (yielded), in a thread of this process (outside
    valgrind)."""
    url = "tcp://127.0.0.1:0"
    if family == "s":
        rep = pynng.Rep0(recv_timeout=200)
        # (pynng's ``local_address.port`` is in network byte order: its text is not)
        port = int(str(rep.listen(url).local_address).rsplit(":", 1)[1])

        def serve() -> None:
            while not stop.is_set():
                with contextlib.suppress(pynng.Timeout):
                    rep.send(rep.recv())
        close: Callable[[], None] = rep.close
    else:
        ctx = zmq.Context()
        router = ctx.socket(zmq.ROUTER)
        router.rcvtimeo = 200
        router.bind(url)
        port = int(router.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1])

        def serve() -> None:
            while not stop.is_set():
                with contextlib.suppress(zmq.Again):
                    router.send_multipart(router.recv_multipart())

        def close() -> None:
            router.close(linger=0)
            ctx.term()
    stop = threading.Event()
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join(5)
        close()


def _zmq_client(port: int, n: int, deadline: float, window: int, size: int) -> None:
    body = b"x" * size
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.rcvtimeo = int(max(deadline - time.monotonic(), 1) * 1000)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    sent = got = 0
    try:
        while got < n:
            while sent < n and sent - got < window:
                dealer.send_multipart([b"", body])
                sent += 1
            dealer.recv_multipart()
            got += 1
    finally:
        dealer.close(linger=0)
        ctx.term()


def _sp_client(port: int, n: int, deadline: float, window: int, size: int) -> None:
    """A raw SP req0 client on a plain socket: header, then ``window`` requests in flight."""
    body = b"x" * size
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"\x00SP\x00\x00\x30\x00\x00")
        buf = b""
        while len(buf) < 8:
            buf += s.recv(8 - len(buf))
        buf = buf[8:]
        sent = got = 0
        while got < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{got} of {n} replies")
            while sent < n and sent - got < window:
                s.sendall(struct.pack(">QI", 4 + len(body), 0x80000000 | sent) + body)
                sent += 1
            buf += s.recv(1 << 20)
            at = 0
            while len(buf) - at >= 8:
                length = struct.unpack_from(">Q", buf, at)[0]
                if len(buf) - at < 8 + length:
                    break
                at += 8 + length
                got += 1
            buf = buf[at:]


@functools.cache
def _byte_compiled() -> None:
    """Byte-compile the gateway's packages for this Python once, before any counted run: the
    first run would otherwise pay CPython's compile of every module the bridge imports
    (hundreds of millions of instructions: on a fresh checkout under Python 3.12 the run of 100
    requests cost 570 M more than the run of 600). Where the package cannot be written to,
    every run compiles alike and the difference still cancels it."""
    for package in ("gateway", "gateway_plugins"):
        spec = importlib.util.find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(folder, quiet=2)


def drive(route: str, n: int, command: list[str], env: dict[str, str], *, window: int = WINDOW,
          size: int = SIZE, timeout: float = 300.0, name: str = "") -> None:
    """A bridge of ``route`` started by ``command`` (the argv that runs ``gateway``) with
    ``env`` added, forwarding ``n`` requests between a client and an echo server of this
    process, then stopped with SIGTERM (a counting tool writes out what it counted)."""
    if route not in ROUTES:
        raise ValueError(f"route {route!r}: one of {', '.join(ROUTES)}")
    with _echo_server(route[1]) as back:
        gw = Gateway("bridge", *size_args(size),
                     f"@{_FAMILY[route[0]]}+tcp://127.0.0.1:0?backend=native",
                     f">{_FAMILY[route[1]]}+tcp://127.0.0.1:{back}?backend=native",
                     command=command, extra_env=env, ready_timeout=timeout,
                     name=name or f"bridge {route}")
        gw.start()
        try:
            deadline = time.monotonic() + timeout
            (_zmq_client if route[0] == "z" else _sp_client)(port_of(gw.front), n, deadline,
                                                              window, size)
            gw.terminate(timeout=max(deadline - time.monotonic(), 10))
        finally:
            gw.kill()


def path_env(kernel: bool) -> dict[str, str]:
    """The environment of a bridge on the compiled path (``kernel``) or the pure one."""
    return {} if kernel else {"GATEWAY_NO_EXTENSIONS": "1"}


def count(route: str, n: int, *, kernel: bool = False, window: int = WINDOW,
          size: int = SIZE, timeout: float = 300.0) -> int:
    """Instructions the bridge process of ``route`` ran, start to exit, forwarding ``n``."""
    if route not in ROUTES:
        raise ValueError(f"route {route!r}: one of {', '.join(ROUTES)}")
    _byte_compiled()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        drive(route, n, ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                         sys.executable, "-m", "gateway"], path_env(kernel),
              window=window, size=size, timeout=timeout, name=f"bridge {route} under valgrind")
        with open(out) as f:
            for line in f:
                if line.startswith("summary:"):
                    return int(line.split()[1])
    raise RuntimeError(f"{route}: no summary in callgrind's output")


def per_request(route: str, small: int, large: int, *, kernel: bool = False,
                window: int = WINDOW, size: int = SIZE) -> float:
    """Instructions per request: the difference of two runs over the difference of counts."""
    if not 0 < small < large:
        raise ValueError(f"need 0 < small < large, not {small}, {large}")
    return (count(route, large, kernel=kernel, window=window, size=size)
            - count(route, small, kernel=kernel, window=window, size=size)) / (large - small)


def parser(prog: str, doc: str, requests: str, window: int, size: int) -> argparse.ArgumentParser:
    """The options of a counting tool (this one, :mod:`gateway.tools.bench.copies`)."""
    p = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc.split("\n\n")[0])
    p.add_argument("--routes", default=",".join(ROUTES),
                   help="comma-separated routes (zz, zs, sz, ss); default: all four")
    p.add_argument("--requests", default=requests, metavar="SMALL,LARGE",
                   help=f"the two runs' request counts (default: {requests})")
    p.add_argument("--kernel", action="store_true", help="the compiled path (default: pure)")
    p.add_argument("--window", type=int, default=window, metavar="N",
                   help=f"requests in flight (default {window}; 1: one request per read)")
    p.add_argument("--size", type=int, default=size, metavar="BYTES",
                   help=f"request body size (default {size}; the echo sends it back)")
    return p


def checked(args: argparse.Namespace, least_size: int = 0) -> tuple[list[str], int, int,
                                                                      list[str]]:
    """(routes, small, large, every error at once) of a counting tool's options."""
    errors = []
    routes = [r.strip() for r in args.routes.split(",") if r.strip()]
    errors += [f"--routes: unknown route {r!r} (one of {', '.join(ROUTES)})"
               for r in routes if r not in ROUTES]
    small = large = 0
    try:
        small, large = (int(x) for x in args.requests.split(","))
        if not 0 < small < large:
            raise ValueError
    except ValueError:
        errors.append(f"--requests: two counts SMALL,LARGE with 0 < SMALL < LARGE, "
                      f"not {args.requests!r}")
    if not 0 < args.window <= 4096:
        errors.append(f"--window: 1 to 4096 requests in flight, not {args.window}")
    if not least_size <= args.size <= 1 << 30:
        errors.append(f"--size: {least_size or 0} to 1 GiB of body, not {args.size}")
    return routes, small, large, errors


def main(argv: list[str] | None = None) -> int:
    args = parser("gateway.tools.bench.instructions", __doc__, "2000,12000", WINDOW,
                  SIZE).parse_args(argv)
    routes, small, large, errors = checked(args)
    if shutil.which("valgrind") is None:
        errors.append("valgrind is not installed (Debian: apt-get install valgrind)")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2
    path = "compiled" if args.kernel else "pure"
    for route in routes:
        value = per_request(route, small, large, kernel=args.kernel, window=args.window,
                            size=args.size)
        print(f"{route} ({path}, {args.window} in flight, {args.size} B): {value:,.0f} "
              "instructions per request", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
