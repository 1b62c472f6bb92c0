"""ZMTP 3.x, sans-IO (rfc.zeromq.org specs 23 and 37), and ZMTP 2.0 peers (spec 15): NULL here,
PLAIN and CURVE through a :class:`~gateway.wire.zmtp_mechanism.Mechanism` (``security=``;
``zmtp_plain``, ``zmtp_curve``).

One codec per TCP connection. Version negotiation as libzmq does it (RFC 37 "Backwards
Interoperability", libzmq ``zmtp_engine.cpp``): ``initiate()`` gives the 10-byte signature and
our major version (11 bytes; the padding carries the identity length + 1, as libzmq's, so a
ZMTP 1.0 peer would read it as an identity frame header). Once the peer's signature and
version byte are in, the codec queues (``data_to_send()``):

* a 3.x peer: the rest of our greeting (minor, mechanism, as-server, filler), then READY once
  the peer's whole greeting has been read;
* a ZMTP 2.0 peer (revision 1 or 2; JeroMQ 0.3, libzmq 3.x): our socket-type byte and our
  identity frame (RFC 15); the peer's socket-type byte is checked against the pairing table
  and its identity frame read, then messages use the 2.0 framing (flags ``0x01`` MORE, ``0x02``
  LONG, no commands, so no PING);
* a ZMTP 1.0 peer (unversioned, or revision 0): refused with :class:`VersionError`.

A security mechanism other than NULL forbids the downgrade (RFC 37): see
:meth:`ZmtpCodec.downgrade_allowed`. Received messages come out of ``next_event()`` as plain
tuples of ``bytes`` frames; commands become events.

The package, bottom up (no module imports the codec):

* :mod:`~gateway.wire.zmtp.framing`: flags, frame headers, the one header parser;
* :mod:`~gateway.wire.zmtp.greeting`: signature, greeting, version negotiation (incl. 2.0);
* :mod:`~gateway.wire.zmtp.commands`: encoding, READY properties, what a received command means;
* :mod:`~gateway.wire.zmtp.readers`: the codec's states and one reader per framing mode (the
  batch reader ``next_messages``, the open state's, the handshake's, the sealed one);
* :mod:`~gateway.wire.zmtp.codec`: :class:`ZmtpCodec`, the state machine over them.
"""

from __future__ import annotations

from gateway.wire.zmtp.codec import ZmtpCodec, ZmtpRole
from gateway.wire.zmtp.commands import encode_command, encode_properties, parse_properties
from gateway.wire.zmtp.greeting import GREETING_SIZE, SIGNATURE_SIZE, ZMTP2_SOCKET_TYPES
from gateway.wire.zmtp.readers import HANDSHAKE_FRAME_LIMIT

__all__ = [
    "GREETING_SIZE",
    "HANDSHAKE_FRAME_LIMIT",
    "SIGNATURE_SIZE",
    "ZMTP2_SOCKET_TYPES",
    "ZmtpCodec",
    "ZmtpRole",
    "encode_command",
    "encode_properties",
    "parse_properties",
]
