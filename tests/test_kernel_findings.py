"""The kernel's security review (of 1ceb8db, findings F1-F6), each finding's reproduction as a
test: the sanitizer build checks indexes, values Python code can set go to the reference (or
raise) instead of being cast blindly, each kernel keeps its buckets, a size limit past 2**62 is
refused by the settings and clamped by the kernel, a pipe whose wire is not the translator's is
the reference's, and the pending tables and the size limit count bytes. ``.ci/sanitize.sh``
runs this module against the ASan/UBSan build too.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import test_kernel as T

from gateway import kernel
from gateway.config import Limits, limits_from
from gateway.device.inflight import InFlight
from gateway.engine import core
from gateway.envelope import TableFull, TokenTable, Translator
from gateway.errors import ConfigError
from gateway.metrics import BUCKETS
from gateway.settings import convert, schema

ROOT = Path(__file__).resolve().parents[1]
needs_kernel = T.needs_kernel


def _outcome(go: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """What ``go`` returns, or the name of what it raised."""
    try:
        return asyncio.run(go())
    except Exception as exc:  # noqa: BLE001 - compared by the caller
        return type(exc).__name__


async def _rig(front: str, back: str, compiled: bool, **kw: Any) -> T.Rig:
    core._RUNNING_PIPE_IDS[0] = 100
    rig = T.Rig(front, back, compiled, **kw)
    await rig.open(clients=1, servers=1)
    return rig


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


# -- F1: the sanitizer build checks Cython's indexes -------------------------------------------
def _generated_c(tmp_path: Path, sanitize: bool) -> str:
    """gateway/_kernel.c as setup.py generates it (cythonize only, no compiler)."""
    pytest.importorskip("Cython")
    (tmp_path / "gateway").mkdir()
    shutil.copy(ROOT / "setup.py", tmp_path)
    for src in (ROOT / "gateway").glob("_kernel*.p*"):
        shutil.copy(src, tmp_path / "gateway")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GATEWAY_SANITIZE", "GATEWAY_NO_EXTENSIONS", "LD_PRELOAD")}
    if sanitize:
        env["GATEWAY_SANITIZE"] = "1"
    subprocess.run([sys.executable, "setup.py", "-q", "--name"], cwd=tmp_path, env=env,
                   check=True, capture_output=True, timeout=300)
    return (tmp_path / "gateway" / "_kernel.c").read_text()


#: the round robin's ``pipes[idx]`` (_Dests.pick), as Cython writes it without and with checks
UNCHECKED = "__Pyx_PyList_GET_ITEM(__pyx_v_pipes, __pyx_v_idx)"
CHECKED = "__Pyx_GetItemInt_List(__pyx_v_pipes, __pyx_v_idx, Py_ssize_t, 1, PyLong_FromSsize_t, 1, 1, 1"


@pytest.mark.parametrize("sanitize", [True, False], ids=["sanitize", "normal"])
def test_setup_switches_the_index_checks_on_only_for_the_sanitizer_build(
        tmp_path: Path, sanitize: bool) -> None:
    """F1: the .pyx header's directives used to beat setup.py's, so GATEWAY_SANITIZE=1 built
    the kernel without bounds checks; the normal build keeps them off (its speed)."""
    c = _generated_c(tmp_path, sanitize)
    assert (CHECKED in c, UNCHECKED in c) == (sanitize, not sanitize)


def test_the_kernel_header_leaves_the_index_checks_to_setup() -> None:
    header = [line for line in (ROOT / "gateway" / "_kernel.pyx").read_text().splitlines()
              if line.startswith("# cython:")]
    assert header and not any(d in line for line in header
                              for d in ("boundscheck", "wraparound", "initializedcheck"))


@needs_kernel
def test_the_sanitizer_build_checks_indexes() -> None:
    """Run by .ci/sanitize.sh (GATEWAY_SANITIZE set): an index past the end is an IndexError,
    a negative one counts from the end (wraparound)."""
    if not os.environ.get("GATEWAY_SANITIZE"):
        pytest.skip("the normal build does not check indexes (.ci/sanitize.sh runs this)")
    assert kernel.compiled is not None
    with pytest.raises(IndexError):
        kernel.compiled._index_probe([1, 2, 3], 13)
    assert kernel.compiled._index_probe([1, 2, 3], -1) == 3


# -- F2: values Python code can set ------------------------------------------------------------
@needs_kernel
def test_a_foreign_kernel_state_is_the_references() -> None:
    """Pipe.kernel_state is a public slot: something else in it (a plugin's state) no longer
    becomes a fake record (SIGSEGV); the read goes to the reference."""

    async def go() -> tuple[int, bytes]:
        rig = await _rig("zmtp", "sp", True)
        pipe = rig.clients[0].pipe
        pipe.data_received(T._zmtp_frames([b"", b"ok"]))
        pipe.kernel_state = b"A" * 64
        pipe.data_received(T._zmtp_frames([b"", b"boom"]))
        await _settle()
        assert pipe.kernel_state == b"A" * 64
        return rig.fwd.ledger.forwarded("request"), bytes(rig.servers[0].wire.data)

    n, wire = asyncio.run(go())
    assert n == 2 and b"ok" in wire and b"boom" in wire


@needs_kernel
def test_a_receive_buffer_of_another_type_is_the_references() -> None:
    """ReceiveBuffer.data is a public slot: a memoryview there is not read as a bytearray."""

    async def go(compiled: bool) -> tuple[int, bytes]:
        rig = await _rig("zmtp", "sp", compiled)
        pipe = rig.clients[0].pipe
        pipe.data_received(T._zmtp_frames([b"", b"ok"]))
        rx = pipe.codec.rx
        rx.data, rx.pos = memoryview(T._zmtp_frames([b"", b"mv"])), 0
        pipe.process()
        await _settle()
        return rig.fwd.ledger.forwarded("request"), bytes(rig.servers[0].wire.data)

    assert asyncio.run(go(True)) == asyncio.run(go(False))
    assert asyncio.run(go(True))[0] == 2


@needs_kernel
@pytest.mark.parametrize("prefixes", [[b""], ("text", b"")], ids=["a-list", "a-str-prefix"])
def test_subscription_filters_of_other_types_as_the_reference(prefixes: Any) -> None:
    """An XPUB's filters (a public dict) holding a list, or a tuple with a str: the kernel
    does what the reference does (a TypeError from startswith) instead of reading a list's
    item pointer as a tuple's items."""

    async def go(compiled: bool) -> Any:
        rig = await _rig("zmtp", "zmtp", compiled, pattern="pubsub")
        client, server = rig.clients[0], rig.servers[0]
        client.pipe.data_received(T._zmtp_frames([b"\x01"]))  # subscribe to everything
        await _settle()
        rig.fwd.front.socket.pattern.filters[client.pipe.routing_id] = prefixes
        try:
            server.pipe.data_received(T._zmtp_frames([b"topic", b"body"]))
        except TypeError:
            return "TypeError"
        await _settle()
        return bytes(client.wire.data)

    assert asyncio.run(go(True)) == asyncio.run(go(False)) == "TypeError"


@needs_kernel
def test_parked_hops_of_other_types_are_kept_as_bytes() -> None:
    """The compiled table's ``mint`` takes any bytes-like hops (as the reference) and keeps
    them as bytes, which the kernel copies to the wire; an empty envelope is refused."""
    t = kernel.token_table(8, 60.0, start=1)
    token = t.mint((bytearray(b"rid"), memoryview(b"hop"), b""), 0.0)
    assert t.entries() == [(token, (b"rid", b"hop", b""), 60.0)]
    with pytest.raises(ValueError):
        t.mint((), 0.0)
    with pytest.raises(TypeError):
        t.mint((None,), 0.0)


@needs_kernel
def test_a_reply_to_hops_parked_by_python_code_as_the_reference() -> None:
    """A token minted by Python code (bytearray hops) is answered as the reference answers
    it: the parked hops are bytes when the kernel copies them."""

    async def go(compiled: bool) -> bytes:
        rig = await _rig("zmtp", "sp", compiled)
        client, server = rig.clients[0], rig.servers[0]
        hops = (client.pipe.routing_id, bytearray(b"x" * 3), b"")
        token = rig.fwd.translator.table.mint(hops, asyncio.get_running_loop().time())
        payload = token + b"answer"
        server.pipe.data_received(len(payload).to_bytes(8, "big") + payload)
        await _settle()
        return bytes(client.wire.data)

    wire = asyncio.run(go(True))
    assert wire == asyncio.run(go(False)) and b"answer" in wire


@needs_kernel
@pytest.mark.parametrize("rid", [b"abc", b"\x00\x00\x00\x00\x01"], ids=["3-bytes", "5-bytes"])
def test_an_sp_pipe_id_not_of_4_bytes_as_the_reference(rid: bytes) -> None:
    """The SP encoders copy the pipe id's 4 bytes: a routing id of another size (set by
    Python code) is the reference's."""

    async def go(compiled: bool) -> Any:
        rig = await _rig("sp", "zmtp", compiled)
        client = rig.clients[0]
        client.pipe.routing_id = rid
        payload = b"\x80\x00\x00\x09body"
        client.pipe.data_received(len(payload).to_bytes(8, "big") + payload)
        await _settle()
        return rig.state()

    assert _outcome(lambda: go(True)) == _outcome(lambda: go(False))


# -- F3: each kernel's buckets -------------------------------------------------------------------
@needs_kernel
def test_each_kernel_keeps_its_own_buckets() -> None:
    """A kernel built with other buckets neither changes another kernel's (they were one
    module global) nor may index a ledger whose histograms have another number of them."""

    async def go() -> list[int]:
        rig = await _rig("zmtp", "sp", True)
        fwd = rig.fwd
        make = kernel.compiled.Kernel  # type: ignore[union-attr]
        with pytest.raises(ValueError, match="hop-latency buckets"):
            make(fwd, fwd.front.socket, fwd.back.socket, fwd.translator, fwd.loss,
                 fwd.ledger.tally, [0.0] * 32)
        # as many as the ledger's, all 0: every read of *this* kernel lands in the last one
        make(fwd, fwd.front.socket, fwd.back.socket, fwd.translator, fwd.loss,
             fwd.ledger.tally, [0.0] * len(BUCKETS))
        rig.clients[0].pipe.data_received(T._zmtp_frames([b"", b"x"]))
        await _settle()
        assert fwd.ledger.forwarded("request") == 1
        return fwd.ledger._h_req.snapshot()[0]

    counts = asyncio.run(go())
    assert len(counts) == len(BUCKETS) + 1 and sum(counts) == 1
    assert counts[-1] == 0  # a read does not take BUCKETS[-1] seconds
    assert bisect.bisect_left(BUCKETS, 0.0) == 0


# -- F4: a size limit past 2**62 -------------------------------------------------------------------
def test_a_size_limit_past_2_62_is_refused_naming_the_key(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    from gateway.cli import main

    assert schema.read([("maxmsgsize", str(convert.SIZE_MAX))], "u") == {
        "max_message_size": convert.SIZE_MAX}
    for value in (str(2**63), "100000000000000000000", 2**62 + 1):
        with pytest.raises(ConfigError, match="for maxmsgsize.*at most 2\\*\\*62"):
            schema.read([("maxmsgsize", value)], "u")
    with pytest.raises(ConfigError, match="limit max_message_size must be at most 2\\*\\*62"):
        limits_from({"max_message_size": 2**63})
    with pytest.raises(ConfigError, match="limit pending_bytes must be at most 2\\*\\*62"):
        limits_from({"pending_bytes": 2**63})
    assert limits_from({"max_message_size": 2**62}).max_message_size == 2**62
    cfg = tmp_path / "g.toml"
    cfg.write_text('[[bridge]]\nname = "x"\nfront = "zmq+tcp://127.0.0.1:1?maxmsgsize='
                   '100000000000000000000"\nback = "sp+tcp://127.0.0.1:2"\n')
    assert main(["check", str(cfg)]) == 2
    assert "maxmsgsize" in capsys.readouterr().err
    assert main(["bridge", "zmq+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:2",
                 "--max-message-size", str(2**63)]) == 2
    assert "--max-message-size must be at most 2**62" in capsys.readouterr().err  # the flag


@pytest.mark.parametrize("limit", [2**62, 2**63 - 1, 2**63, 10**20])
def test_the_kernel_takes_any_size_limit_the_reference_takes(limit: int,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """A codec's max_message_size past what the kernel keeps (set by Python code) is
    clamped, not an OverflowError on every read; the kernel still forwards."""
    monkeypatch.setattr(T, "MAX", limit)

    async def go(compiled: bool) -> dict[str, Any]:
        rig = await _rig("zmtp", "sp", compiled)
        rig.clients[0].pipe.data_received(T._zmtp_frames([b"", b"ok"]))
        await _settle()
        return rig.state()

    reference = asyncio.run(go(False))
    assert reference["forwarded"] == (1, 0)
    if kernel.compiled is not None:
        assert asyncio.run(go(True)) == reference


# -- F5: a pipe whose wire is not the translator's --------------------------------------------------
@needs_kernel
def test_a_pipe_of_another_wire_than_the_translators_is_the_references() -> None:
    """A zmtp->sp kernel wired by hand onto an SP front (review's repro_mode_mismatch): the
    kernel takes nothing from it (it read frames it never parsed), the reference does."""

    async def go() -> tuple[Any, ...]:
        rig = await _rig("sp", "sp", True)
        fwd = rig.fwd
        tr = Translator("zmtp", "sp", kernel.token_table(64, 60.0, start=7))
        k = kernel.compiled.Kernel(fwd, fwd.front.socket, fwd.back.socket,  # type: ignore[union-attr]
                                   tr, fwd.loss, fwd.ledger.tally, BUCKETS)
        pipe = rig.clients[0].pipe
        pipe.fast_read, pipe.fast = k.read_request, k.request
        payload = b"\x00\x00\x00\x01" * 3 + b"\x80\x00\x00\x07" + b"body"
        pipe.data_received(len(payload).to_bytes(8, "big") + payload)
        await _settle()
        server = rig.servers[0]
        back_pipe = server.pipe
        back_pipe.fast_read, back_pipe.fast = k.read_reply, k.reply  # and an SP reply
        reply = b"\x80\x00\x00\x07answer"
        back_pipe.data_received(len(reply).to_bytes(8, "big") + reply)
        await _settle()
        return (tr.table.entries(), k.request(pipe), bytes(server.wire.data),
                fwd.ledger.forwarded("request"))

    entries, taken, wire, forwarded = asyncio.run(go())
    assert entries == [] and taken == 0
    assert forwarded == 1 and wire.endswith(b"\x80\x00\x00\x07body")  # by the reference


# -- F6: bytes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("empties", [349, 350, 200_000])
def test_empty_frames_count_toward_the_size_limit(empties: int) -> None:
    """Each ZMTP frame counts at least 2 bytes (its short header) against max_message_size
    (700 here), in both paths: 200,000 empty frames are no longer a message of 0 bytes."""

    async def go(compiled: bool) -> dict[str, Any]:
        rig = await _rig("zmtp", "zmtp", compiled, hwm=1000)
        data = b"\x01\x00" * empties + b"\x00\x01x"  # empties MORE frames, then "x"
        pipe = rig.clients[0].pipe
        for i in range(0, len(data), 65536):
            if not pipe.close_reason:
                pipe.data_received(data[i:i + 65536])
        await _settle()
        return rig.state()

    reference = asyncio.run(go(False))
    fits = 2 * empties + 2 <= T.MAX  # (the body "x" counts 2 too)
    assert reference["closed"][0] == ("" if fits else "message-too-large")
    assert reference["forwarded"][0] == (1 if fits else 0)
    if kernel.compiled is not None:
        assert asyncio.run(go(True)) == reference


def _tables(compiled: bool, max_bytes: int) -> tuple[Any, Any]:
    if compiled:
        assert kernel.compiled is not None
        return (kernel.token_table(100, 60.0, start=1, max_bytes=max_bytes),
                kernel.compiled.InFlight(100, 60.0, max_bytes))
    return TokenTable(100, 60.0, start=1, max_bytes=max_bytes), InFlight(100, 60.0, max_bytes)


@pytest.mark.parametrize("compiled", [
    pytest.param(True, marks=needs_kernel, id="compiled"), pytest.param(False, id="reference")])
def test_the_pending_tables_are_bounded_in_bytes(compiled: bool) -> None:
    """A token table refuses an envelope past its byte budget (table-full) until one leaves;
    an in-flight table forgets its oldest requests to make room."""
    tokens, inflight = _tables(compiled, 100)
    envelope = (b"r" * 20, b"h" * 20, b"")  # 40 bytes and 3 frames: 43
    first = tokens.mint(envelope, 0.0)
    tokens.mint(envelope, 0.0)
    assert tokens.held_bytes == 86
    with pytest.raises(TableFull, match="pending_bytes"):
        tokens.mint(envelope, 1.0)
    assert tokens.pop(first, 1.0) == envelope and tokens.held_bytes == 43
    tokens.mint(envelope, 1.0)
    tokens.expire(61.0)
    tokens.mint(envelope, 61.0)  # the first two expired: room again
    assert tokens.held_bytes == 43 and len(tokens) == 1

    keys = [(bytes([i]) * 30, b"") for i in range(4)]  # 32 bytes each
    assert [inflight.sent(k, b"p", 0.0) for k in keys[:3]] == [None, None, None]
    assert inflight.sent(keys[3], b"p", 0.0) == [keys[0]]  # 128 > 100: the oldest goes
    assert inflight.held_bytes == 96 and len(inflight) == 3
    assert inflight.answered(keys[1]) and inflight.held_bytes == 64
    assert inflight.sent((b"z" * 200,), b"p", 0.0) == [keys[2], keys[3]]  # alone past it
    assert len(inflight) == 1 and inflight.lost(b"p") == [(b"z" * 200,)]
    assert inflight.held_bytes == 0


def test_a_bridge_gives_its_tables_the_pending_bytes_limit() -> None:
    from gateway.device.bridge import Bridge

    assert Limits().pending_bytes == schema.DEFAULTS.pending_bytes == 64 << 20
    bridge = Bridge("zmq+tcp://127.0.0.1:0", "sp+tcp://127.0.0.1:1", "b",
                    Limits(pending_bytes=12345))
    assert bridge.table.max_bytes == 12345


@pytest.mark.parametrize(("front", "back"), T.ROUTES, ids=[f"{f}-{b}" for f, b in T.ROUTES])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_small_byte_budget_as_the_reference(front: str, back: str, seed: int) -> None:
    """The differential run with pending tables of 150 bytes: the kernel stops where the
    reference refuses (table-full) or evicts, and both write and record the same."""
    reference = asyncio.run(T._run(front, back, False, seed, 40, max_bytes=150))
    if (front, back) == ("zmtp", "sp"):
        assert reference["drops"].get("table-full")
    assert reference["held_bytes"][0] <= 150
    if kernel.compiled is not None:
        assert asyncio.run(T._run(front, back, True, seed, 40, max_bytes=150)) == reference
