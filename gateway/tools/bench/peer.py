"""One benchmark peer (server, proxy or client) in its own process.

Run by path (``python -P .../peer.py ROLE JSON``) so that library peers import only pyzmq or
pynng, never the ``gateway`` package (native roles import it). Protocol with the harness:

- one ``READY {json}`` line on stdout once bound/connected (``{"url": ...}`` for servers and
  proxies: a plain ``tcp://127.0.0.1:PORT`` address);
- clients then read one JSON command per stdin line and answer one ``RESULT {json}`` line;
- every peer exits when its stdin closes (the harness went away) or after ``lifetime`` seconds.

Commands: ``{"op": "lat", "n", "size", "timeout", "warmup"}`` -> ``{"samples_ns": [...],
"elapsed": s}``; ``{"op": "tput", "window", "n", "size", "timeout"}`` -> ``{"n", "elapsed",
"timed_out"}``; ``{"op": "flood", "n", "size", "duration"}`` -> ``{"sent", "elapsed"}``;
``{"op": "quit"}``.

This module holds the process (its lifetime, the role table, ``main``); the roles live in its
``peer_*`` siblings: :mod:`~gateway.tools.bench.peer_base` (what they share),
:mod:`~gateway.tools.bench.peer_servers`, :mod:`~gateway.tools.bench.peer_clients`,
:mod:`~gateway.tools.bench.peer_streams`, :mod:`~gateway.tools.bench.peer_sweep` and
:mod:`~gateway.tools.bench.peer_patterns`. They import each other relatively; run by path,
this module first makes their folder a package of its own (``_bench_peer``, no ``__init__``
run), so a library peer still imports nothing of ``gateway``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import types
from pathlib import Path

if not __package__:  # run by path: the siblings as package ``_bench_peer`` (docstring)
    _package = types.ModuleType("_bench_peer")
    _package.__path__ = [str(Path(__file__).parent)]
    sys.modules["_bench_peer"] = _package
    __package__ = "_bench_peer"

from .peer_clients import run_client, run_idle_clients  # noqa: E402
from .peer_patterns import (  # noqa: E402
    run_pattern_push,
    run_pattern_subs,
    serve_pattern_device,
    serve_pattern_proxy,
    serve_pattern_pub,
    serve_pattern_pull,
)
from .peer_servers import (  # noqa: E402
    serve_native_rep,
    serve_nng_blackhole,
    serve_nng_device,
    serve_nng_rep,
    serve_sp_echo,
    serve_stalled_sub,
    serve_zmq_echo,
    serve_zmq_proxy,
    serve_zmq_rep,
)
from .peer_sweep import run_sweep_client  # noqa: E402

DEFAULT_LIFETIME = 3600.0


def watchdog(lifetime: float, watch_stdin: bool) -> None:
    """Exit when the harness closes our stdin, or after ``lifetime`` seconds in any case."""

    def on_eof() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        os._exit(0)

    def on_deadline() -> None:
        time.sleep(lifetime)
        os._exit(3)

    if watch_stdin:
        threading.Thread(target=on_eof, daemon=True).start()
    threading.Thread(target=on_deadline, daemon=True).start()


def die_with_parent() -> None:
    """Linux: SIGKILL this peer when the harness dies, even mid-measurement."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:
        os._exit(1)


ROLES = {
    "zmq-rep": serve_zmq_rep,
    "nng-rep": serve_nng_rep,
    "zmq-echo": serve_zmq_echo,
    "sp-echo": serve_sp_echo,
    "native-rep": serve_native_rep,
    "nng-blackhole": serve_nng_blackhole,
    "zmq-proxy": serve_zmq_proxy,
    "nng-device": serve_nng_device,
    "stalled-sub": serve_stalled_sub,
    "client": run_client,
    "idle-clients": run_idle_clients,
    "sweep-client": run_sweep_client,
    "pattern-pub": serve_pattern_pub,
    "pattern-subs": run_pattern_subs,
    "pattern-pull": serve_pattern_pull,
    "pattern-push": run_pattern_push,
    "pattern-proxy": serve_pattern_proxy,
    "pattern-device": serve_pattern_device,
}


def main(argv: list[str]) -> None:
    role, cfg = argv[0], json.loads(argv[1]) if len(argv) > 1 else {}
    client = role in ("client", "idle-clients", "sweep-client", "pattern-pub", "pattern-subs",
                      "pattern-pull", "pattern-push")
    die_with_parent()
    # clients read stdin themselves: EOF ends their command loop
    watchdog(float(cfg.get("lifetime", DEFAULT_LIFETIME)), watch_stdin=not client)
    try:
        ROLES[role](cfg)
    except KeyboardInterrupt:
        os._exit(130)


if __name__ == "__main__":
    main(sys.argv[1:])
