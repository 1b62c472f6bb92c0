"""The bench's C load peers (``c/*.c``): built with the C compiler at bench time, started as
children speaking the bench's line protocol (``READY {json}``, then ``RESULT {json}`` per
command; see ``c/peer.h``).

A binary is cached under the temporary directory, keyed by the hash of its sources, flags and
compiler, so a run builds each program once and an edited source is rebuilt. A missing compiler
or header raises :class:`~gateway.tools.harness.procs.Unavailable` with the reason: the routes
of those peers are then "unavailable", never a crash.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from gateway.tools.bench.procs import Proc
from gateway.tools.harness.procs import Unavailable

SOURCES = Path(__file__).with_name("c")
CFLAGS = ("-O2", "-std=gnu11", "-Wall", "-Wextra")
#: program -> (its source, the libraries it links)
PROGRAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "zmq_reqrep": ("zmq_reqrep.c", ("-lzmq",)),
    "nng_reqrep": ("nng_reqrep.c", ("-lnng", "-lpthread")),
    "sp_stream": ("sp_stream.c", ()),
    "zmq_patterns": ("zmq_patterns.c", ("-lzmq",)),
    "nng_patterns": ("nng_patterns.c", ("-lnng", "-lpthread")),
    "sp_patterns": ("sp_patterns.c", ()),
    "nng_shapes": ("nng_shapes.c", ("-lnng", "-lpthread")),
    "relay_floor": ("relay_floor.c", ()),
    # not a peer: the kernel's own cost of a message per write (gateway.tools.bench.kernel)
    "kernel_hop": ("kernel_hop.c", ()),
    # not a peer: the LD_PRELOAD shim that counts a bridge's copies (gateway.tools.bench.copies)
    "copycount": ("copycount.c", ("-shared", "-fPIC", "-ldl")),
}
#: bench role -> (program, mode): the request-reply clients and echo servers. The ``cpeers``
#: SP routes use ``sp_stream`` (SP over plain sockets): nng's own peers cost ~30 us of CPU per
#: request (its threads), so on a small machine they, not the middle, were the bottleneck; the
#: nng peers stay as the library's own direct figure. The ``real`` routes use the shapes
#: applications have (``nng_shapes``: a cooked rep0 server with one context per request in
#: flight, cooked req0 client sockets with one request each; ``c-zmq-dealers``: a DEALER per
#: request in flight), whatever they cost.
ROLES: dict[str, tuple[str, str]] = {
    "c-zmq": ("zmq_reqrep", "client"),
    "c-zmq-echo": ("zmq_reqrep", "echo"),
    "c-zmq-dealers": ("zmq_reqrep", "client"),
    "c-sp": ("sp_stream", "client"),
    "c-sp-echo": ("sp_stream", "echo"),
    "c-nng": ("nng_reqrep", "client"),
    "c-nng-echo": ("nng_reqrep", "echo"),
    "c-nng-req": ("nng_shapes", "client"),
    "c-nng-rep": ("nng_shapes", "server"),
}
#: the client roles of one socket per request in flight: started with ``sockets=`` the largest
#: window (``peer(..., sockets=N)``)
SOCKETS_ROLES = frozenset({"c-zmq-dealers", "c-nng-req"})
BUILD_TIMEOUT = 120.0
_lock = threading.Lock()
_failed: dict[str, str] = {}  # program -> why it cannot be built (asked once per run)


def compiler() -> str | None:
    """The C compiler (``$CC``, else gcc, else cc) as a path, or None."""
    for name in (os.environ.get("CC", ""), "gcc", "cc"):
        if name and (path := shutil.which(name)):
            return path
    return None


def cache_dir() -> Path:
    return Path(os.environ.get("GATEWAY_BENCH_C_CACHE")
                or Path(tempfile.gettempdir()) / "gateway-bench-c")


def _key(program: str, cc: str) -> str:
    source, libs = PROGRAMS[program]
    h = hashlib.sha256()
    for part in (cc, *CFLAGS, *libs, source):
        h.update(part.encode() + b"\0")
    for path in sorted(SOURCES.glob("*.[ch]")):  # the shared headers count too
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def build(program: str) -> Path:
    """The built ``program`` (compiled now unless cached); :class:`Unavailable` with the
    reason when it cannot be built."""
    if program not in PROGRAMS:
        raise ValueError(f"no C peer {program!r}; known: {', '.join(PROGRAMS)}")
    with _lock:
        if program in _failed:
            raise Unavailable(_failed[program])
        try:
            return _build(program)
        except Unavailable as exc:
            _failed[program] = str(exc)
            raise


def _build(program: str) -> Path:
    cc = compiler()
    if cc is None:
        raise Unavailable(f"C peer {program}: no C compiler (gcc, cc or $CC) on PATH")
    source, libs = PROGRAMS[program]
    out = cache_dir() / _key(program, cc) / program
    if out.is_file() and os.access(out, os.X_OK):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{program}.{os.getpid()}")
    argv = [cc, *CFLAGS, "-o", str(tmp), str(SOURCES / source), *libs]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"C peer {program}: the build took over {BUILD_TIMEOUT:.0f}s") from None
    except OSError as exc:
        raise Unavailable(f"C peer {program}: cannot run {cc}: {exc}") from None
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        errors = [ln for ln in r.stderr.splitlines() if "error" in ln] or r.stderr.splitlines()
        why = errors[0].strip() if errors else f"exit status {r.returncode}"
        raise Unavailable(f"C peer {program}: build failed (libzmq3-dev / libnng-dev "
                          f"installed?): {why}")
    tmp.replace(out)  # atomic: a concurrent run sees the whole binary or none
    return out


def argv(role: str, **args: Any) -> list[str]:
    """``PROGRAM MODE key=value ...`` of a C peer role (built if needed)."""
    program, mode = ROLES[role]
    return [str(build(program)), mode, *(f"{k}={v}" for k, v in args.items())]


def peer(name: str, role: str, **cfg: Any) -> Proc:
    """A bench peer of ``role``: a C peer (``c-...``, cfg: ``url`` for a client, ``sockets``
    for one of :data:`SOCKETS_ROLES`) or a Python one (:meth:`Proc.peer`)."""
    if role not in ROLES:
        return Proc.peer(name, role, **cfg)
    unknown = set(cfg) - {"url", *(("sockets",) if role in SOCKETS_ROLES else ())}
    if unknown:
        raise Unavailable(f"C peer {role}: no option {', '.join(sorted(unknown))} "
                          "(plain TCP only)")
    return Proc(name, argv(role, lifetime=int(Proc.lifetime), **cfg))


def floor_relay(name: str, front: str, back: str, server: str) -> Proc:
    """The floor of a middle from ``front``'s clients to ``back``'s ``server`` (``zmq`` or
    ``sp``; ``c/relay_floor.c``: one epoll loop, plain sockets, the gateway's envelopes);
    READY with the URL its clients dial."""
    return Proc(name, [str(build("relay_floor")), f"{front}-{back}", f"server={server}",
                       f"lifetime={int(Proc.lifetime)}"])


def pattern_peer(name: str, role: str, wire: str, nng: bool = False, **cfg: Any) -> Proc:
    """A ``pattern-*`` peer (``pattern-pub``, ``-subs``, ``-pull``, ``-push``; see
    ``patterns.py``) in C on ``wire``: libzmq for zmq; for SP, plain sockets (``sp_patterns``;
    ``nng``: nng's own peers, far slower). cfg: ``hwm``, ``url``, ``count``."""
    program = ("zmq_patterns" if wire == "zmq" else "nng_patterns" if nng
               else "sp_patterns")
    mode = role.removeprefix("pattern-")
    return Proc(name, [str(build(program)), mode,
                       *(f"{k}={v}" for k, v in {"lifetime": int(Proc.lifetime), **cfg}.items())])
