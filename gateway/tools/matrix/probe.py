"""What a listening peer puts on the wire at connection time, read with a raw socket and
decoded here, independently of ``gateway.wire``: the matrix's handshake check."""

from __future__ import annotations

import socket
from typing import Any

from gateway.tools.harness.procs import lib_url

ZMTP_GREETING = (b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\x00")
                 + b"\x00" + b"\x00" * 31)


def _open_stream(url: str, timeout: float) -> socket.socket:
    scheme, _, rest = lib_url(url).partition("://")
    if scheme == "tcp":
        host, _, port = rest.rpartition(":")
        s = socket.create_connection((host, int(port)), timeout=timeout)
    elif scheme == "ipc":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(rest)
    else:
        raise ValueError(f"cannot probe {url}")
    s.settimeout(timeout)
    return s


def _read_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def wire_probe(url: str, wire: str, timeout: float = 1.0, sp_first: bool = False) -> dict[str, Any]:
    """Connect to a listening peer with a raw socket and decode what *it* sends first.

    ZMTP: we send a NULL-mechanism 3.1 greeting (its first 11 bytes, then the rest once the
    peer's major version says 3.x), read the peer's 64-byte greeting and its READY command
    (parsed here, independently of ``gateway.wire``), or a ZMTP 2.0 peer's socket-type byte
    (``zmtp2_type``); SP: read the 8-byte header the
    peer sends at once (``sp_first``: after ours, a req0 header, for a one-port listener that
    waits for the client's first byte). Nothing is ever sent past the handshake, and the
    connection is closed.
    """
    with _open_stream(url, timeout) as s:
        if wire == "sp":
            if sp_first:
                s.sendall(b"\x00SP\x00\x00\x30\x00\x00")
            hdr = _read_exact(s, 8)
            return {"raw": hdr.hex(), "ok_magic": hdr[:4] == b"\x00SP\x00" and hdr[6:] == b"\x00\x00",
                    "protocol": int.from_bytes(hdr[4:6], "big")}
        s.sendall(ZMTP_GREETING[:11])  # signature + major first (RFC 37 version negotiation)
        g = _read_exact(s, 11)
        if g[0] == 0xFF and g[9] & 0x01 and g[10] < 3:  # a ZMTP 2.0 peer (RFC 15): no more
            t = _read_exact(s, 1)[0]
            return {"raw": (g + bytes((t,))).hex(), "ok_magic": True, "version": (2, 0),
                    "zmtp2_type": t}
        s.sendall(ZMTP_GREETING[11:])
        g += _read_exact(s, 53)
        out: dict[str, Any] = {
            "raw": g[:12].hex(),
            "ok_magic": g[0] == 0xFF and g[9] == 0x7F,
            "version": (g[10], g[11]),
            "mechanism": g[12:32].rstrip(b"\x00").decode("ascii", "replace"),
        }
        flags = _read_exact(s, 1)[0]
        size = int.from_bytes(_read_exact(s, 8 if flags & 0x02 else 1), "big")
        body = _read_exact(s, size)
        out["command_flags"] = flags
        name_len = body[0] if body else 0
        out["command"] = body[1:1 + name_len].decode("ascii", "replace")
        props: dict[str, bytes] = {}
        i = 1 + name_len
        while i < len(body):
            n = body[i]
            name = body[i + 1:i + 1 + n].decode("ascii", "replace").lower()
            i += 1 + n
            vlen = int.from_bytes(body[i:i + 4], "big")
            props[name] = body[i + 4:i + 4 + vlen]
            i += 4 + vlen
        out["properties"] = props
        return out
