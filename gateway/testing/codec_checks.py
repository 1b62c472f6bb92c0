"""Checks for a sans-IO wire codec (``gateway.wire.WireCodec``): the gateway's own codecs and a
third-party wire plugin's run the same ones. No pytest or hypothesis import here; a test feeds
them its own generated input::

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.binary(max_size=200), max_size=6))
    def test_garbage(chunks):
        feed_garbage(MyCodec(...), chunks)
"""

from __future__ import annotations

from gateway.errors import ProtocolError
from gateway.wire import WireCodec

__all__ = ["chunked", "feed_garbage"]

MAX_EVENTS_PER_CHUNK = 10_000


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` split at the points ``cuts`` name (each taken modulo ``len(data) + 1``): the
    pieces, in order, join back to ``data``; empty pieces are kept."""
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for p in points + [len(data)]:
        out.append(data[last:p])
        last = p
    return out


def feed_garbage(codec: WireCodec, chunks: list[bytes]) -> None:
    """Feed arbitrary bytes: the codec either asks for more (``next_event`` returns ``None``)
    within a bounded number of events per chunk, or rejects the stream with a
    ``ProtocolError``; anything else (another exception, an endless stream of events) fails."""
    for chunk in chunks:
        codec.receive_data(chunk)
        try:
            for _ in range(MAX_EVENTS_PER_CHUNK):
                if codec.next_event() is None:
                    break
            else:
                raise AssertionError("next_event never returned None")
        except ProtocolError:
            return
