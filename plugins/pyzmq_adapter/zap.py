"""A ZAP handler (rfc.zeromq.org spec 27) for the pyzmq adapter that asks the same hook as
the native engine (``gateway_authenticate``), so both backends refuse and count alike.

One handler thread per libzmq context, bound to ``inproc://zeromq.zap.01`` the first time a
PLAIN or CURVE server socket is made on that context; each such socket gets its own ZAP domain,
which names its policy (``gateway.security.Security``) and its name for the logs. The thread
ends when its context is terminated, and only then: a request it cannot answer (a plugin's bug,
a log that cannot be written) is answered ``500`` (refused) and the thread goes on.

Fail closed twice: the server sockets also set ``ZMQ_ZAP_ENFORCE_DOMAIN``, so were the handler
ever gone, libzmq would refuse every client instead of letting them all in (without it a
CURVE server with no ZAP handler accepts any key: libzmq ``curve_server.cpp``).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import zmq

from gateway.logging import get_logger
from gateway.security import Security, hook_authenticator
from gateway.wire import z85

log = get_logger("gateway.pyzmq")

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
_lock = threading.Lock()
_handlers: dict[int, threading.Thread] = {}  # id of the underlying context -> its thread
_policies: dict[bytes, tuple[Security, str]] = {}  # ZAP domain -> (policy, socket name)
_counter = itertools.count(1)


def register_policy(policy: Security, name: str) -> bytes:
    """A new ZAP domain for a server socket with ``policy``."""
    domain = f"gateway-{next(_counter)}".encode()
    with _lock:
        _policies[domain] = (policy, name)
    return domain


def ensure_handler(ctx: Any) -> None:
    """Start the ZAP handler of ``ctx`` (a zmq or zmq.asyncio context) once."""
    key = int(ctx.underlying)
    with _lock:
        if key in _handlers and _handlers[key].is_alive():
            return
        sync_ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.shadow(ctx.underlying)
        sock = sync_ctx.socket(zmq.REP)
        sock.linger = 0
        sock.bind(ZAP_ENDPOINT)  # before any server socket accepts a connection
        thread = threading.Thread(target=_serve, args=(sock,), name="gateway-zap", daemon=True)
        _handlers[key] = thread
        thread.start()


def _serve(sock: zmq.Socket[bytes]) -> None:
    try:
        while True:
            frames = sock.recv_multipart()
            try:
                reply = answer(frames)
            except Exception as exc:  # noqa: BLE001 - refuse the one client, keep serving
                reply = [b"1.0", frames[1] if len(frames) > 1 else b"", b"500",
                         b"internal error", b"", b""]
                try:
                    log.error("zap.failed", error=repr(exc)[:200])
                except Exception:  # noqa: BLE001 - stderr may be gone; the refusal stands
                    pass
            sock.send_multipart(reply)
    except zmq.ContextTerminated:
        pass
    finally:
        sock.close(0)


def answer(frames: list[bytes]) -> list[bytes]:
    """One ZAP request -> its reply (RFC 27): version, request id, status, text, user id,
    metadata. Malformed requests get 500, unknown domains 400."""
    if len(frames) < 6 or frames[0] != b"1.0":
        return [b"1.0", frames[1] if len(frames) > 1 else b"", b"500", b"bad ZAP request",
                b"", b""]
    _, request_id, domain, address, _identity, mechanism, *creds = frames
    with _lock:
        entry = _policies.get(domain)
    if entry is None:
        return [b"1.0", request_id, b"400", b"unknown ZAP domain", b"", b""]
    policy, name = entry
    mech = mechanism.decode("ascii", "replace")
    if mech == "CURVE" and len(creds) == 1 and len(creds[0]) == 32:
        credentials = {"client_key": z85.encode(creds[0])}
    elif mech == "PLAIN" and len(creds) == 2:
        credentials = {"username": creds[0].decode("utf-8", "replace"),
                       "password": creds[1].decode("utf-8", "replace")}
    else:
        return [b"1.0", request_id, b"500", b"unexpected mechanism", b"", b""]
    peer = address.decode("ascii", "replace")
    verdict = hook_authenticator(policy, name, lambda: peer)(mech, credentials)
    if verdict.allowed:
        return [b"1.0", request_id, b"200", b"OK", verdict.user_id.encode(), b""]
    return [b"1.0", request_id, b"400", verdict.reason.encode(), b"", b""]
