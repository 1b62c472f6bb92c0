"""Process and port helpers shared by the bench, the matrix and the test suites (one copy).

No pytest here: product code (``gateway bench``, ``gateway matrix``) imports it too.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

#: The directory that holds the ``gateway`` package (the checkout, or site-packages).
SOURCE_ROOT = Path(__file__).resolve().parents[2]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (for peers that cannot bind ``:0`` themselves:
    nanocat, nngcat, ``--metrics``)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python process: this ``gateway`` first on ``PYTHONPATH``
    (so a checkout's children import the checkout), unbuffered output, plus ``extra``."""
    env = dict(os.environ)
    parts = [str(SOURCE_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


def lib_url(url: str) -> str:
    """A gateway endpoint as the libraries spell it: ``@zmq+tcp://h:p?backend=x`` ->
    ``tcp://h:p``; ``nng+ipc:///x`` -> ``ipc:///x``; ``sp+tls+tcp://h:p`` -> ``tls+tcp://h:p``."""
    scheme, sep, rest = url.lstrip("@>").partition("://")
    wire, plus, transport = scheme.partition("+")  # sp+tls+tcp -> tls+tcp, sp+ws -> ws
    return f"{transport if plus else wire}{sep}{rest.split('?', 1)[0]}"


def port_of(url: str) -> int:
    """The TCP port of an endpoint URL (gateway or library spelling) or of ``host:port``."""
    port = url.split("?", 1)[0].rpartition(":")[2]
    if not port.isdigit():
        raise ValueError(f"no port in {url!r}")
    return int(port)
