"""Checks for a sans-IO wire codec (``gateway.wire.WireCodec``): the gateway's own codecs and a
third-party wire plugin's run the same ones. No pytest or hypothesis import here; a test feeds
them its own generated input::

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.binary(max_size=200), max_size=6))
    def test_garbage(chunks):
        feed_garbage(MyCodec(...), chunks)

A codec that also parses whole messages in one call (``next_messages(limit)``, as the engine's
pipes use it) must give exactly what ``next_event`` alone gives: :func:`same_in_batches`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.errors import ProtocolError
from gateway.wire import WireCodec

__all__ = ["chunked", "feed_garbage", "same_in_batches"]

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


def _events(codec: Any, limit: int | None) -> tuple[list[Any], ProtocolError | None]:
    """Every event of what the codec holds, as ``next_event`` gives them (``limit`` None) or
    in the engine's order (``next_messages(limit)`` first, ``next_event`` when it has none);
    and the error that ended the stream, if any."""
    out: list[Any] = []
    try:
        for _ in range(MAX_EVENTS_PER_CHUNK):
            if limit is not None:
                try:
                    batch = codec.next_messages(limit)
                except Exception as exc:  # it stops before trouble; next_event raises
                    raise AssertionError(f"next_messages raised {exc!r}") from exc
                assert len(batch) <= limit, f"{len(batch)} messages past the limit {limit}"
                if batch:
                    out += batch
                    continue
            event = codec.next_event()
            if event is None:
                return out, None
            out.append(event)
        raise AssertionError("the codec never ran out of events")
    except ProtocolError as exc:
        return out, exc


def same_in_batches(make: Callable[[], Any], chunks: list[bytes], limit: int) -> None:
    """Two twin codecs fed the same chunks, one read with ``next_event`` only and one with
    ``next_messages(limit)`` first: the same events, frame types and error (type and text).
    ``next_messages`` itself must never raise."""
    plain, batched = make(), make()
    for chunk in chunks:
        plain.receive_data(chunk)
        batched.receive_data(chunk)
        want, want_err = _events(plain, None)
        got, got_err = _events(batched, limit)
        assert got == want, (got, want)
        assert [type(f) for m in got if type(m) is tuple for f in m] == \
            [type(f) for m in want if type(m) is tuple for f in m]
        assert type(got_err) is type(want_err) and str(got_err) == str(want_err), \
            (got_err, want_err)
        if want_err is not None:
            return
