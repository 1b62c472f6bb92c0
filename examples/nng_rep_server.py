#!/usr/bin/env python3
"""An nng (SP) REP server for the gateway.

    python examples/nng_rep_server.py --listen tcp://127.0.0.1:6000 --count 3

It answers ``<prefix><request>``. Requests from ZeroMQ clients arrive here as plain SP
requests: the gateway keeps their ZeroMQ envelopes and puts them back on the replies.
``--count 0`` serves until Ctrl-C.
"""

from __future__ import annotations

import argparse

import pynng


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--listen", default="tcp://127.0.0.1:6000", help="where to listen")
    p.add_argument("--count", type=int, default=0, help="requests to answer, then exit (0: forever)")
    p.add_argument("--prefix", default="re:", help="prepended to each reply")
    args = p.parse_args(argv)

    with pynng.Rep0(recv_timeout=200) as sock:
        listener = sock.listen(args.listen)
        print(f"listening on tcp://{listener.local_address}"
              if args.listen.startswith("tcp") else f"listening on {args.listen}", flush=True)
        served = 0
        try:
            while args.count == 0 or served < args.count:
                try:
                    body = sock.recv()
                except pynng.Timeout:  # wake up now and then so that Ctrl-C is seen
                    continue
                print(f"request {body!r}", flush=True)
                sock.send(args.prefix.encode() + body)
                served += 1
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
