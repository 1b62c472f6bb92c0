"""The kernel's own cost of a message sent one per write (``c/kernel_hop.c``), measured once
in a run of the ``real`` group, at the run's message size: over loopback TCP, the routes'
transport, and over unix stream sockets, ipc's.

An nng req0 client sends each request in a write of its own, on a connection of its own, and
reads its reply alone: a middle between such clients and any server makes at least one read
and one write per request on their connections, whatever the middle is. On loopback TCP a
write also runs the receiving end's TCP in the writer's system time, so that read and write
cost more CPU than a whole request through ``zmq.proxy`` with libzmq clients, which send ten
or more requests per write. The report sets the two side by side (``kernel_lines``): the part
of the middle's CPU per request that no middle can spend less than.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from gateway.tools.bench import cpeers
from gateway.tools.harness.procs import Unavailable

TRANSPORTS = ("tcp", "unix")
CONNECTIONS = 64  # the real routes' nng req0 clients
TIMEOUT = 120.0
_BYTES = 512 << 20  # written per transport at most (a large size measures fewer messages)
MAX_SIZE = 16 << 10  # kernel_hop's: a message in one segment (a large one's cost is its copies)


def measure(size: int, messages: int) -> dict[str, Any]:
    """``{"tcp": {...}, "unix": {...}}`` as ``kernel_hop`` says (``write_us``, ``read_us``:
    CPU per message), or ``{"status": why}`` when it cannot run."""
    if not 1 <= size <= MAX_SIZE:
        return {"status": f"measured for messages of 1 to {MAX_SIZE} bytes, not {size}"}
    count = max(CONNECTIONS, min(messages, _BYTES // size))
    out: dict[str, Any] = {}
    try:
        exe = cpeers.build("kernel_hop")
        for transport in TRANSPORTS:
            done = subprocess.run(
                [str(exe), transport, f"size={size}", f"messages={count}",
                 f"connections={CONNECTIONS}"], capture_output=True, text=True, timeout=TIMEOUT)
            line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), "")
            if done.returncode != 0 or not line:
                why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
                return {"status": f"kernel_hop {transport}: {why}"}
            out[transport] = json.loads(line.removeprefix("RESULT "))
    except Unavailable as exc:
        return {"status": str(exc)}
    except subprocess.TimeoutExpired:
        return {"status": f"kernel_hop: over {TIMEOUT:.0f} s"}
    except OSError as exc:
        return {"status": f"kernel_hop: {exc}"}
    return out


def kernel_lines(kernel: dict[str, Any] | None, real: dict[str, Any]) -> list[str]:
    """The report's lines of a :func:`measure` result; ``real``: the real group's derived
    figures (zmq.proxy's CPU per request, for the ratio)."""
    if not kernel:
        return []
    if "status" in kernel:
        return [f"  kernel cost of a message per write: not measured ({kernel['status']})"]
    tcp, unix = kernel.get("tcp") or {}, kernel.get("unix") or {}
    if not tcp:
        return []
    total = tcp["write_us"] + tcp["read_us"]
    proxy = (real.get("zmq-proxy-real") or {}).get("cpu_us_per_req")
    versus = f", {total / proxy:.2f}x zmq.proxy's CPU per request in this run" if proxy else ""
    out = [f"  kernel cost of a message per write ({tcp['size']} B, {tcp['connections']} "
           f"connections, c/kernel_hop.c): loopback TCP write {tcp['write_us']:.2f} + read "
           f"{tcp['read_us']:.2f} = {total:.2f} us of CPU{versus}"]
    if unix:
        out[0] += (f"; unix sockets (ipc) {unix['write_us']:.2f} + {unix['read_us']:.2f} = "
                   f"{unix['write_us'] + unix['read_us']:.2f} us")
    out.append("  (a middle between clients that send one request per write (nng req0) and "
               "any server reads each request and writes each reply alone: on the nng-client "
               "routes no middle spends less CPU per request than that read and write)")
    return out


__all__ = ["CONNECTIONS", "MAX_SIZE", "TRANSPORTS", "kernel_lines", "measure"]
