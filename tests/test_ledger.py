"""gateway.device.ledger: one bridge's accounting; the exception -> reason table."""

from __future__ import annotations

import time
import uuid

import pytest

from gateway.device.ledger import REPLY, REQUEST, Ledger, classify
from gateway.envelope import EnvelopeError, TableFull
from gateway.errors import (
    DROP_REASONS,
    ConfigError,
    Drop,
    LocalProtocolError,
    PeerBusy,
    PeerGone,
    TransportError,
)
from gateway.metrics import METRICS


def _ledger() -> Ledger:
    return Ledger(f"l-{uuid.uuid4().hex[:8]}")


@pytest.mark.parametrize(("exc", "direction", "reason"), [
    (EnvelopeError("not-4-bytes"), REPLY, "not-4-bytes"),
    (TableFull(), REQUEST, "table-full"),
    (Drop("ttl"), REQUEST, "ttl"),
    (PeerBusy("full"), REPLY, "hwm"),
    (PeerGone("gone"), REPLY, "client-gone"),
    (LocalProtocolError("two frames"), REPLY, "bad-envelope"),
    (TransportError("send timeout"), REQUEST, "backend-unavailable"),
    (TransportError("closed"), REPLY, "client-gone"),
])
def test_classify(exc: Exception, direction: str, reason: str) -> None:
    assert classify(exc, direction) == reason
    assert reason in DROP_REASONS


def test_classify_lets_bugs_through() -> None:
    with pytest.raises(ConfigError):
        classify(ConfigError("not a message's fault"), REQUEST)


def test_series_exported_at_zero_from_the_start() -> None:
    ledger = _ledger()
    text = METRICS.render()
    for direction in (REQUEST, REPLY):
        assert (f'gateway_forwarded_messages_total{{bridge="{ledger.bridge}",'
                f'direction="{direction}"}} 0.0') in text
    for reason in DROP_REASONS:
        assert (f'gateway_dropped_messages_total{{bridge="{ledger.bridge}",'
                f'reason="{reason}"}} 0.0') in text
    assert f'gateway_in_flight_requests{{bridge="{ledger.bridge}"}} 0.0' in text


def test_forwarded_in_flight_and_latency() -> None:
    ledger = _ledger()
    t0 = time.monotonic()
    ledger.request_forwarded(t0)
    ledger.request_forwarded(t0)
    assert ledger.in_flight == 2
    ledger.reply_forwarded(t0)
    assert (ledger.in_flight, ledger.forwarded(REQUEST), ledger.forwarded(REPLY)) == (1, 2, 1)
    assert ledger.latency_count(REQUEST) == 2 and ledger.latency_count(REPLY) == 1
    ledger.reply_forwarded(t0)
    ledger.reply_forwarded(t0)  # a reply the ledger did not see go out: never below zero
    assert ledger.in_flight == 0


def test_drops_count_and_resolve_in_flight() -> None:
    ledger = _ledger()
    for _ in range(3):
        ledger.request_forwarded(time.monotonic())
    ledger.refused(PeerGone("gone"), REPLY)  # the reply could not be delivered: done
    ledger.refused(EnvelopeError("multi-frame-body"), REQUEST)  # never went out
    ledger.expired(1)
    assert ledger.in_flight == 1
    assert ledger.dropped_count("client-gone") == 1
    assert ledger.dropped_count("multi-frame-body") == 1
    assert ledger.dropped_count("token-expired") == 1
    assert METRICS.get("gateway_dropped_messages_total", bridge=ledger.bridge,
                       reason="client-gone") == 1
    ledger.expired(0)  # nothing to say
    assert ledger.dropped_count("token-expired") == 1


def test_a_reply_lost_after_it_was_forwarded_does_not_settle_another_request() -> None:
    """A published or forwarded reply lost later (a subscriber at its mark): counted, and the
    requests still in flight stay so (``settles=False``)."""
    ledger = _ledger()
    ledger.request_forwarded(time.monotonic())
    ledger.dropped("hwm", REPLY, "at the mark", count=3, settles=False)
    assert (ledger.in_flight, ledger.dropped_count("hwm")) == (1, 3)
    ledger.dropped("hwm", REPLY, "at the mark")
    assert ledger.in_flight == 0


def test_a_closed_ledger_forgets_only_its_own_gauges() -> None:
    """Two bridges of one name across a reload: the old one's close leaves the new one's
    gauges alone."""
    old = _ledger()
    new = Ledger(old.bridge)
    new.request_forwarded(time.monotonic())
    old.close()
    assert f'gateway_in_flight_requests{{bridge="{old.bridge}"}} 1.0' in METRICS.render()
    new.close()
    assert f'gateway_in_flight_requests{{bridge="{old.bridge}"}}' not in METRICS.render()


def test_a_plugins_own_reason_is_counted_too() -> None:
    ledger = _ledger()
    ledger.dropped("my-plugin-reason", REQUEST, "custom", count=4)
    assert ledger.dropped_count("my-plugin-reason") == 4


def test_drop_is_logged_with_bridge_direction_and_reason(capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.logging import configure

    configure("json", "info")
    ledger = _ledger()
    ledger.dropped("hwm", REPLY, "peer b'\\x00k' at its high-water mark")
    err = capsys.readouterr().err
    assert '"event": "drop"' in err and f'"bridge": "{ledger.bridge}"' in err
    assert '"reason": "hwm"' in err and '"direction": "reply"' in err


def test_drop_lines_are_rate_limited_per_reason_and_client(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 drops of one client: one line now, the rest summed in a summary line once the
    second is over; another client's drop still gets its own line. The counter is exact."""
    from gateway.device import ledger as ledger_module
    from gateway.logging import configure

    configure("json", "info")
    clock = [100.0]
    monkeypatch.setattr(ledger_module, "monotonic", lambda: clock[0])
    ledger = _ledger()
    for _ in range(10_000):
        ledger.dropped("multi-frame-body", REQUEST, "3 frames", client=b"\x00k")
    ledger.dropped("multi-frame-body", REQUEST, "3 frames", client=b"\x00j")
    ledger.flush()  # within the second: nothing to say yet
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and '"client": "006b"' in lines[0] and '"client": "006a"' in lines[1]
    clock[0] += 1.5
    ledger.flush()
    (summary,) = capsys.readouterr().err.splitlines()
    assert '"event": "drop.summary"' in summary and '"count": 9999' in summary
    assert ledger.dropped_count("multi-frame-body") == 10_001
