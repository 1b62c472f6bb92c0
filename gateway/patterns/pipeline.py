"""PUSH, PULL (ZMTP RFC 30; SP push0/pull0) and PAIR (ZMTP RFC 31; SP pair0, pair1), sans-IO.

No envelope on any of them: every ZMTP frame is body, an SP message is one body frame. The
engine does the rest: PUSH and PAIR load-balance over writable pipes and *wait* when none is
(back-pressure, as libzmq's ``lb_t`` and nng's push0 block); PULL fair-queues (the engine's
per-pipe turns); PAIR is exclusive (:attr:`Pattern.exclusive`: a second peer is refused).

SP pair1 (0x11) carries a 32-bit big-endian header word whose low byte is a hop count (nng
``pair1.c``): on receive a message shorter than 4 bytes or with a header above 0xff closes the
pipe (nng counts it ``rx_malformed``), a hop count above the socket's ``ttl`` drops the message
(``ttl``); cooked pair1 strips the word, raw pair1 keeps it as the message's one hop. On send,
cooked pair1 starts at 0 and raw pair1 takes the application's word (below 0xff); the count is
incremented as the message leaves, exactly as nng does, so a cooked sender's messages carry 1.
"""

from __future__ import annotations

from gateway.errors import Drop, LocalProtocolError, RemoteProtocolError, StateError
from gateway.message import Message, one_body
from gateway.patterns.reqrep import SP, Pattern

_ZERO_HOPS = b"\x00\x00\x00\x00"


class _Plain(Pattern):
    """No envelope: received frames are the body; hops of a sent message are ignored."""

    enveloped = False

    def receive(self, routing_id: bytes, family: str, parts: tuple[bytes, ...]) -> Message | None:
        return Message((), parts)

    def prepare_send(self, msg: Message) -> tuple[bytes | None, Message]:
        if not msg.body:
            raise LocalProtocolError(f"a {self.kind} message needs at least one frame")
        return None, msg if not msg.hops else Message((), msg.body)


class Push(_Plain):
    def receive(self, routing_id: bytes, family: str, parts: tuple[bytes, ...]) -> Message | None:
        raise Drop("unexpected-message")  # a PULL never sends

    def check_recv(self) -> None:
        raise StateError("PUSH cannot receive (ENOTSUP)")


class Pull(_Plain):
    def check_send(self) -> None:
        raise StateError("PULL cannot send (ENOTSUP)")

    def prepare_send(self, msg: Message) -> tuple[bytes | None, Message]:
        self.check_send()
        return None, msg


class Pair(_Plain):
    """ZMTP PAIR and SP pair0: one peer, messages both ways."""

    exclusive = True


class Pair1(Pair):
    """SP pair1: the hop-count header word (see the module's docstring)."""

    def receive(self, routing_id: bytes, family: str, parts: tuple[bytes, ...]) -> Message | None:
        payload = parts[0]
        if len(payload) < 4 or payload[0] or payload[1] or payload[2]:
            raise RemoteProtocolError("pair1 message without a hop-count header (nng closes the pipe)")
        if payload[3] > self.ttl:
            raise Drop("ttl")
        if self.raw:
            return Message((payload[:4],), (payload[4:],))
        return Message((), (payload[4:],))

    def prepare_send(self, msg: Message) -> tuple[bytes | None, Message]:
        one_body(SP, msg.body)
        if not self.raw:
            return None, Message((_ZERO_HOPS,), msg.body)
        hops = msg.hops
        if len(hops) != 1 or len(hops[0]) != 4 or hops[0][:3] != b"\x00\x00\x00" or hops[0][3] >= 0xFF:
            raise LocalProtocolError("raw pair1 needs one 4-byte hop-count word below 0xff as header")
        return None, msg

    def envelope(self, msg: Message, family: str) -> Message:
        if family != SP:  # the engine never opens a pair1 ZMTP pipe
            raise LocalProtocolError("pair1 exists on SP only")
        count = msg.hops[0][3] + 1  # nng increments as it sends
        return Message((bytes((0, 0, 0, count)),), msg.body)


__all__ = ["Pair", "Pair1", "Pull", "Push"]
