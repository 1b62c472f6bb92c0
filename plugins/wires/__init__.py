"""The two wires: ZMTP 3.1 (``zmq+``) and SP (``sp+``, ``nng+``, ``nanomsg+``)."""

from __future__ import annotations

from gateway.hookspecs import hookimpl
from gateway.wire.sp import SpCodec
from gateway.wire.zmtp import ZmtpCodec


@hookimpl
def gateway_register_wires(register) -> None:  # type: ignore[no-untyped-def]
    register("zmtp", "zmtp", ZmtpCodec, aliases=("zmq",))
    register("sp", "sp", SpCodec, aliases=("nng", "nanomsg"))
