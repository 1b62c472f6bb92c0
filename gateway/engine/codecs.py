"""A pipe's wire codec, made from the plugin registry with its identity as data: which socket
type a native socket announces and which peers it accepts on each wire come from the pairing
tables (:mod:`gateway.patterns.pairing`); framing details come from the transport's
declarations (:class:`gateway.transport.TransportSpec`)."""

from __future__ import annotations

import functools
from typing import Any

from gateway.errors import LocalProtocolError
from gateway.patterns import pairing
from gateway.patterns.reqrep import SP, ZMTP
from gateway.wire.sp import SpRole
from gateway.wire.zmtp import ZmtpRole


@functools.lru_cache(maxsize=64)  # per kind, not per connection (roles are frozen)
def zmtp_role(kind: str, raw: bool) -> ZmtpRole:
    """What a native socket announces and accepts on ZMTP, from the pairing tables."""
    if pairing.zmtp_socket_type(kind, raw) not in pairing.ZMTP_PEERS:
        raise ValueError(f"unknown socket kind {kind!r}")
    socket_type = pairing.zmtp_socket_type(kind, raw)
    return ZmtpRole(socket_type, pairing.ZMTP_PEERS[socket_type],
                    sends_identity=socket_type in pairing.ZMTP_SENDS_IDENTITY)


@functools.lru_cache(maxsize=64)
def sp_role(kind: str) -> SpRole:
    """What a native socket announces and accepts on SP, from the pairing tables."""
    if kind not in pairing.SP_PROTOCOLS:
        raise ValueError(f"unknown socket kind {kind!r}")
    protocol = pairing.sp_protocol(kind)
    return SpRole(protocol, pairing.SP_PEERS[protocol], names=pairing.SP_NAMES)


def make_codec(factory: Any, family: str, kind: str, raw: bool, *, identity: bytes,
               max_message_size: int, transport: Any, mechanism: Any = None,
               address: str = "", client: bool = False,
               origins: tuple[str, ...] | None = None) -> Any:
    """A codec from a wire registration, given its identity as data (see ``hookspecs``).

    SP framing comes from the transport's declaration: ``sp_message_prefix`` (nng's ipc:
    ``b"\\x01"``), or a wire of the transport's own ``framing`` (``ws``), which also gets the
    endpoint's ``address`` and whether this end dialled (``client``).
    ``mechanism``: a ZMTP security mechanism (``gateway.wire.zmtp_mechanism``; None: NULL).
    A wire of a message framing (``ws``, both families) also gets ``address``, ``client`` and
    a listener's ``origins`` (the ``origin`` allow-list; None: same-origin only).
    """
    framed = ({} if transport is None or transport.framing == "stream"
              else {"address": address, "client": client, "origins": origins})
    if family == ZMTP:
        if mechanism is not None:
            framed["security"] = mechanism
        return factory(zmtp_role(kind, raw), identity=identity,
                       max_message_size=max_message_size, **framed)
    if family == SP:
        if framed:
            return factory(sp_role(kind), max_message_size=max_message_size, **framed)
        return factory(sp_role(kind), max_message_size=max_message_size,
                       message_prefix=transport.sp_message_prefix)
    raise LocalProtocolError(f"unknown wire family {family!r}")


__all__ = ["make_codec", "sp_role", "zmtp_role"]
