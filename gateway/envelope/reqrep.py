"""Request-reply envelopes across the families, as pure functions on
:class:`~gateway.message.Message` (docs/design.md, "Translation").

SP clients -> ZMTP servers (stateless)
    :func:`sp_to_zmtp` turns the SP backtrace ``[pipe;...;rid]`` into one 4-byte frame per hop
    plus the empty delimiter; :func:`zmtp_to_sp_reply` checks the envelope a ZeroMQ server sends
    back (every frame 4 bytes, top bit clear except on the last one, then the delimiter) and
    drops the delimiter again.

ZMTP clients -> SP servers (bounded state)
    :func:`zmtp_to_sp_request` parks the ZeroMQ envelope (ROUTER identity, any app envelope
    frames, and the delimiter when there was one) in a :class:`~gateway.envelope.TokenTable`
    under a freshly minted 4-byte token with the top bit set, and sends ``[token]`` + body on
    SP; :func:`sp_to_zmtp_reply` restores the envelope from the token of the reply.

Within one family, :func:`same_family` and :func:`same_family_reply`.
"""

from __future__ import annotations

from gateway.envelope.errors import EnvelopeError
from gateway.envelope.tokens import TokenTable
from gateway.message import DELIMITER, Message, sp_body_fault

__all__ = ["same_family", "same_family_reply", "sp_to_zmtp", "sp_to_zmtp_reply",
           "zmtp_to_sp_reply", "zmtp_to_sp_request"]

_new = tuple.__new__  # Message(...) without the NamedTuple __new__ wrapper (hot path)
_TOP = 0x80


def sp_to_zmtp(msg: Message, now: float = 0.0) -> Message:
    """An SP request ``([pipe;...;rid][body])`` as ZMTP frames ``pipe, ..., rid, "", body``.

    >>> sp_to_zmtp(Message((b"\\x00\\x00\\x00\\x01", b"\\x80\\x00\\x00\\x07"), (b"hi",)))
    Message(hops=(b'\\x00\\x00\\x00\\x01', b'\\x80\\x00\\x00\\x07', b''), body=(b'hi',))

    The raw SP socket already guarantees the backtrace shape; only the request id is checked
    (cheaply) so that a caller mixing up families fails loudly.
    """
    hops = msg[0]
    if not hops:
        raise EnvelopeError("no-request-id", "empty SP backtrace")
    rid = hops[-1]
    if len(rid) != 4 or not rid[0] & _TOP:
        raise EnvelopeError("no-request-id", f"last hop {rid!r}")
    return _new(Message, (hops + (DELIMITER,), msg[1]))


def zmtp_to_sp_reply(msg: Message, now: float = 0.0) -> Message:
    """A ZeroMQ server's reply ``pipe, ..., rid, "", body`` back to ``([pipe;...;rid][body])``.

    The envelope must be what :func:`sp_to_zmtp` produced: 4-byte words, top bit clear on all
    but the last, top bit set on the last, then the delimiter; the body exactly one frame.
    Anything else is bad input from the server (:class:`EnvelopeError`).
    """
    hops, body = msg
    if len(hops) == 3 and len(body) == 1:  # one pipe id and the request id: the usual
        pipe, rid, delimiter = hops
        if (delimiter == DELIMITER and len(pipe) == 4 and len(rid) == 4
                and not pipe[0] & _TOP and rid[0] & _TOP):
            return _new(Message, ((pipe, rid), body))
    if len(body) > 1:  # (before the envelope: the reason it always had)
        raise EnvelopeError("multi-frame-body", f"{len(body)} frames")
    if not hops or hops[-1] != DELIMITER:
        raise EnvelopeError("no-delimiter", f"envelope {hops!r}")
    words = hops[:-1]
    if not words:
        raise EnvelopeError("no-request-id", "no envelope frame before the delimiter")
    last = len(words) - 1
    for i, w in enumerate(words):
        if len(w) != 4:
            raise EnvelopeError("not-4-bytes", f"envelope frame {i} is {len(w)} bytes")
        if i == last:
            if not w[0] & _TOP:
                raise EnvelopeError("no-request-id", f"last envelope frame {w!r}")
        elif w[0] & _TOP:
            raise EnvelopeError("bad-backtrace", f"frame {i} {w!r} has the top bit set")
    fault = sp_body_fault(body)
    if fault:
        raise EnvelopeError(fault, f"{len(body)} frames")
    return _new(Message, (words, body))


def zmtp_to_sp_request(msg: Message, table: TokenTable, now: float) -> Message:
    """A ZeroMQ request (hops = ROUTER identity, app envelope, delimiter if any) as SP.

    Returns ``([token][body])``; the hops wait in ``table`` for the reply. The body must be
    one frame (the device asks the ``gateway_body_codec`` hook first).
    """
    hops, body = msg
    fault = sp_body_fault(body)
    if fault:
        if not body and hops[-1:] == (b"",) and len(hops) == 2:  # [identity][empty]: a probe
            raise EnvelopeError("probe", "an empty probe message (ZMQ_PROBE_ROUTER)")
        raise EnvelopeError(fault, f"{len(body)} frames")
    return _new(Message, ((table.mint(hops, now),), body))


def sp_to_zmtp_reply(msg: Message, table: TokenTable, now: float) -> Message:
    """An SP reply ``([token][body])`` back to the ZeroMQ envelope parked under ``token``.

    A DEALER client that sent no delimiter gets back exactly its identity + body frames, as it
    sent them: the parked hops simply hold no delimiter.
    """
    hops, body = msg
    if len(hops) != 1:
        if not hops:
            raise EnvelopeError("no-request-id", "reply without a token")
        raise EnvelopeError("bad-backtrace", f"{len(hops)} hops where one token was expected")
    token = hops[0]
    if len(token) != 4:
        raise EnvelopeError("not-4-bytes", f"token {token!r}")
    if not token[0] & _TOP:
        raise EnvelopeError("no-request-id", f"token {token!r} lacks the top bit")
    return _new(Message, (table.pop(token, now), body))


def same_family(msg: Message, now: float) -> Message:
    """A request between two peers of one family: untouched (a forwarder may skip the call)."""
    return msg


def same_family_reply(msg: Message, now: float) -> Message:
    """A reply between two peers of one family: untouched, but it must carry the routing hop
    the front routes it by."""
    if not msg[0]:  # same family: the front routes by the first hop
        raise EnvelopeError("no-envelope", "reply without a routing hop")
    return msg
