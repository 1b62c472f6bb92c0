"""pluggy hook specifications. The docstring of each hook is its contract.

Markers are project-named: ``hookspec``/``hookimpl`` for the project "gateway". A plugin is a
module (or object) with ``@gateway.hookimpl`` functions; built-in plugins in ``plugins/`` are
registered exactly like a third-party distribution's ``[project.entry-points.gateway]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

PROJECT = "gateway"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def gateway_register_transports(register: Callable[..., None]) -> None:
    """Register byte-stream transports.

    Call ``register(scheme, transport)`` once per scheme (``"tcp"``, ``"ipc"``, ``"inproc"``).
    ``transport`` implements ``gateway.transport.Transport``: ``listen(address,
    protocol_factory) -> Listener`` binds synchronously and returns a listener that knows its
    real bound address; ``await dial(address, protocol_factory)`` connects once and returns
    ``None`` (``OSError`` on failure; the engine redials). A transport whose streams frame SP
    messages with a type byte (nng's ipc mapping) sets ``sp_message_prefix = b"\\x01"``.
    """


@hookspec
def gateway_register_wires(register: Callable[..., None]) -> None:
    """Register wire protocols.

    Call ``register(name, family, codec_factory, aliases=())``: ``family`` is ``"zmtp"`` or
    ``"sp"`` (the envelope rules the patterns apply). ``codec_factory`` returns a sans-IO
    ``gateway.wire.WireCodec`` and gets its identity as data from the engine:
    ``codec_factory(ZmtpRole, *, identity, max_message_size)`` for family ``"zmtp"``,
    ``codec_factory(SpRole, *, max_message_size, message_prefix)`` for ``"sp"`` (roles from
    ``gateway.wire.zmtp`` / ``gateway.wire.sp``; ``message_prefix`` is the transport's
    ``sp_message_prefix``).
    """


@hookspec
def gateway_register_adapters(register: Callable[..., None]) -> None:
    """Register library-backed bridge sides (backends), selected with ``?backend=NAME``.

    Call ``register(name, family, open_async, *, polled=None, proxy=None, options=None)``;
    ``options`` names the ``SideOptions`` fields the adapter honours (endpoint settings such as
    ``hwm`` or ``reconnect_ivl``, see ``gateway.settings.schema``; None: not said, none refused); ``family`` is
    ``"zmtp"`` or ``"sp"``. ``open_async(kind, options)`` returns a
    ``gateway.adapter.RawSocket`` (``kind``: the side's raw socket kind, "REP"/"REQ" for
    request-reply, "XPUB"/"XSUB", "PULL"/"PUSH", "PAIR"; ``options`` a
    ``gateway.adapter.SideOptions``). The optional
    ``polled(kind, options)`` returns a ``gateway.adapter.PolledSocket`` (bridges with a polled
    face on both sides run on one poller thread), ``proxy(front_options, back_options)`` a
    ``gateway.adapter.LibraryProxy``. The contract, in full: ``gateway/adapter.py``.
    """


@hookspec(firstresult=True)
def gateway_body_codec(frames: tuple[bytes, ...], direction: str) -> tuple[bytes, ...] | None:
    """Pack or unpack a message body crossing families.

    ``direction="to_sp"``: ``frames`` is a ZeroMQ body of several frames; return a 1-tuple to
    carry it on SP, or ``None`` to leave the default (refuse, log, count).
    ``direction="to_zmtp"``: ``frames`` is the 1-tuple SP body; return the frames to put on the
    ZeroMQ side, or ``None`` for the default (the frame as it is).
    """


@hookspec(firstresult=True)
def gateway_authenticate(mechanism: str, address: str, socket: str,
                         credentials: dict[str, str], policy: Any) -> Any:
    """Decide whether a ZeroMQ peer may connect (ZeroMQ's ZAP, RFC 27, as a hook).

    Called on the server side of a PLAIN or CURVE handshake (native engine and the pyzmq
    adapter alike): ``mechanism`` "PLAIN" or "CURVE", ``address`` the peer's ``host:port``,
    ``socket`` the socket's name (bridge and side), ``credentials`` PLAIN ``{"username",
    "password"}`` or CURVE ``{"client_key"}`` (Z85 of the client's long-term public key, proven
    by its vouch), ``policy`` the side's ``gateway.security.Security`` (``curve_allow``,
    ``plain_passwords``). Return ``gateway.wire.zmtp_mechanism.AuthResult(allowed, reason,
    user_id)``, or ``None`` to leave the decision to the next implementation. The first answer
    wins; the built-in one (CZMQ zauth's certificate directory and password file) is asked
    last; with no answer at all the peer is accepted (libzmq without a ZAP handler). A refused
    peer gets an ERROR command ("400"), a warning line and ``gateway_auth_failures_total``.
    Never log or return the password.
    """


@hookspec(historic=True)
def gateway_configure(config: dict[str, Any]) -> None:
    """Called once at start-up with the parsed configuration (a dict); plugins read their
    options. Historic: a plugin registered later is called with the same configuration."""
