"""The fuzzing harnesses can fail: each one, given an honest input, passes against the product
and reports a bug planted in it (a codec that loses a message of a batch or takes a peer it
must refuse, a CURVE server that takes a forged vouch, a PLAIN server that ignores its
authenticator, a WebSocket codec that splits messages at fragments, a URL parser that raises
something other than ConfigError). And the runner's hypothesis engine (where atheris is
missing) runs a harness for a time budget."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # fuzz/ is not installed: it runs from the repository
    sys.path.insert(0, str(ROOT))

from gateway_plugins.ws.codec import WsSpCodec  # noqa: E402

from fuzz import config as config_h  # noqa: E402
from fuzz import curve, plain, seeds, sp_codec, ws, zmtp_codec  # noqa: E402
from fuzz.__main__ import CORPUS, run_hypothesis  # noqa: E402
from fuzz._data import Data, Finding, Writer  # noqa: E402
from fuzz._zmtp_sec import CLIENT_T, SERVER  # noqa: E402
from gateway.wire import sp as sp_module  # noqa: E402
from gateway.wire import zmtp_curve  # noqa: E402
from gateway.wire.zmtp import ZmtpCodec  # noqa: E402
from gateway.wire.zmtp_mechanism import AuthResult  # noqa: E402
from gateway.wire.zmtp_plain import PlainServer  # noqa: E402


def seed(harness: str, name: str) -> bytes:
    return (CORPUS / harness / name).read_bytes()


def test_data_reads_choices_and_then_zeros() -> None:
    data = Data(b"\x05\x01\x02\x01abc")
    assert data.below(3) == 2 and data.uint(2) == 0x0102 and data.short() == b"a"
    assert data.take(2) == b"bc" and len(data) == 0 and data.byte() == 0 and data.rest() == b""
    assert Writer().byte(1).uint(2, 2).short(b"x").bytes() == b"\x01\x00\x02\x01x"


# -- codecs ---------------------------------------------------------------------------------------
class _LosesABatchedMessage(ZmtpCodec):
    def next_messages(self, limit: int) -> list[tuple[bytes, ...]]:
        out = super().next_messages(limit)
        return out[:-1] if len(out) > 1 else out


class _TakesAnyPeer(ZmtpCodec):
    def __init__(self, role: Any, **kw: Any) -> None:
        super().__init__(role, **kw)
        self._accepted = frozenset(zmtp_codec.PEER_TYPES)


def test_zmtp_harness_passes_libzmq_and_catches_a_lost_batched_message(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pushed = seed("zmtp_codec", "seed-libzmq-PUSH")  # three messages in one read
    zmtp_codec.one_input(pushed, strict=True)
    monkeypatch.setattr(zmtp_codec, "ZmtpCodec", _LosesABatchedMessage)
    with pytest.raises(AssertionError):
        zmtp_codec.one_input(pushed, strict=True)


def test_zmtp_harness_catches_a_codec_that_takes_a_peer_it_must_refuse(
        monkeypatch: pytest.MonkeyPatch) -> None:
    req_to_req = zmtp_codec.encode_input(kind=0, prelude=1, peer=0)  # a REQ greets a REQ
    zmtp_codec.one_input(req_to_req, strict=True)  # refused: fine
    monkeypatch.setattr(zmtp_codec, "ZmtpCodec", _TakesAnyPeer)
    with pytest.raises(Finding, match="does not accept"):
        zmtp_codec.one_input(req_to_req, strict=True)


class _TakesAnyProtocol(sp_module.SpCodec):
    def __init__(self, role: Any, **kw: Any) -> None:
        super().__init__(role, **kw)
        self._accepted = frozenset(range(1 << 16))


def test_sp_harness_passes_nng_and_catches_a_codec_that_takes_a_peer_it_must_refuse(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("seed-nng-Req0", "seed-nng-Req0-ipc", "seed-nng-Pair1"):
        sp_codec.one_input(seed("sp_codec", name), strict=True)
    req_to_req = sp_codec.encode_input(kind=0, prelude=0, stream=bytes.fromhex(
        "0053500000300000") + (5).to_bytes(8, "big") + b"hello")
    sp_codec.one_input(req_to_req, strict=True)  # refused: fine
    monkeypatch.setattr(sp_codec, "SpCodec", _TakesAnyProtocol)
    with pytest.raises(Finding, match="does not accept"):
        sp_codec.one_input(req_to_req, strict=True)


# -- mechanisms -----------------------------------------------------------------------------------
def _forged_vouch_input() -> bytes:
    steps = Writer().byte(0).byte(0)  # honest HELLO
    steps.byte(1).byte(16).raw(b"v" * 16).byte(1)  # INITIATE claiming CLIENT, vouch by OTHER
    return curve.encode_input(target=0, kind=0, steps=steps.bytes())


def test_curve_harness_passes_libzmq_and_sessions() -> None:
    for name in ("seed-libzmq-DEALER-raw", "seed-server-REQ", "seed-client-ROUTER"):
        curve.one_input(seed("curve", name), strict=True)
    curve.one_input(_forged_vouch_input(), strict=True)  # refused: fine


def test_curve_harness_catches_a_server_that_takes_a_forged_vouch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = zmtp_curve._open

    def trusting_open(box: bytes, nonce: bytes, public: bytes, secret: bytes, what: str) -> bytes:
        try:
            return real_open(box, nonce, public, secret, what)
        except zmtp_curve.CryptoError:
            if what != "vouch":
                raise
            return CLIENT_T[0] + SERVER[0]  # what a vouch should say, whoever made it

    monkeypatch.setattr(zmtp_curve, "_open", trusting_open)
    with pytest.raises(Finding, match="not honest"):
        curve.one_input(_forged_vouch_input(), strict=True)


class _IgnoresVerdicts(PlainServer):
    def __init__(self, authenticate: Any) -> None:
        def ask_but_allow(mechanism: str, credentials: Any) -> AuthResult:
            authenticate(mechanism, credentials)
            return AuthResult(True)

        super().__init__(ask_but_allow)


def test_plain_harness_catches_a_server_that_ignores_its_authenticator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    refused = seed("plain", "seed-server-refuses")  # alice, and the authenticator says no
    plain.one_input(refused, strict=True)
    monkeypatch.setattr(plain, "PlainServer", _IgnoresVerdicts)
    with pytest.raises(Finding, match="refused user was not refused"):
        plain.one_input(refused, strict=True)


# -- the WebSocket layer --------------------------------------------------------------------------
def test_ws_harness_passes_nng_and_catches_messages_split_at_fragments(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("seed-nng-Req0-listener", "seed-nng-Rep0-dialer", "seed-listener-0-session"):
        ws.one_input(seed("ws", name), strict=True)
    real = WsSpCodec._message

    def every_fragment_a_message(self: Any, data: bytes, finished: bool) -> Any:
        return real(self, data, True)

    monkeypatch.setattr(WsSpCodec, "_message", every_fragment_a_message)
    with pytest.raises(Finding, match="delivered"):
        ws.one_input(seed("ws", "seed-listener-0-session"), strict=True)


# -- configuration --------------------------------------------------------------------------------
def test_config_harness_catches_an_error_that_is_not_a_config_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = config_h.encode_input(0, b"@zmq+tcp://127.0.0.1:5555?hwm=5")
    config_h.one_input(url, strict=True)

    def broken(address: str) -> tuple[str, int]:
        raise ValueError("planted")

    monkeypatch.setattr("gateway.url.split_host_port", broken)
    with pytest.raises(ValueError, match="planted"):
        config_h.one_input(url, strict=True)


def test_config_harness_never_reads_paths_outside_its_fixtures() -> None:
    fix = config_h.fixtures()
    assert fix.safe(fix.secret_cert) and fix.safe("name-in-cwd") and fix.safe(3)
    assert not fix.safe("/dev/zero") and not fix.safe(fix.dir + "/../../etc/passwd")
    config_h.one_input(config_h.encode_input(0, b"zmq+tcp://h:1?curve_cert=/dev/zero"),
                       strict=True)  # skipped, not read


# -- the runner -----------------------------------------------------------------------------------
def test_hypothesis_engine_fuzzes_for_its_budget() -> None:
    result = run_hypothesis("sp_codec", 2)
    assert result.execs >= 10 and not result.crashes and 1.5 < result.seconds < 60


def test_known_and_fixed_inputs_are_what_seeds_writes() -> None:
    for finding, (harness, data) in seeds.known_inputs().items():
        assert seed(harness, f"known-{finding}") == data
    for finding, (harness, data) in seeds.fixed_inputs().items():
        assert seed(harness, f"regression-{finding}") == data
