#!/usr/bin/env python3
"""An nng (SP) REQ client for the gateway.

    python examples/nng_req_client.py --connect tcp://127.0.0.1:6001 --count 3

Works the same against nanomsg or nng servers and against the gateway's SP front.
Exit code 1 when a reply does not come within ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import sys

import pynng


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connect", default="tcp://127.0.0.1:6001", help="the gateway's front")
    p.add_argument("--count", type=int, default=1, help="requests to send (default 1)")
    p.add_argument("--data", default="hello", help="request body; a counter is appended")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait per reply")
    args = p.parse_args(argv)

    ms = int(args.timeout * 1000)
    with pynng.Req0(recv_timeout=ms, send_timeout=ms) as sock:
        sock.dial(args.connect, block=False)  # nng redials until the gateway is there
        for i in range(args.count):
            body = f"{args.data} {i}".encode()
            try:
                sock.send(body)
                reply = sock.recv()
            except pynng.Timeout:
                print(f"no reply within {args.timeout}s", file=sys.stderr)
                return 1
            print(f"sent {body!r} -> reply {reply!r}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
