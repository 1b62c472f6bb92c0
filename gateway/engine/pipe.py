"""One peer connection's pieces: the codec a pipe runs, built from the pairing tables."""

from __future__ import annotations

from typing import Any

from gateway.errors import LocalProtocolError
from gateway.patterns import pairing
from gateway.patterns.reqrep import SP, ZMTP
from gateway.wire.sp import SpRole
from gateway.wire.zmtp import ZmtpRole


def zmtp_role(kind: str, raw: bool) -> ZmtpRole:
    """What a native socket announces and accepts on ZMTP, from the pairing tables."""
    if kind not in pairing.ZMTP_PEERS:
        raise ValueError(f"unknown socket kind {kind!r}")
    socket_type = pairing.zmtp_socket_type(kind, raw)
    return ZmtpRole(socket_type, pairing.ZMTP_PEERS[socket_type],
                    sends_identity=socket_type in pairing.ZMTP_SENDS_IDENTITY)


def sp_role(kind: str) -> SpRole:
    """What a native socket announces and accepts on SP, from the pairing tables."""
    if kind not in pairing.SP_PROTOCOLS:
        raise ValueError(f"unknown socket kind {kind!r}")
    protocol = pairing.sp_protocol(kind)
    return SpRole(protocol, pairing.SP_PEERS[protocol], names=pairing.SP_NAMES)


def make_codec(factory: Any, family: str, kind: str, raw: bool, *, identity: bytes,
               max_message_size: int, transport: Any) -> Any:
    """A codec from a wire registration, given its identity as data (see ``hookspecs``).

    SP framing comes from the transport plugin: ``sp_message_prefix`` (nng's ipc: ``b"\\x01"``).
    """
    if family == ZMTP:
        return factory(zmtp_role(kind, raw), identity=identity, max_message_size=max_message_size)
    if family == SP:
        return factory(sp_role(kind), max_message_size=max_message_size,
                       message_prefix=getattr(transport, "sp_message_prefix", b""))
    raise LocalProtocolError(f"unknown wire family {family!r}")
