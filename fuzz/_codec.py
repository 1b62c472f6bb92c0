"""What the two codec harnesses share: a read of a whole stream with ``next_event`` alone, with
the rules no peer can break checked on the way, and the encode/decode round trip."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.errors import ProtocolError
from gateway.wire.events import HandshakeComplete

from ._data import Finding

MAX_EVENTS = 10_000


def read_all(codec: Any, chunks: list[bytes], check: Callable[[Any], None]) -> list[object]:
    """Every event of ``chunks``: one ``HandshakeComplete`` before any message, every message a
    non-empty tuple of ``bytes`` within ``max_message_size``, nothing after an error; ``check``
    sees each event too (the codec's own rules)."""
    events: list[object] = []
    done = False
    limit = codec.max_message_size
    for chunk in chunks:
        codec.receive_data(chunk)
        try:
            for _ in range(MAX_EVENTS):
                ev = codec.next_event()
                if ev is None:
                    break
                events.append(ev)
                if isinstance(ev, HandshakeComplete):
                    if done:
                        raise Finding("a second HandshakeComplete")
                    done = True
                elif type(ev) is tuple:
                    if not done:
                        raise Finding(f"a message before the handshake: {ev!r:.80}")
                    if not ev or any(type(f) is not bytes for f in ev):
                        raise Finding(f"a message that is not a tuple of bytes: {ev!r:.80}")
                    if sum(map(len, ev)) > limit:
                        raise Finding(f"a message of {sum(map(len, ev))} bytes passed the "
                                      f"limit {limit}")
                check(ev)
        except ProtocolError as exc:
            try:  # the pipe is closed after an error; the codec must not come back to life
                again = codec.next_event()
            except ProtocolError:
                again = None
            if again is not None:
                raise Finding(f"an event after {exc!r}: {again!r:.80}") from None
            break
    return events


def round_trip(make_open: Callable[[], Any], messages: list[tuple[bytes, ...]]) -> None:
    """``messages``, encoded by one open codec and decoded by another, come out unchanged."""
    if not messages:
        return
    sender, receiver = make_open(), make_open()
    receiver.receive_data(b"".join(sender.send_message(m) for m in messages))
    got = [receiver.next_event() for _ in messages]
    if got != messages:
        raise Finding(f"round trip changed messages: sent {messages!r:.120}, got {got!r:.120}")
