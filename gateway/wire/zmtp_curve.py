"""ZMTP CURVE (rfc.zeromq.org specs 25 and 26, CurveZMQ), both roles, sans-IO, on libsodium
through PyNaCl (``nacl.bindings``: crypto_box, crypto_secretbox; nothing hand-made here).

    C: HELLO     200 B  version 1.0, 72 zero bytes, C', short nonce, Box[64 zeros](C'->S)
    S: WELCOME   168 B  long nonce, Box[S' + cookie](S->C')
    C: INITIATE >=257 B cookie, short nonce, Box[C + vouch + metadata](C'->S')
    S: READY    >= 30 B short nonce, Box[metadata](S'->C')
    MESSAGE  (both)     short nonce, Box[flags + payload]   (flags 0x01 MORE, 0x02 COMMAND)

Nonce prefixes as RFC 26 fixes them ("CurveZMQHELLO---", "WELCOME-", "COOKIE--", "VOUCH---",
"CurveZMQINITIATE", "CurveZMQREADY---", "CurveZMQMESSAGEC"/"...S"). Each side counts its short
nonces from 1 (HELLO 1, INITIATE 2 as libzmq does); a peer's MESSAGE nonce must grow strictly.
Keys are 32 raw bytes here; Z85 and certificate files are :mod:`gateway.security`'s business.
"""

from __future__ import annotations

import os
import struct

from nacl import bindings as sodium
from nacl.exceptions import CryptoError as _NaclError

from gateway.errors import LocalProtocolError, RemoteProtocolError
from gateway.wire.z85 import encode as z85_encode
from gateway.wire.zmtp_mechanism import (
    Authenticate,
    AuthenticationFailed,
    Command,
    CryptoError,
    Stepped,
    allow_all,
)

__all__ = [
    "HELLO_SIZE",
    "INITIATE_MIN",
    "READY_MIN",
    "WELCOME_SIZE",
    "CurveClient",
    "CurveServer",
    "keypair",
    "public_of",
]

KEY = 32
BOX = 16  # crypto_box_MACBYTES: a box is 16 bytes longer than its plaintext
#: command sizes on the wire (name-len, name, data), RFC 26
HELLO_SIZE = 200
WELCOME_SIZE = 168
INITIATE_MIN = 257
READY_MIN = 30

_U64 = struct.Struct(">Q")
_HELLO_NONCE = b"CurveZMQHELLO---"
_WELCOME_NONCE = b"WELCOME-"
_COOKIE_NONCE = b"COOKIE--"
_VOUCH_NONCE = b"VOUCH---"
_INITIATE_NONCE = b"CurveZMQINITIATE"
_READY_NONCE = b"CurveZMQREADY---"
_MESSAGE_C = b"CurveZMQMESSAGEC"
_MESSAGE_S = b"CurveZMQMESSAGES"
_MESSAGE = b"\x07MESSAGE"


def keypair() -> tuple[bytes, bytes]:
    """A new Curve25519 key pair: (public, secret), 32 bytes each."""
    public, secret = sodium.crypto_box_keypair()
    return bytes(public), bytes(secret)


def public_of(secret: bytes) -> bytes:
    """The public key of a secret key (crypto_scalarmult_base)."""
    return bytes(sodium.crypto_scalarmult_base(secret))


def _check_key(key: bytes, what: str) -> bytes:
    if len(key) != KEY:
        raise LocalProtocolError(f"{what} must be {KEY} bytes, not {len(key)}")
    return bytes(key)


def _open(box: bytes, nonce: bytes, public: bytes, secret: bytes, what: str) -> bytes:
    try:
        return bytes(sodium.crypto_box_open(box, nonce, public, secret))
    except (_NaclError, ValueError, TypeError):
        raise CryptoError(f"CURVE {what} box does not open") from None


def _precompute(peer: bytes, secret: bytes, what: str) -> bytes:
    """crypto_box_beforenm on a key the peer sent: libsodium refuses a key of low order (32
    zero bytes, ...), a bad handshake like any other."""
    try:
        return bytes(sodium.crypto_box_beforenm(peer, secret))
    except (_NaclError, ValueError, TypeError):  # (nacl's RuntimeError is a CryptoError)
        raise CryptoError(f"CURVE {what} key is not usable (of low order)") from None


def _box_to(plain: bytes, nonce: bytes, peer: bytes, secret: bytes, what: str) -> bytes:
    """crypto_box to a key the peer sent (refused as :func:`_precompute` says)."""
    try:
        return bytes(sodium.crypto_box(plain, nonce, peer, secret))
    except (_NaclError, ValueError, TypeError):
        raise CryptoError(f"CURVE {what} key is not usable (of low order)") from None


class _Curve(Stepped):
    name = b"CURVE"
    encrypts = True
    as_server = False
    _send_prefix = _MESSAGE_C
    _recv_prefix = _MESSAGE_S

    def __init__(self) -> None:
        super().__init__()
        self._nonce = 1  # our next short nonce
        self._peer_nonce = 0  # the peer's last short nonce
        self._precom = b""  # crypto_box_beforenm(peer transient, our transient)

    def _next_nonce(self) -> bytes:
        n = self._nonce
        self._nonce += 1
        return _U64.pack(n)

    def _peer_short_nonce(self, raw: bytes) -> None:
        (n,) = _U64.unpack(raw)
        if n <= self._peer_nonce:
            raise CryptoError("CURVE nonce not increasing (replayed or reordered)")
        self._peer_nonce = n

    # -- the compiled kernel's seam: it seals and opens MESSAGE boxes itself --------------------
    def session(self) -> tuple[bytes, bytes, bytes, int, int] | None:
        """``(precomputed key, send nonce prefix, receive nonce prefix, our next short nonce,
        the peer's last)`` once the handshake is done (None before)."""
        if not self._precom:
            return None
        return self._precom, self._send_prefix, self._recv_prefix, self._nonce, self._peer_nonce

    def advance(self, nonce: int, peer_nonce: int) -> None:
        """The kernel sealed up to ``nonce - 1`` and opened up to the peer's ``peer_nonce``."""
        if nonce < self._nonce or peer_nonce < self._peer_nonce:
            raise LocalProtocolError("CURVE nonces only go up")
        self._nonce, self._peer_nonce = nonce, peer_nonce

    def seal(self, flags: int, payload: bytes) -> bytes:
        if not self._precom:
            raise LocalProtocolError("CURVE handshake not complete")
        short = self._next_nonce()
        box = sodium.crypto_box_afternm(bytes((flags & 0x03,)) + payload,
                                        self._send_prefix + short, self._precom)
        return _MESSAGE + short + box

    def open(self, body: bytes) -> tuple[int, bytes]:
        if len(body) < 8 + 8 + BOX + 1 or body[:8] != _MESSAGE:
            raise CryptoError("malformed CURVE MESSAGE")
        short = bytes(body[8:16])
        self._peer_short_nonce(short)
        try:
            plain = sodium.crypto_box_open_afternm(bytes(body[16:]), self._recv_prefix + short,
                                                   self._precom)
        except (_NaclError, ValueError, TypeError):
            raise CryptoError("CURVE MESSAGE box does not open") from None
        return plain[0], bytes(plain[1:])


class CurveClient(_Curve):
    """The CURVE client: long-term key pair (``public``, ``secret``) and the server's
    long-term public key ``server_key``."""

    def __init__(self, public: bytes, secret: bytes, server_key: bytes) -> None:
        super().__init__()
        self._public = _check_key(public, "CURVE public key")
        self._secret = _check_key(secret, "CURVE secret key")
        self._server = _check_key(server_key, "CURVE server key")
        self._t_public, self._t_secret = keypair()  # C', c'
        self._cookie = b""
        self._server_t = b""  # S'

    def hello(self) -> bytes:
        """HELLO data (after the name): 194 bytes."""
        short = self._next_nonce()
        box = sodium.crypto_box(b"\x00" * 64, _HELLO_NONCE + short, self._server, self._t_secret)
        return b"\x01\x00" + b"\x00" * 72 + self._t_public + short + box

    def _opening(self) -> list[Command]:
        return [(b"HELLO", self.hello())]

    def receive(self, name: bytes, data: bytes) -> tuple[list[Command], bytes | None]:
        if self._step == 1 and name == b"WELCOME":
            return [(b"INITIATE", self._welcome(data))], None
        if self._step == 2 and name == b"READY":
            if len(data) < 8 + BOX:
                raise CryptoError("malformed CURVE READY")
            short = bytes(data[:8])
            self._peer_short_nonce(short)
            try:
                metadata = sodium.crypto_box_open_afternm(bytes(data[8:]), _READY_NONCE + short,
                                                          self._precom)
            except (_NaclError, ValueError, TypeError):
                raise CryptoError("CURVE READY box does not open") from None
            self._step = 3
            return [], bytes(metadata)
        raise RemoteProtocolError(f"CURVE: unexpected command {name!r}")

    def _welcome(self, data: bytes) -> bytes:
        if len(data) != WELCOME_SIZE - 8:
            raise CryptoError(f"CURVE WELCOME of {len(data) + 8} bytes (need {WELCOME_SIZE})")
        plain = _open(bytes(data[16:]), _WELCOME_NONCE + bytes(data[:16]), self._server,
                      self._t_secret, "WELCOME")
        self._server_t, self._cookie = plain[:KEY], plain[KEY:]
        self._precom = _precompute(self._server_t, self._t_secret, "WELCOME transient")
        vouch_long = os.urandom(16)
        vouch = _box_to(self._t_public + self._server, _VOUCH_NONCE + vouch_long,
                        self._server_t, self._secret, "WELCOME transient")
        short = self._next_nonce()
        box = sodium.crypto_box_afternm(self._public + vouch_long + vouch + self._metadata,
                                        _INITIATE_NONCE + short, self._precom)
        self._step = 2
        return self._cookie + short + box


class CurveServer(_Curve):
    """The CURVE server: its long-term key pair; asks ``authenticate`` about each client's
    long-term public key (Z85) once the vouch proved the client holds it."""

    as_server = True
    _send_prefix = _MESSAGE_S
    _recv_prefix = _MESSAGE_C

    def __init__(self, public: bytes, secret: bytes,
                 authenticate: Authenticate = allow_all) -> None:
        super().__init__()
        self._public = _check_key(public, "CURVE public key")
        self._secret = _check_key(secret, "CURVE secret key")
        self._authenticate = authenticate
        self._cookie_key = os.urandom(32)
        self._client_t = b""  # C'
        self._t_public, self._t_secret = b"", b""  # S', s' (made at HELLO)
        self.client_key = b""  # C, once INITIATE was read
        self.user_id = ""

    def receive(self, name: bytes, data: bytes) -> tuple[list[Command], bytes | None]:
        if self._step == 1 and name == b"HELLO":
            return [(b"WELCOME", self._hello(data))], None
        if self._step == 2 and name == b"INITIATE":
            metadata = self._initiate(data)
            short = self._next_nonce()
            box = sodium.crypto_box_afternm(self._metadata, _READY_NONCE + short, self._precom)
            self._step = 3
            return [(b"READY", short + box)], metadata
        raise RemoteProtocolError(f"CURVE: unexpected command {name!r}")

    def _hello(self, data: bytes) -> bytes:
        if len(data) != HELLO_SIZE - 6:
            raise CryptoError(f"CURVE HELLO of {len(data) + 6} bytes (need {HELLO_SIZE})")
        if data[0] != 1 or data[1] != 0:
            raise CryptoError(f"CURVE HELLO version {data[0]}.{data[1]} (need 1.0)")
        if any(data[2:74]):  # RFC 26: 72 zero bytes (against amplification)
            raise CryptoError("CURVE HELLO padding is not 72 zero bytes")
        self._client_t = bytes(data[74:106])
        short = bytes(data[106:114])
        self._peer_short_nonce(short)
        plain = _open(bytes(data[114:]), _HELLO_NONCE + short, self._client_t, self._secret,
                      "HELLO")
        if plain != b"\x00" * 64:
            raise CryptoError("CURVE HELLO signature is not 64 zero bytes")
        self._t_public, self._t_secret = keypair()
        cookie_long = os.urandom(16)
        cookie = cookie_long + sodium.crypto_secretbox(self._client_t + self._t_secret,
                                                       _COOKIE_NONCE + cookie_long,
                                                       self._cookie_key)
        welcome_long = os.urandom(16)
        box = _box_to(self._t_public + cookie, _WELCOME_NONCE + welcome_long, self._client_t,
                      self._secret, "HELLO transient")
        self._step = 2
        return welcome_long + box

    def _initiate(self, data: bytes) -> bytes:
        if len(data) < INITIATE_MIN - 9:
            raise CryptoError(f"CURVE INITIATE of {len(data) + 9} bytes (need >= {INITIATE_MIN})")
        cookie = bytes(data[:96])
        try:
            plain = sodium.crypto_secretbox_open(cookie[16:], _COOKIE_NONCE + cookie[:16],
                                                 self._cookie_key)
        except (_NaclError, ValueError, TypeError):
            raise CryptoError("CURVE INITIATE cookie does not open") from None
        if plain[:KEY] != self._client_t or plain[KEY:] != self._t_secret:
            raise CryptoError("CURVE INITIATE cookie is not ours")
        self._precom = _precompute(self._client_t, self._t_secret, "HELLO transient")
        # RFC 26: the server forgets the cookie key and its transient secret once INITIATE
        # arrived; the vouch below is opened with the transient secret first
        t_secret, self._t_secret, self._cookie_key = self._t_secret, b"", b""
        short = bytes(data[96:104])
        self._peer_short_nonce(short)
        try:
            inner = bytes(sodium.crypto_box_open_afternm(bytes(data[104:]),
                                                         _INITIATE_NONCE + short, self._precom))
        except (_NaclError, ValueError, TypeError):
            raise CryptoError("CURVE INITIATE box does not open") from None
        if len(inner) < KEY + 16 + 80:
            raise CryptoError("CURVE INITIATE too short for a vouch")
        client = inner[:KEY]
        vouch = _open(inner[KEY + 16:KEY + 96], _VOUCH_NONCE + inner[KEY:KEY + 16], client,
                      t_secret, "vouch")
        if vouch[:KEY] != self._client_t or vouch[KEY:] != self._public:
            raise CryptoError("CURVE vouch does not match this connection")
        self.client_key = client
        verdict = self._authenticate("CURVE", {"client_key": z85_encode(client)})
        if not verdict.allowed:
            raise AuthenticationFailed("CURVE", verdict.reason)
        self.user_id = verdict.user_id or z85_encode(client)  # who it is, for handover
        return inner[KEY + 96:]
