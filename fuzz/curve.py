"""Harness ``curve``: the CURVE mechanism (``gateway.wire.zmtp_curve``) inside the ZMTP codec,
both roles, with fuzzed content *inside valid boxes*: the harness plays the other side with
real keys and seals whatever the input says with the right nonce, so the fuzzer reaches the
parsers behind the crypto (the HELLO signature, the cookie, the vouch, the metadata, MESSAGE
flags and payloads) instead of stopping at a box that does not open.

Input: ``target kind minor auth`` then steps, each ``op`` + its fields (see ``_server_steps``
and ``_client_steps``). ``target`` 0: our CurveServer, the harness is the client (HELLO,
INITIATE, MESSAGE, a plain command, raw bytes); 1: our CurveClient, the harness is the server
(WELCOME, READY, MESSAGE, ...); 2: our CurveServer fed raw bytes after a valid greeting (the
seeds hold libzmq's HELLO, made for the fixed server key).

Oracles, besides "only a ``RemoteProtocolError`` leaves the codec":

* the handshake completes only when every security-relevant field was honest: the HELLO
  signature and version, the cookie the server made, a vouch that holds ``C' + S`` and opens
  with the claimed client key, strictly increasing short nonces, a WELCOME from the server's
  long-term key; and a command that is not honest there is refused in its own step;
* ``authenticate`` is asked exactly once, about the key the INITIATE claims, and only after
  the vouch proved it; a refusal raises ``AuthenticationFailed`` and queues ZMTP ERROR;
* our client's own commands are what RFC 26 says: a 200-byte HELLO whose box holds 64 zeros
  for the server key, an INITIATE echoing the cookie with a vouch of ``C' + S`` from ``C``;
* after the handshake a MESSAGE with a valid box and a fresh nonce is delivered, in order and
  unchanged; a replayed nonce, a box that does not open or reserved outer flag bits are
  refused. (Outer MORE, a command inside the box and other oddities are left unspecified:
  the harness then only checks that nothing but a protocol error escapes.)
"""

from __future__ import annotations

from dataclasses import dataclass

from nacl import bindings as sodium

from gateway.engine.codecs import zmtp_role
from gateway.wire import z85
from gateway.wire.zmtp import ZmtpCodec
from gateway.wire.zmtp_curve import CurveClient, CurveServer
from gateway.wire.zmtp_mechanism import AuthenticationFailed

from ._data import Data, Finding
from ._zmtp_sec import (
    CLIENT,
    CLIENT_T,
    KINDS,
    OTHER,
    PEER_TYPES,
    SERVER,
    SERVER_T,
    Auth,
    Delivered,
    Step,
    check_step,
    command,
    commands_in,
    encode_input,
    feed,
    frame,
    metadata,
    ops,
    run,
    split_command,
    start,
    u64,
)

NAME = "curve"

__all__ = ["KINDS", "NAME", "encode_input", "one_input"]
_MESSAGE = b"\x07MESSAGE"


@dataclass
class _Sealed:
    """One MESSAGE the harness sealed, and what a correct codec does with it."""

    nonce: int
    must_refuse: bool  # a box that does not open, a nonce not fresh, reserved outer bits
    frame: bytes | None  # the frame it delivers (None: nothing the model knows)
    more: bool
    modelled: bool  # outer flags 0, inner flags data (MORE or not), a well-formed body

    def record(self, delivered: Delivered, step: Step, handshake_done: bool,
               peer_last: int) -> int:
        """What the codec took, into the model; the peer's last nonce after it."""
        if step.refused:
            return peer_last
        if not self.modelled:
            delivered.modelled = False
        elif handshake_done and self.frame is not None:
            delivered.sent.append((self.frame, self.more))
        return max(peer_last, self.nonce)


class _Sealer:
    """The harness's side of the MESSAGE boxes after the handshake."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.precom = b""
        self.next = 1  # our next short nonce

    def message(self, data: Data, peer_last: int) -> tuple[bytes, _Sealed]:
        """One MESSAGE frame from the input; and what a correct codec must do with it."""
        t = data.byte()
        inner = data.byte() if t & 1 else (0x01 if t & 2 else 0x00)
        payload = data.short()
        if t & 4:
            n = data.uint(8)
        elif t & 8:
            n = max(peer_last, 1)  # a replay of the last nonce
        else:
            n = max(self.next, peer_last + 1)
        self.next = max(self.next, n + 1)
        box = bytearray(sodium.crypto_box_afternm(bytes((inner,)) + payload,
                                                  self.prefix + u64(n), self.precom)
                        if self.precom else bytes(17 + len(payload)))
        corrupt = bool(t & 16)
        if corrupt:
            box[data.byte() % len(box)] ^= 1 + data.byte() % 255
        outer = data.byte() & 0xFD if t & 32 else 0
        body = _MESSAGE + u64(n) + bytes(box)
        if t & 64:  # a broken MESSAGE: name or length
            body = data.short()
        fresh = n > peer_last
        plain = outer == 0 and inner in (0, 1) and not t & 64
        sealed = _Sealed(n, corrupt or not fresh or bool(outer & 0xF8) or not self.precom,
                         payload if plain and fresh and not corrupt and self.precom else None,
                         bool(inner & 1), plain)
        return frame(outer, body), sealed

    def other_op(self, op: int, data: Data, peer_last: int,
                 handshake_done: bool) -> tuple[bytes, _Sealed | None, bool]:
        """Ops 2-4, the same for both roles: a MESSAGE (2), a plain command frame of any name
        (3; an unknown one after READY: skipped), raw bytes (4); (wire, sealed, must_refuse)."""
        if op == 2:
            wire, sealed = self.message(data, peer_last)
            return wire, sealed, sealed.must_refuse or not handshake_done
        if op == 3:
            return command(data.short(), data.short()), None, False
        return data.short(), None, False


def _after(op: int, sealed: _Sealed | None, step: Step, codec: ZmtpCodec,
           delivered: Delivered, peer_last: int) -> int:
    """The model after ops 2-4 (the same for both roles); the peer's last nonce after it."""
    if sealed is not None:
        peer_last = sealed.record(delivered, step, codec.handshake_done, peer_last)
    if op in (3, 4) and step.events:
        delivered.modelled = False
    return peer_last


def _server_steps(data: Data, kind: str, allow: bool, minor: int, strict: bool) -> None:
    """Our CurveServer; the harness is the client."""
    auth = Auth(allow)
    codec = ZmtpCodec(zmtp_role(kind, False),
                      security=CurveServer(SERVER[0], SERVER[1], auth))
    start(codec, minor, False)
    seal = _Sealer(b"CurveZMQMESSAGEC")
    server_t = b""
    cookie = b""
    hello_ok = False
    peer_last = 0  # the last short nonce the server took from us
    n = 0
    delivered = Delivered()
    synced = True  # every step's bytes were whole frames
    for op in ops(data):
        must_refuse = False
        honest_initiate = False
        claimed = b""
        sealed = None
        if op == 0:  # HELLO
            t = data.byte()
            version = data.take(2) if t & 1 else b"\x01\x00"
            padding = data.take(72).ljust(72, b"\x00") if t & 2 else bytes(72)
            n = data.uint(8) if t & 4 else seal.next
            signature = data.short() if t & 8 else bytes(64)
            box = sodium.crypto_box(signature, b"CurveZMQHELLO---" + u64(n), SERVER[0],
                                    CLIENT_T[1])
            body = version + padding + CLIENT_T[0] + u64(n) + box
            name = data.short() if t & 32 else b"HELLO"
            if t & 16:
                body = data.short()
            seal.next = max(seal.next, n + 1)
            honest = (name == b"HELLO" and version == b"\x01\x00" and signature == bytes(64)
                      and n > peer_last and not t & 16 and not hello_ok)
            must_refuse = not honest  # (whether the padding is checked is left open)
            wire = command(name, body)
        elif op == 1:  # INITIATE
            t = data.byte()
            real_cookie = cookie or bytes(96)
            sent_cookie = real_cookie
            if t & 1:
                flipped = bytearray(real_cookie)
                flipped[data.byte() % 96] ^= 1 + data.byte() % 255
                sent_cookie = bytes(flipped)
            n = data.uint(8) if t & 2 else seal.next
            seal.next = max(seal.next, n + 1)
            claimed, signer = (OTHER if t & 4 else CLIENT)[0], (OTHER if t & 4 else CLIENT)[1]
            if t & 16:  # a forged vouch: claims CLIENT, made with another secret key
                claimed, signer = CLIENT[0], OTHER[1]
            vouch_plain = data.short() if t & 8 else CLIENT_T[0] + SERVER[0]
            vouch_nonce = data.take(16).ljust(16, b"\x00")
            vouch = (sodium.crypto_box(vouch_plain, b"VOUCH---" + vouch_nonce, server_t, signer)
                     if server_t else bytes(80))
            meta = data.short() if t & 32 else metadata(data.choice(PEER_TYPES))
            plain = claimed + vouch_nonce + vouch + meta
            if t & 64:
                plain = data.short()
            precom = (bytes(sodium.crypto_box_beforenm(server_t, CLIENT_T[1])) if server_t
                      else bytes(32))
            body = sent_cookie + u64(n) + sodium.crypto_box_afternm(
                plain, b"CurveZMQINITIATE" + u64(n), precom)
            if t & 128:
                body = data.short()
            honest_initiate = (hello_ok and sent_cookie == cookie and n > peer_last
                               and vouch_plain == CLIENT_T[0] + SERVER[0]
                               and signer == (OTHER if claimed == OTHER[0] else CLIENT)[1]
                               and not t & (64 | 128) and not codec.handshake_done)
            must_refuse = not honest_initiate
            wire = command(b"INITIATE", body)
            if server_t:
                seal.precom = precom
        else:
            wire, sealed, must_refuse = seal.other_op(op, data, peer_last, codec.handshake_done)
        asked_before = len(auth.asked)
        step = feed(codec, wire, strict)
        out = codec.data_to_send()
        delivered.got += step.messages
        asked = auth.asked[asked_before:]
        if op == 4 and codec.partial:  # a frame cut short: the next steps' bytes finish it
            synced = delivered.modelled = False
        if not synced:  # step boundaries mean nothing any more: only "no crash" is left
            if step.refused:
                break
            continue
        # -- what this step must have done
        if asked and not honest_initiate:
            raise Finding(f"authenticate was asked about {asked!r} after an INITIATE whose "
                          "vouch or cookie is not honest")
        if op == 1 and honest_initiate:
            if asked != [("CURVE", {"client_key": z85.encode(claimed)})]:
                raise Finding(f"an honest INITIATE for {z85.encode(claimed)} asked {asked!r}")
            if not allow and not isinstance(step.error, AuthenticationFailed):
                raise Finding(f"a refused client was not refused: {step!r:.160}")
            if not allow and not out.endswith(command(b"ERROR", b"\x03400")):
                raise Finding(f"no ZMTP ERROR queued for a refused client: {out!r:.80}")
        if check_step(op, step, must_refuse, 1, honest_initiate and allow, kind) is not None:
            ready = [b for f, b in commands_in(out) if f & 0x04]
            if not ready or split_command(ready[-1])[0] != b"READY":
                raise Finding(f"no READY after a completed handshake: {out!r:.80}")
        # -- the harness's view of the server
        if op == 0 and not step.refused:
            for _, body in commands_in(out):
                name, rest = split_command(body)
                if name == b"WELCOME":
                    opened = sodium.crypto_box_open(rest[16:], b"WELCOME-" + rest[:16],
                                                    SERVER[0], CLIENT_T[1])
                    server_t, cookie = bytes(opened[:32]), bytes(opened[32:])
                    hello_ok = True
                    peer_last = max(peer_last, n)
        elif op == 1 and not step.refused and honest_initiate:
            peer_last = max(peer_last, n)
        peer_last = _after(op, sealed, step, codec, delivered, peer_last)
        if step.refused:
            break
    delivered.check()


def _client_steps(data: Data, kind: str, as_server: bool, minor: int, strict: bool) -> None:
    """Our CurveClient; the harness is the server."""
    codec = ZmtpCodec(zmtp_role(kind, False),
                      security=CurveClient(CLIENT[0], CLIENT[1], SERVER[0]))
    first = commands_in(start(codec, minor, as_server))
    if len(first) != 1 or len(first[0][1]) != 200 or split_command(first[0][1])[0] != b"HELLO":
        raise Finding(f"our CURVE client's first command is not a 200-byte HELLO: {first!r:.80}")
    hello = first[0][1]
    client_t = hello[80:112]
    if (hello[6:8] != b"\x01\x00" or hello[8:80] != bytes(72)
            or sodium.crypto_box_open(hello[120:], b"CurveZMQHELLO---" + hello[112:120],
                                      client_t, SERVER[1]) != bytes(64)):
        raise Finding("our CURVE client's HELLO is not RFC 26's")
    seal = _Sealer(b"CurveZMQMESSAGES")
    welcome_ok = False
    ready_ok = False
    peer_last = 0
    delivered = Delivered()
    synced = True
    precom = bytes(sodium.crypto_box_beforenm(client_t, SERVER_T[1]))
    server_t = cookie = b""
    n = 0
    for op in ops(data):
        sealed = None
        must_refuse = False
        honest = False
        if op == 0:  # WELCOME
            t = data.byte()
            long_nonce = data.take(16).ljust(16, b"\x00")
            server_t = data.take(32).ljust(32, b"\x00") if t & 1 else SERVER_T[0]
            cookie = data.take(96).ljust(96, b"\x00")
            plain = server_t + cookie
            if t & 2:
                plain = data.short()
            server_t, cookie = plain[:32], plain[32:]  # what the client takes, if it does
            signer = OTHER[1] if t & 4 else SERVER[1]
            body = long_nonce + sodium.crypto_box(plain, b"WELCOME-" + long_nonce, client_t,
                                                  signer)
            name = data.short() if t & 16 else b"WELCOME"
            if t & 8:
                body = data.short()
            honest = (name == b"WELCOME" and len(plain) == 128 and signer == SERVER[1]
                      and not t & 8 and not welcome_ok)
            must_refuse = not honest
            wire = command(name, body)
        elif op == 1:  # READY
            t = data.byte()
            n = data.uint(8) if t & 1 else seal.next
            seal.next = max(seal.next, n + 1)
            meta = data.short() if t & 2 else metadata(data.choice(PEER_TYPES),
                                                       None if t & 8 else b"")
            box = bytearray(sodium.crypto_box_afternm(meta, b"CurveZMQREADY---" + u64(n),
                                                      precom))
            if t & 4:
                box[data.byte() % len(box)] ^= 1 + data.byte() % 255
            body = u64(n) + bytes(box)
            if t & 16:
                body = data.short()
            honest = (welcome_ok and server_t == SERVER_T[0] and n > peer_last
                      and not t & (4 | 16) and not ready_ok)
            must_refuse = not honest
            wire = command(b"READY", body)
        else:
            wire, sealed, must_refuse = seal.other_op(op, data, peer_last, codec.handshake_done)
        step = feed(codec, wire, strict)
        out = codec.data_to_send()
        delivered.got += step.messages
        if op == 4 and codec.partial:  # a frame cut short: the next steps' bytes finish it
            synced = delivered.modelled = False
        if not synced:
            if step.refused:
                break
            continue
        check_step(op, step, must_refuse, 1, honest, kind)
        if op == 0 and honest and not step.refused:
            welcome_ok = True
            initiate = [b for f, b in commands_in(out) if f & 0x04]
            name, rest = split_command(initiate[0]) if initiate else (b"", b"")
            if name != b"INITIATE" or rest[:96] != cookie:
                raise Finding(f"our INITIATE does not echo the cookie: {initiate!r:.80}")
            if server_t == SERVER_T[0]:
                inner = sodium.crypto_box_open(rest[104:], b"CurveZMQINITIATE" + rest[96:104],
                                               client_t, SERVER_T[1])
                vouch = sodium.crypto_box_open(inner[48:128], b"VOUCH---" + inner[32:48],
                                               inner[:32], SERVER_T[1])
                if inner[:32] != CLIENT[0] or vouch != client_t + SERVER[0]:
                    raise Finding("our INITIATE's vouch is not C' + S from C")
                seal.precom = precom
        elif op == 1 and honest and not step.refused:
            ready_ok = True
            peer_last = max(peer_last, n)
        peer_last = _after(op, sealed, step, codec, delivered, peer_last)
        if step.refused:
            break
    delivered.check()


def one_input(buf: bytes, strict: bool = False) -> None:
    run(buf, strict, KINDS, _server_steps, _client_steps,
        lambda auth: CurveServer(SERVER[0], SERVER[1], auth))
