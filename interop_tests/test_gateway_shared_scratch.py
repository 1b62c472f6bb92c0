"""Many pipes of one thread through one gateway process, whose reads share that thread's
scratch (``gateway.engine.read_buffer``): four bridges (ZeroMQ and SP, TCP and IPC, each way),
libzmq DEALER and nng req0 clients at once, bodies of 1 B to 700 KB (most of 8 KiB or more:
written as views of the read they came in), slow readers (a small receive buffer and a pause
before each receive, so that views wait in the gateway's writes while other pipes read). Each
body carries its SHA-256: the echo servers check every request, the clients every reply, byte
for byte. A view overwritten by another pipe's read would show as a corrupted body."""

from __future__ import annotations

import hashlib
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pynng
import pytest

from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, zmq_client
from gateway.tools.harness.procs import LOCAL, lib_url

pytestmark = pytest.mark.timeout(120)

#: body sizes, cycled (a client starts at its own place): most are written as views
SIZES = [9000, 1, 20_000, 8192, 300_000, 100, 65_536, 12_000, 700_000, 8191, 150_000, 3000]
HEADER = struct.Struct("!II32s")  # client, sequence, SHA-256 of the payload
CLIENTS = 3  # a bridge
MESSAGES = 12  # a client
IN_FLIGHT = 4
TIMEOUT_MS = 30_000


def _body(client: int, seq: int) -> bytes:
    size = SIZES[(client + seq) % len(SIZES)]
    payload = bytes((client * 7 + seq + i) % 251 for i in range(min(size, 251))) * (size // 251 + 1)
    payload = payload[:size]
    return HEADER.pack(client, seq, hashlib.sha256(payload).digest()) + payload


def _whole(body: bytes) -> bool:
    """The body's payload is the one its header's digest names."""
    _, _, digest = HEADER.unpack_from(body)
    return hashlib.sha256(body[HEADER.size:]).digest() == digest


class _Echo:
    """What the echo servers saw: bodies, and those whose digest did not match."""

    def __init__(self) -> None:
        self.seen = 0
        self.corrupt = 0
        self.lock = threading.Lock()

    def check(self, body: bytes) -> bytes:
        with self.lock:
            self.seen += 1
            self.corrupt += not _whole(body)
        return body

    def router(self, frames: list[bytes]) -> list[bytes]:
        self.check(frames[-1])
        return frames  # (the envelope and the body, as they came)


def _zmq_client(url: str, client: int, slow: bool, out: dict[int, Any]) -> None:
    """IN_FLIGHT requests at a time from a DEALER, the replies read slowly (RCVHWM 1, a 4 KiB
    receive buffer, a pause first): each must be one sent, whole."""
    sent: dict[int, bytes] = {}
    good = 0
    with zmq_client("DEALER", url, timeout_ms=TIMEOUT_MS, rcvhwm=1, rcvbuf=4096) as dealer:
        seq = 0
        for _ in range(2 * MESSAGES):  # (bounded: a reply a turn)
            while seq < MESSAGES and len(sent) < IN_FLIGHT:
                sent[seq] = _body(client, seq)
                dealer.send_multipart([b"", sent[seq]])
                seq += 1
            if not sent:
                break
            if slow:
                time.sleep(0.005)
            delimiter, reply = dealer.recv_multipart()
            key = HEADER.unpack_from(reply)[1] if len(reply) >= HEADER.size else -1
            good += delimiter == b"" and sent.pop(key, None) == reply
    out[client] = (good, len(sent))


def _nng_client(url: str, client: int, slow: bool, out: dict[int, Any]) -> None:
    """IN_FLIGHT req0 contexts of one socket, each sending its share one at a time."""
    good = [0] * IN_FLIGHT
    with pynng.Req0(dial=url, recv_timeout=TIMEOUT_MS, send_timeout=TIMEOUT_MS) as req:
        req.recv_max_size = 0

        def ask(k: int) -> None:
            with req.new_context() as ctx:
                for i in range(MESSAGES // IN_FLIGHT):
                    body = _body(client, k * MESSAGES + i)
                    ctx.send(body)
                    if slow:
                        time.sleep(0.005)
                    good[k] += ctx.recv() == body

        threads = [threading.Thread(target=ask, args=(k,)) for k in range(IN_FLIGHT)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT_MS / 1000 + 5)
    out[client] = (sum(good), MESSAGES - sum(good))


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_pipes_of_one_thread_never_corrupt_a_body(tmp_path: Path, loop: str) -> None:
    echo = _Echo()
    with (ZmqServer("ROUTER", handler=echo.router) as z_tcp,
          ZmqServer("ROUTER", handler=echo.router, address=f"ipc://{tmp_path}/zs") as z_ipc,
          NngServer(handler=echo.check) as n_tcp,
          NngServer(handler=echo.check, address=f"ipc://{tmp_path}/ns") as n_ipc):
        n_tcp.sock.recv_max_size = n_ipc.sock.recv_max_size = 0
        bridges = [  # (name, front, back): each wire to the other and to itself, tcp and ipc
            ("zt", f"@zmq+tcp://{LOCAL}:0", f">sp+tcp://{LOCAL}:{n_tcp.port}"),
            ("st", f"@sp+tcp://{LOCAL}:0", f">zmq+tcp://{LOCAL}:{z_tcp.port}"),
            ("zi", f"@zmq+ipc://{tmp_path}/zf", f">zmq+{z_ipc.url}"),
            ("si", f"@sp+ipc://{tmp_path}/sf", f">sp+{n_ipc.url}")]
        cfg = tmp_path / "g.toml"
        cfg.write_text("".join(f'[[bridge]]\nname = "{name}"\nfront = "{front}"\nback = "{back}"\n'
                               for name, front, back in bridges))
        with Gateway("run", str(cfg), bridges=4, extra_env={"GATEWAY_LOOP": loop}) as gw:
            out: dict[int, Any] = {}
            threads = []
            for b, ready in enumerate(gw.readies):
                run = _zmq_client if ready["name"].startswith("z") else _nng_client
                for c in range(CLIENTS):
                    client = b * CLIENTS + c
                    threads.append(threading.Thread(
                        target=run, args=(lib_url(ready["front"]), client, c % 2 == 1, out)))
            for t in threads:
                t.start()
            for t in threads:
                t.join(TIMEOUT_MS / 1000 + 10)
            assert gw.alive()
    total = 4 * CLIENTS * MESSAGES
    assert echo.corrupt == 0 and echo.seen == total, (echo.corrupt, echo.seen)
    assert sorted(out) == list(range(4 * CLIENTS))
    assert all(v == (MESSAGES, 0) for v in out.values()), out
