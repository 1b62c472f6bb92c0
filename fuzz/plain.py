"""Harness ``plain``: the PLAIN mechanism (``gateway.wire.zmtp_plain``) inside the ZMTP codec,
both roles; the harness plays the other side from the input.

Input: ``target kind minor auth`` then steps, each ``op`` + its fields. ``target`` 0: our
PlainServer, the harness is the client (HELLO with any user name and password, INITIATE with
any metadata, data frames, any command, raw bytes); 1: our PlainClient with credentials from the
input, the harness is the server (WELCOME, READY, ...); 2: our PlainServer fed raw bytes after a
valid greeting (the seeds hold libzmq's HELLO and INITIATE).

Oracles, besides "only a ``RemoteProtocolError`` leaves the codec":

* ``authenticate`` is asked exactly once, with the user name and password the HELLO holds, and
  only for a well-formed HELLO at the start; a refusal raises ``AuthenticationFailed`` and
  queues ZMTP ERROR, an acceptance sends WELCOME;
* the handshake completes only after an accepted HELLO and an INITIATE (server), a WELCOME and
  a READY (client), with a Socket-Type the role accepts, and then READY (server) went out; an
  honest INITIATE/READY with a legal Socket-Type does complete it;
* a command out of order, or a data frame before the handshake, is refused in its own step;
* our client's HELLO holds exactly its credentials and its INITIATE its metadata;
* after the handshake data frames are delivered in order and unchanged.
"""

from __future__ import annotations

from gateway.engine.codecs import zmtp_role
from gateway.wire.zmtp import ZmtpCodec
from gateway.wire.zmtp_mechanism import AuthenticationFailed
from gateway.wire.zmtp_plain import PlainClient, PlainServer

from . import _zmtp_sec as sec
from ._data import Data, Finding

NAME = "plain"

KINDS = sec.KINDS
encode_input = sec.encode_input


def parse_hello(body: bytes) -> tuple[bytes, bytes] | None:
    """RFC 24's HELLO data, or None when it is not exactly ``len user len password``."""
    if not body or 1 + body[0] >= len(body):
        return None
    n = body[0]
    if 2 + n + body[1 + n] != len(body):
        return None
    return body[1:1 + n], body[2 + n:]


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _common_op(op: int, data: Data, handshake_done: bool) -> tuple[bytes, bool, bytes, bool]:
    """Ops 2-4, the same for both roles: (wire, must_refuse, data frame payload, MORE)."""
    if op == 2:  # a data frame: refused before the handshake
        more = data.flag()
        payload = data.short()
        return sec.frame(int(more), payload), not handshake_done, payload, more
    if op == 3:  # any command
        return sec.command(data.short(), data.short()), False, b"", False
    return data.short(), False, b"", False  # raw bytes


def _synced(op: int, step: sec.Step, codec: ZmtpCodec, did: object) -> bool:
    """False when a command of any name or raw bytes did something, or left a frame cut
    short: from then on the model's step boundaries mean nothing."""
    return not (op >= 3 and (codec.partial or step.events or did))


def _model(delivered: sec.Delivered, op: int, step: sec.Step, taken: bool,
           sent: tuple[bytes, bool]) -> None:
    """A data frame (op 2) the codec had to take after the handshake goes into the model."""
    if op == 2 and taken and not step.refused:
        delivered.sent.append(sent)


def _server_steps(data: Data, kind: str, allow: bool, minor: int, strict: bool) -> None:
    auth = sec.Auth(allow)
    codec = ZmtpCodec(zmtp_role(kind, False), security=PlainServer(auth))
    sec.start(codec, minor, False)
    hello_ok = False
    delivered = sec.Delivered()
    synced = True
    for op in sec.ops(data):
        creds = None
        honest = legal = False
        payload, more = b"", False
        if op == 0:  # HELLO
            t = data.byte()
            user, password = data.short(), data.short()
            body = bytes((len(user),)) + user + bytes((len(password),)) + password
            if t & 1:
                body += data.short()
            if t & 2:
                body = data.short()
            name = data.short() if t & 4 else b"HELLO"
            creds = parse_hello(body)
            honest = name == b"HELLO" and creds is not None and not hello_ok
            must_refuse = not honest and not codec.handshake_done  # after it: unknown, skipped
            wire = sec.command(name, body)
        elif op == 1:  # INITIATE
            t = data.byte()
            peer = data.choice(sec.PEER_TYPES)
            meta = data.short() if t & 1 else sec.metadata(peer, data.short())
            honest = hello_ok and not codec.handshake_done and not t & 1
            legal = honest and peer in sec.LEGAL_PEERS[kind]
            must_refuse = not hello_ok
            wire = sec.command(b"INITIATE", meta)
        else:
            wire, must_refuse, payload, more = _common_op(op, data, codec.handshake_done)
        before = len(auth.asked)
        step = sec.feed(codec, wire, strict)
        out = codec.data_to_send()
        asked = auth.asked[before:]
        delivered.got += step.messages
        synced = synced and _synced(op, step, codec, asked or out)
        if not synced:
            delivered.modelled = False
            if step.refused:
                break
            continue
        if asked and not (op == 0 and honest):
            raise Finding(f"authenticate was asked {asked!r} on op {op}")
        if op == 0 and honest:
            assert creds is not None
            want = [("PLAIN", {"username": _text(creds[0]), "password": _text(creds[1])})]
            if asked != want:
                raise Finding(f"authenticate got {asked!r}, the HELLO held {want!r}")
            if not allow:
                if not isinstance(step.error, AuthenticationFailed):
                    raise Finding(f"a refused user was not refused: {step!r:.160}")
                if not out.endswith(sec.command(b"ERROR", b"\x03400")):
                    raise Finding(f"no ZMTP ERROR queued for a refused user: {out!r:.80}")
            elif step.refused or sec.command(b"WELCOME", b"") not in out:
                raise Finding(f"an accepted user got no WELCOME: {out!r:.80} {step!r:.80}")
            else:
                hello_ok = True
        if sec.check_step(op, step, must_refuse, 1, honest, kind) is not None:
            sent = [sec.split_command(b) for f, b in sec.commands_in(out) if f & 0x04]
            if not sent or sent[-1] != (b"READY", codec.metadata()):
                raise Finding(f"no READY with our metadata after the handshake: {out!r:.80}")
        elif legal:
            raise Finding("an honest INITIATE with a legal Socket-Type did not complete")
        _model(delivered, op, step, codec.handshake_done and not must_refuse, (payload, more))
        if step.refused:
            break
    delivered.check()


def _client_steps(data: Data, kind: str, as_server: bool, minor: int, strict: bool) -> None:
    user, password = data.short(), data.short()
    codec = ZmtpCodec(zmtp_role(kind, False), security=PlainClient(user, password))
    first = sec.commands_in(sec.start(codec, minor, as_server))
    hello = bytes((len(user),)) + user + bytes((len(password),)) + password
    if [sec.split_command(b) for _, b in first] != [(b"HELLO", hello)]:
        raise Finding(f"our PLAIN client's first command is not HELLO {hello!r}: {first!r:.80}")
    welcome_ok = False
    delivered = sec.Delivered()
    synced = True
    for op in sec.ops(data):
        honest = legal = False
        payload, more = b"", False
        if op == 0:  # WELCOME
            t = data.byte()
            body = data.short() if t & 1 else b""
            name = data.short() if t & 2 else b"WELCOME"
            honest = name == b"WELCOME" and not body and not welcome_ok
            must_refuse = not honest and not codec.handshake_done
            wire = sec.command(name, body)
        elif op == 1:  # READY
            t = data.byte()
            peer = data.choice(sec.PEER_TYPES)
            meta = data.short() if t & 1 else sec.metadata(peer, None)
            honest = welcome_ok and not codec.handshake_done and not t & 1
            legal = honest and peer in sec.LEGAL_PEERS[kind]
            must_refuse = not welcome_ok or codec.handshake_done
            wire = sec.command(b"READY", meta)
        else:
            wire, must_refuse, payload, more = _common_op(op, data, codec.handshake_done)
        step = sec.feed(codec, wire, strict)
        out = codec.data_to_send()
        delivered.got += step.messages
        synced = synced and _synced(op, step, codec, out)
        if not synced:
            delivered.modelled = False
            if step.refused:
                break
            continue
        if op == 0 and honest:
            sent = [sec.split_command(b) for f, b in sec.commands_in(out) if f & 0x04]
            if step.refused or sent != [(b"INITIATE", codec.metadata())]:
                raise Finding(f"no INITIATE with our metadata after WELCOME: {out!r:.80}")
            welcome_ok = True
        if sec.check_step(op, step, must_refuse, 1, honest, kind) is None and legal:
            raise Finding("an honest READY with a legal Socket-Type did not complete")
        _model(delivered, op, step, codec.handshake_done and not must_refuse, (payload, more))
        if step.refused:
            break
    delivered.check()


def one_input(buf: bytes, strict: bool = False) -> None:
    sec.run(buf, strict, KINDS, _server_steps, _client_steps, PlainServer)
