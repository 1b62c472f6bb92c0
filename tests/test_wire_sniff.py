"""One port, both wires: the first byte a peer sends says its wire (gateway.wire.sniff)."""

from __future__ import annotations

import pytest

from gateway.errors import LocalProtocolError
from gateway.wire.sniff import ANY, SP_FIRST_BYTE, Undecided, wire_of
from gateway.wire.sp import sp_header
from gateway.wire.zmtp import ZmtpCodec, ZmtpRole


@pytest.mark.parametrize(("first_bytes", "family"), [
    # nanomsg sp-tcp-mapping: 00 53 50 00, protocol (req0 0x30), reserved 00 00
    (b"\x00SP\x00\x00\x30\x00\x00", "sp"),
    (sp_header(0x30), "sp"),  # nng req0
    (sp_header(0x10), "sp"),  # pair0 (the sniff knows no protocol; the SP codec pairs)
    # RFC 23 greeting signature: FF, 8 bytes of padding, 7F (3.x), revision follows
    (b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f\x03", "zmtp"),
    (b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f\x01", "zmtp"),  # RFC 15, ZMTP 2.0
    (b"\x01\x00", "zmtp"),  # RFC 13, ZMTP 1.0: an anonymous identity frame (refused later)
    (b"GET / HTTP/1.1\r\n", "zmtp"),  # garbage: the ZMTP codec names it "garbage"
])
def test_first_byte_table(first_bytes: bytes, family: str) -> None:
    assert wire_of(first_bytes[0]) == family


def test_only_zero_is_sp() -> None:
    assert SP_FIRST_BYTE == sp_header(0x30)[0] == 0
    assert [b for b in range(256) if wire_of(b) == "sp"] == [0]


def test_a_zmtp_greeting_never_starts_with_zero() -> None:
    codec = ZmtpCodec(ZmtpRole("ROUTER", frozenset({"REQ", "DEALER"}), sends_identity=False))
    assert codec.initiate()[0] == 0xFF


def test_undecided_sends_nothing_and_takes_no_message() -> None:
    codec = Undecided()
    assert codec.family == ANY and not codec.handshake_done and not codec.partial
    assert codec.initiate() == b"" and codec.data_to_send() == b""
    assert codec.next_event() is None
    with pytest.raises(LocalProtocolError):
        codec.send_message((b"x",))
    with pytest.raises(LocalProtocolError):
        codec.receive_data(b"\x00")
