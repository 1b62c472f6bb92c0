"""Everything the browser page (``index.html``) talks to, on 127.0.0.1, until Ctrl-C:

* a libzmq REP server and an nng rep0 server, a libzmq PUB and an nng pub0 publisher (pyzmq,
  pynng), each saying who it is in every message;
* one ``gateway run`` with four bridges, WebSocket fronts the page reaches: ZeroMQ over
  WebSocket (ZWS 2.0, jszmq in the page) to the nng server and publisher, SP over WebSocket
  (the browser's WebSocket) to the libzmq ones, each front taking pages from this server's
  origin only (``origin=``);
* the page itself on ``http://127.0.0.1:8100/`` (``--http``), its ``config.json`` saying where
  the fronts are.

    bash .ci/npm-deps.sh              # once: jszmq bundled for the page (vendor/jszmq.js)
    python examples/browser/serve.py  # then open http://127.0.0.1:8100/

``--http 0 --ws 0`` takes ephemeral ports (the tests); the first line printed is
``PAGE <url>``, then ``METRICS <host:port>`` (the gateway's /metrics).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pynng
import zmq

HERE = Path(__file__).resolve().parent
HOST = "127.0.0.1"
#: the bridges: name -> (front path and pattern, the wire of the front, which peer is behind)
BRIDGES = {
    "zmq_req": ("zmq", "/zmq-req", "reqrep", "nng_rep"),
    "sp_req": ("sp", "/sp-req", "reqrep", "zmq_rep"),
    "zmq_sub": ("zmq", "/zmq-feed", "pubsub", "nng_pub"),
    "sp_sub": ("sp", "/sp-feed", "pubsub", "zmq_pub"),
}


def peers(stop: threading.Event) -> dict[str, str]:
    """Start the four servers in threads; their URLs by name."""
    ctx = zmq.Context.instance()
    zrep, zpub = ctx.socket(zmq.REP), ctx.socket(zmq.PUB)
    zrep.rcvtimeo = 100
    urls = {"zmq_rep": f"zmq+tcp://{HOST}:{zrep.bind_to_random_port(f'tcp://{HOST}')}",
            "zmq_pub": f"zmq+tcp://{HOST}:{zpub.bind_to_random_port(f'tcp://{HOST}')}"}
    nrep, npub = pynng.Rep0(recv_timeout=100), pynng.Pub0()
    for name, sock in (("nng_rep", nrep), ("nng_pub", npub)):
        listener = sock.listen(f"tcp://{HOST}:0")
        urls[name] = f"sp+tcp://{listener.local_address}"  # (host:port, the real port)

    def serve_zmq() -> None:
        while not stop.is_set():
            with contextlib.suppress(zmq.Again):
                zrep.send(b"libzmq REP answers: " + zrep.recv())
        zrep.close(0)

    def serve_nng() -> None:
        while not stop.is_set():
            with contextlib.suppress(pynng.Timeout):
                nrep.send(b"nng rep0 answers: " + nrep.recv())
        nrep.close()

    def publish() -> None:
        n = 0
        while not stop.wait(0.5):
            zpub.send(b"libzmq PUB #%d" % n)
            npub.send(b"nng pub0 #%d" % n)
            n += 1
        zpub.close(0)
        npub.close()

    for target in (serve_zmq, serve_nng, publish):
        threading.Thread(target=target, daemon=True).start()
    return urls


def gateway_config(backs: dict[str, str], ws_port: int, origins: str) -> str:
    """The TOML of the four bridges (``ws_port`` 0: each front on an ephemeral port)."""
    lines = ['[gateway]', 'log_format = "console"', '']
    for i, (name, (wire, path, pattern, peer)) in enumerate(BRIDGES.items()):
        port = ws_port + i if ws_port else 0
        query = f"origin={origins}" + (f"&pattern={pattern}" if pattern != "reqrep" else "")
        lines += ["[[bridge]]", f'name = "{name}"',
                  f'front = "@{wire}+ws://{HOST}:{port}{path}?{query}"',
                  f'back = ">{backs[peer]}"', ""]
    return "\n".join(lines)


@contextlib.contextmanager
def gateway(config: str) -> Iterator[tuple[dict[str, str], str]]:
    """``gateway run`` on ``config``: (each bridge's front URL by name, the metrics address)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "browser.toml"
        path.write_text(config)
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "run", str(path),
                                 "--metrics", f"{HOST}:0"], stdout=subprocess.PIPE, text=True)
        try:
            fronts: dict[str, str] = {}
            metrics = ""
            assert proc.stdout is not None
            for line in proc.stdout:
                fields = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
                if line.startswith("READY") and "name" in fields:
                    fronts[fields["name"]] = fields["front"]
                    metrics = fields.get("metrics", metrics)
                if len(fronts) == len(BRIDGES):
                    break
            if len(fronts) != len(BRIDGES):
                raise SystemExit(f"the gateway stopped (exit code {proc.wait()})")
            yield fronts, metrics
        finally:
            proc.terminate()
            proc.wait(10)


class Page(SimpleHTTPRequestHandler):
    """The page's directory, and ``/config.json``: where its WebSocket fronts are."""

    config = b"{}"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.split("?")[0] == "/config.json":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(self.config)))
            self.end_headers()
            self.wfile.write(self.config)
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", type=int, default=8100, help="the page's port (0: any)")
    parser.add_argument("--ws", type=int, default=8101,
                        help="the first of the four WebSocket fronts' ports (0: any)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # (the gateway stops with us)
    if not (HERE / "vendor" / "jszmq.js").is_file():
        raise SystemExit("vendor/jszmq.js is missing: run bash .ci/npm-deps.sh first")
    handler = functools.partial(Page, directory=str(HERE))
    server = ThreadingHTTPServer((HOST, args.http), handler)
    port = server.server_address[1]
    origins = f"http://{HOST}:{port},http://localhost:{port}"
    stop = threading.Event()
    backs = peers(stop)
    with gateway(gateway_config(backs, args.ws, origins)) as (fronts, metrics):
        Page.config = json.dumps({name: url.partition("+")[2]
                                  for name, url in fronts.items()}).encode()
        print(f"PAGE http://{HOST}:{port}/", flush=True)
        print(f"METRICS {metrics}", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            stop.set()
            server.server_close()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
