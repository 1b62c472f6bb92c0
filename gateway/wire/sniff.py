"""One port, both wires (``any+tcp://``): the wire a peer speaks, told by its first byte. Sans-IO.

Clients of both families speak first, without waiting for the listener:

* an nng or nanomsg client sends its 8-byte SP header at once, ``00 53 50 00`` + protocol +
  two zero bytes (nanomsg sp-tcp-mapping; nng ``tcptran_pipe_nego``), and reads ours after;
* a libzmq client sends the 10-byte ZMTP signature at once, ``FF`` + 8 padding bytes + ``7F``
  (RFC 23 "the greeting"; RFC 15 for ZMTP 2.0, which has the same first byte); a ZMTP 1.0
  peer's first byte is its identity frame's length, never 0 (RFC 13).

So ``00`` is SP and every other byte goes to the ZMTP codec, which already tells a ZMTP 1.0
peer (``zmtp-version``) from garbage (``garbage``) with its usual reasons. Nothing is sent
before that byte arrives; a peer that sends nothing meets the handshake deadline
(``handshake-timeout``), as on a single-wire port.
"""

from __future__ import annotations

from gateway.errors import LocalProtocolError

__all__ = ["ANY", "SP_FIRST_BYTE", "Undecided", "wire_of"]

#: the wire family of a listener that takes both wires (``any+tcp://``)
ANY = "any"
#: the first byte of the SP header; a ZMTP greeting (3.x, 2.0) starts with 0xFF, a ZMTP 1.0
#: identity frame with its length (1..255)
SP_FIRST_BYTE = 0x00


def wire_of(first: int) -> str:
    """The wire family (``"sp"`` or ``"zmtp"``) of a peer whose first byte is ``first``."""
    return "sp" if first == SP_FIRST_BYTE else "zmtp"


class Undecided:
    """The codec of a pipe whose wire is not known yet: it sends nothing and decodes nothing
    (the pipe swaps in the real codec on the first byte, :func:`wire_of`)."""

    family = ANY
    handshake_done = False
    partial = False

    def initiate(self) -> bytes:
        return b""  # the peer speaks first

    def receive_data(self, data: bytes) -> None:
        raise LocalProtocolError("the wire is chosen before any byte is decoded")

    def next_event(self) -> None:
        return None

    def data_to_send(self) -> bytes:
        return b""

    def send_message(self, parts: tuple[bytes, ...]) -> bytes:
        raise LocalProtocolError("no message before the handshake (the wire is not known yet)")
