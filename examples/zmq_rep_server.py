#!/usr/bin/env python3
"""A ZeroMQ server for the gateway: REP by default, ROUTER with ``--router``.

    python examples/zmq_rep_server.py --bind tcp://127.0.0.1:7000 --count 3

It answers ``<prefix><request>``. A ROUTER server must return the envelope it got (identity,
the gateway's 4-byte hop frames, the empty delimiter) in front of its reply: ordinary ROUTER
practice, and what the gateway checks. ``--count 0`` serves until Ctrl-C.
"""

from __future__ import annotations

import argparse

import zmq


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bind", default="tcp://127.0.0.1:7000", help="where to listen")
    p.add_argument("--count", type=int, default=0, help="requests to answer, then exit (0: forever)")
    p.add_argument("--prefix", default="re:", help="prepended to each reply")
    p.add_argument("--router", action="store_true", help="a ROUTER server (prints the envelope)")
    args = p.parse_args(argv)

    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER if args.router else zmq.REP)
    sock.linger = 1000
    sock.bind(args.bind)
    print(f"listening on {sock.last_endpoint.decode()}", flush=True)
    served = 0
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    try:
        while args.count == 0 or served < args.count:
            if not poller.poll(100):  # wake up now and then: Ctrl-C is seen within 0.1 s
                continue
            frames = sock.recv_multipart()
            *envelope, body = frames
            reply = args.prefix.encode() + body
            if args.router:
                print(f"request {body!r} envelope {[f.hex() for f in envelope]}", flush=True)
                sock.send_multipart([*envelope, reply])
            else:
                print(f"request {body!r}", flush=True)
                sock.send(reply)
            served += 1
    except KeyboardInterrupt:
        pass
    finally:
        sock.close(linger=100)
        ctx.term()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
