#!/usr/bin/env python3
"""A ZeroMQ client for the gateway: REQ by default, DEALER with ``--envelope``.

    python examples/zmq_req_client.py --connect tcp://127.0.0.1:5555 --count 3
    python examples/zmq_req_client.py --envelope app1 --envelope app2 --count 5   # DEALER

A DEALER sends ``[envelope..., b"", body]`` and gets its envelope back with each reply (the
gateway keeps it while the request crosses to SP). Exit code 1 when a reply does not come
within ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import sys

import zmq


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connect", default="tcp://127.0.0.1:5555", help="the gateway's front")
    p.add_argument("--count", type=int, default=1, help="requests to send (default 1)")
    p.add_argument("--data", default="hello", help="request body; a counter is appended")
    p.add_argument("--envelope", action="append", default=[], metavar="FRAME",
                   help="use a DEALER and send this app envelope frame (repeatable)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait per reply")
    args = p.parse_args(argv)

    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER if args.envelope else zmq.REQ)
    sock.linger = 0
    sock.rcvtimeo = int(args.timeout * 1000)
    sock.connect(args.connect)
    envelope = [f.encode() for f in args.envelope]
    try:
        for i in range(args.count):
            body = f"{args.data} {i}".encode()
            if envelope:
                sock.send_multipart([*envelope, b"", body])
            else:
                sock.send(body)
            try:
                frames = sock.recv_multipart()
            except zmq.Again:
                print(f"no reply within {args.timeout}s", file=sys.stderr)
                return 1
            print(f"sent {body!r} -> reply {frames!r}", flush=True)
    finally:
        sock.close(0)
        ctx.term()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
