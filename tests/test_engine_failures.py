"""gateway.engine.failures: a connection that ended before its handshake, as a value: the
reason word, the detail and the fields of the owner's log line."""

from __future__ import annotations

import pytest

from gateway.engine.failures import PipeFailure, failure_of, peer_closed
from gateway.errors import (
    HANDSHAKE_REASONS,
    MechanismError,
    PairingError,
    ProtocolError,
    VersionError,
)


@pytest.mark.parametrize(("exc", "reason", "fields"), [
    (VersionError("too old", peer_version="1.0"), "zmtp-version",
     {"wire": "zmtp", "peer_version": "1.0"}),
    (MechanismError("no", peer_mechanism="PLAIN", mechanism="CURVE"), "mechanism",
     {"wire": "zmtp", "peer_mechanism": "PLAIN", "mechanism": "CURVE"}),
    (PairingError("no", ours="REP", theirs="PUB"), "pairing",
     {"wire": "zmtp", "socket_type": "REP", "peer_type": "PUB"}),
    (ProtocolError("bad frame"), "garbage", {"wire": "zmtp"}),
])
def test_a_protocol_error_is_classified_with_what_the_peer_said(
        exc: ProtocolError, reason: str, fields: dict[str, str]) -> None:
    failure = failure_of(exc, "zmtp")
    assert failure == PipeFailure(reason, str(exc), fields)
    assert failure.reason in HANDSHAKE_REASONS


class _Codec:
    def __init__(self, stage: str) -> None:
        self.handshake_stage = stage
        self.socket_type = "REQ"


def test_a_peer_that_closed_is_peer_closed_with_the_bytes_it_sent() -> None:
    failure = peer_closed(_Codec("greeting"), "zmtp", 5, ConnectionResetError("reset"))
    assert failure.reason == "peer-closed"
    assert failure.detail.startswith("the peer closed the connection after 5 bytes")
    assert "(reset)" in failure.detail
    assert failure.fields == {"wire": "zmtp", "stage": "greeting"}


def test_a_close_after_the_greeting_is_an_inferred_pairing_refusal() -> None:
    failure = peer_closed(_Codec("ready"), "zmtp", 64, None)
    assert failure.reason == "pairing"
    assert failure.fields == {"wire": "zmtp", "stage": "ready", "socket_type": "REQ",
                              "inferred": "true"}
    assert "its READY did not" in failure.detail


def test_a_codec_without_stages_says_only_the_wire() -> None:
    failure = peer_closed(object(), "sp", 0, None)
    assert (failure.reason, failure.fields) == ("peer-closed", {"wire": "sp"})
