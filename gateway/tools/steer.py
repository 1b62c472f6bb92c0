"""``gateway ctl``, ``gateway capture`` and ``gateway replay``: the client side of a bridge's
control and capture endpoints (docs: "See what crossed the gateway").

* ``gateway ctl URL pause|resume|stats|terminate``: zmq_proxy_steerable's commands to a control
  endpoint (a REQ for ``zmq+``, a req0 for ``sp+``), the reply printed (``stats``: the eight
  counters by name, or ``--json``);
* ``gateway capture URL FILE.pcapng``: subscribes to a capture endpoint (``records`` format)
  and writes both sides of the bridge as TCP streams (:mod:`gateway.tools.pcap`), until
  ``--count`` records, ``--duration`` seconds or SIGINT;
* ``gateway replay FILE URL``: the requests of a capture (the client streams to one port),
  sent again to URL by the native engine's REQ (either wire), ``--rate`` a second, ``--count``
  of them; the replies counted.
"""

from __future__ import annotations

import argparse
import json
import signal
import struct
import sys
import time
from collections.abc import Iterator
from typing import Any

from gateway.errors import ConfigError

STAT_NAMES = ("front_parts_in", "front_bytes_in", "front_parts_out", "front_bytes_out",
              "back_parts_in", "back_bytes_in", "back_parts_out", "back_bytes_out")
CTL_WORDS = {"pause": b"PAUSE", "resume": b"RESUME", "stats": b"STATISTICS",
             "statistics": b"STATISTICS", "terminate": b"TERMINATE"}


def _endpoint(url: str) -> Any:
    from gateway.url import parse

    ep = parse(url.lstrip("@>"))
    if ep.family not in ("zmtp", "sp"):
        raise ConfigError(f"say zmq+ or sp+: {url}")
    return ep


def control(url: str, word: str, timeout: float = 5.0) -> list[bytes]:
    """One command to a control endpoint; the reply's parts (SP: STATISTICS' 64 bytes split
    into its eight counters' parts)."""
    ep = _endpoint(url)
    command = CTL_WORDS[word]
    if ep.family == "sp":
        import pynng

        with pynng.Req0(dial=ep.lib_url, recv_timeout=int(timeout * 1000),
                        send_timeout=int(timeout * 1000)) as sock:
            sock.send(command)
            data = sock.recv_msg().bytes
        return [data[i:i + 8] for i in range(0, len(data), 8)] or [b""]
    import zmq

    with zmq.Context() as ctx, ctx.socket(zmq.REQ) as sock:
        sock.linger = 0
        sock.rcvtimeo = sock.sndtimeo = int(timeout * 1000)
        sock.connect(ep.lib_url)
        sock.send(command)
        return sock.recv_multipart()


class Ctl:
    help = "send PAUSE, RESUME, STATISTICS or TERMINATE to a bridge's control endpoint"

    def configure(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("url", metavar="URL", help="the control endpoint, e.g. "
                                                  "zmq+tcp://127.0.0.1:7001")
        p.add_argument("command", choices=("pause", "resume", "stats", "terminate"))
        p.add_argument("--json", action="store_true", help="stats as one JSON object")
        p.add_argument("--timeout", type=float, default=5.0, metavar="S")

    def run(self, args: argparse.Namespace) -> int:
        try:
            parts = control(args.url, args.command, args.timeout)
        except Exception as exc:  # noqa: BLE001 - no reply, refused: one line, exit 1
            if isinstance(exc, ConfigError):
                raise
            print(f"gateway ctl: no reply from {args.url}: {exc}", file=sys.stderr)
            return 1
        if args.command != "stats":
            print("ok" if parts == [b""] else repr(parts))
            return 0
        values = [struct.unpack("=Q", p)[0] for p in parts if len(p) == 8]
        if len(values) != 8:
            print(f"gateway ctl: not a STATISTICS reply: {parts!r}", file=sys.stderr)
            return 1
        stats = dict(zip(STAT_NAMES, values, strict=True))
        print(json.dumps(stats) if args.json else
              "\n".join(f"{k:<16} {v}" for k, v in stats.items()))
        return 0


def records(url: str, count: int, duration: float) -> Iterator[Any]:
    """The records a capture endpoint publishes (a ``frames`` capture is refused at its first
    message: it does not say both sides)."""
    from gateway.device.tap import unpack_record

    ep = _endpoint(url)
    stop = [False]
    previous = signal.signal(signal.SIGINT, lambda *_: stop.__setitem__(0, True))
    deadline = time.monotonic() + duration if duration else float("inf")
    got = 0
    import zmq

    if ep.family == "sp":
        raise ConfigError("gateway capture reads a zmq+ capture endpoint (a PUB): SP pub0 has "
                          "no multipart for the records")
    try:
        with zmq.Context() as ctx, ctx.socket(zmq.SUB) as sub:
            sub.linger = 0
            sub.subscribe(b"")
            sub.connect(ep.lib_url)
            while not stop[0] and (not count or got < count) and time.monotonic() < deadline:
                if not sub.poll(100):
                    continue
                record = unpack_record(sub.recv_multipart())
                if record is None:
                    raise ConfigError(f"{url} publishes frames, not records: start the bridge "
                                      "with --capture-format records (capture_format = "
                                      "\"records\")")
                got += 1
                yield record
    finally:
        signal.signal(signal.SIGINT, previous)


class Capture:
    help = "write a bridge's capture endpoint (records) as a pcapng file of both sides' streams"

    def configure(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("url", metavar="URL", help="the capture endpoint, e.g. "
                                                  "zmq+tcp://127.0.0.1:7002")
        p.add_argument("file", metavar="FILE.pcapng")
        p.add_argument("--count", type=int, default=0, metavar="N", help="stop after N messages")
        p.add_argument("--duration", type=float, default=0.0, metavar="S", help="stop after S s")
        p.add_argument("--front-port", type=int, default=15555, metavar="PORT",
                       help="the gateway's port in the front streams (default 15555: no "
                            "dissector of Wireshark's own claims it, the shipped ones do)")
        p.add_argument("--back-port", type=int, default=16000, metavar="PORT",
                       help="the servers' port in the back streams (default 16000)")

    def run(self, args: argparse.Namespace) -> int:
        try:
            from gateway.tools.pcap import StreamWriter
        except ImportError as exc:
            raise ConfigError(f"gateway capture needs scapy: pip install "
                              f"'zmq-sp-gateway[capture]' ({exc})") from None
        with StreamWriter(args.file, args.front_port, args.back_port) as out:
            out.add_all(records(args.url, args.count, args.duration))
        print(f"{args.file}: {out.messages['front']} message(s) each side, "
              f"{len(out.convs)} stream(s), {out.packets} packet(s)", file=sys.stderr)
        return 0


def requests_in(path: str, port: int | None = None) -> list[bytes]:
    """The request bodies of a pcapng: the client-to-server bytes of each TCP stream to
    ``port`` (default: the first stream's server port), parsed as ZMTP or SP by their opening."""
    from scapy.layers.inet import TCP
    from scapy.utils import PcapNgReader

    streams: dict[tuple[Any, ...], bytearray] = {}
    with PcapNgReader(path) as reader:
        for pkt in reader:
            if TCP not in pkt:
                continue
            tcp = pkt[TCP]
            if port is None and tcp.flags == "S":
                port = tcp.dport
            if port is None or tcp.dport != port:
                continue
            key = (pkt.payload.src, tcp.sport)
            streams.setdefault(key, bytearray()).extend(bytes(tcp.payload))
    out: list[bytes] = []
    for data in streams.values():
        out += _zmtp_bodies(data) if data[:1] == b"\xff" else _sp_bodies(data)
    return out


def _zmtp_bodies(data: bytearray) -> list[bytes]:
    from gateway.wire.zmtp.framing import frame_at

    pos, frames, out = 64, [], []
    while (f := frame_at(data, pos)) is not None and f[1] + f[2] <= len(data):
        flags, start, size = f
        pos = start + size
        if flags & 4:  # a command (READY, PING): not a message
            continue
        frames.append(bytes(data[start:pos]))
        if not flags & 1:
            body = frames[frames.index(b"") + 1:] if b"" in frames else frames
            out.append(b"".join(body))
            frames = []
    return out


def _sp_bodies(data: bytearray) -> list[bytes]:
    pos, out = 8, []
    while pos + 8 <= len(data):
        (size,) = struct.unpack_from("!Q", data, pos)
        payload = bytes(data[pos + 8:pos + 8 + size])
        pos += 8 + size
        i = 0
        while i + 4 <= len(payload) and not payload[i] & 0x80:  # the backtrace, then the id
            i += 4
        out.append(payload[i + 4:])
    return out


class Replay:
    help = "send a capture's requests to a server again (native REQ, either wire)"

    def configure(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("file", metavar="FILE.pcapng")
        p.add_argument("url", metavar="URL", help="the server, e.g. sp+tcp://127.0.0.1:6000")
        p.add_argument("--rate", type=float, default=0.0, metavar="R",
                       help="requests a second (default: as fast as replies come)")
        p.add_argument("--count", type=int, default=0, metavar="N", help="only the first N")
        p.add_argument("--port", type=int, default=None, metavar="PORT",
                       help="replay the streams to this port (default: the first stream's)")
        p.add_argument("--timeout", type=float, default=5.0, metavar="S",
                       help="wait for each reply this long")

    def run(self, args: argparse.Namespace) -> int:
        from gateway.blocking import Socket

        bodies = requests_in(args.file, args.port)
        if args.count:
            bodies = bodies[:args.count]
        replies = 0
        with Socket("REQ") as sock:
            sock.connect(args.url.lstrip(">"))
            for i, body in enumerate(bodies):
                t0 = time.monotonic()
                sock.send(body)
                try:
                    sock.recv(timeout=args.timeout)
                    replies += 1
                except TimeoutError:
                    print(f"gateway replay: request {i + 1} unanswered in {args.timeout} s",
                          file=sys.stderr)
                    break
                if args.rate:
                    time.sleep(max(0.0, 1 / args.rate - (time.monotonic() - t0)))
        print(f"replayed {len(bodies)} request(s), {replies} replied")
        return 0 if replies == len(bodies) else 1


CTL, CAPTURE, REPLAY = Ctl(), Capture(), Replay()
