"""A real ZMTP 2.0 peer: JeroMQ 0.3.6 (Debian's libjeromq-java, "Based on libzmq 3.2.5,
ZMTP/2.0"), run as a small Java program (``gateway/tools/matrix/JeromqPeer.java``, compiled at test
time).

* through ``gateway bridge`` with the native ZeroMQ side: a JeroMQ REQ and a pipelined JeroMQ
  DEALER to an nng REP; an nng REQ to a JeroMQ REP and a JeroMQ ROUTER;
* the native engine's REQ and DEALER against JeroMQ directly, and a libzmq peer on the same
  socket still on ZMTP 3.1;
* a JeroMQ peer of the wrong type: refused with ``pairing`` (both types in the warning).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import gateway
from gateway.metrics import METRICS
from gateway.tools.harness.gateway import Gateway, bridge_args
from gateway.tools.harness.peers import jeromq
from gateway.tools.harness.peers.servers import NngServer, nng_req, zmq_client
from gateway.tools.harness.procs import ANY, LOCAL, lib_url

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(jeromq.missing() is not None, reason=str(jeromq.missing())),
]

TIMEOUT_MS = 20_000  # a JVM on a loaded 2-core box


def _bodies(peer: jeromq.JeromqProc) -> list[bytes]:
    return [frames[-1] for frames in peer.received]


def test_jeromq_req_through_default_backends_to_nng_rep() -> None:
    """``gateway bridge zmq+tcp://... sp+tcp://...`` with no ``?backend=``: the defaults."""
    with NngServer() as server, Gateway(*bridge_args(f"zmq+tcp://{ANY}",
                                                     f"sp+tcp://{LOCAL}:{server.port}")) as gw:
        with jeromq.JeromqProc("REQ", "connect", lib_url(gw.front), count=3,
                               timeout_ms=TIMEOUT_MS) as req:
            assert req.wait_done(60), gw.stderr
            assert req.received == [[b"re:req-%d" % i] for i in range(3)]
        assert server.received == [b"req-%d" % i for i in range(3)]
        up = gw.wait_event("pipe.up", zmtp="2.0", peer_type="REQ")
        assert up["socket"].endswith("front")


def test_jeromq_dealer_pipelined_own_envelopes() -> None:
    """A ZMTP 2.0 DEALER sends five requests before reading: every reply comes back with its
    own (empty) delimiter frame and its own body."""
    with NngServer() as server, Gateway(*bridge_args(f"zmq+tcp://{ANY}",
                                                     f"sp+tcp://{LOCAL}:{server.port}")) as gw:
        with jeromq.JeromqProc("DEALER", "connect", lib_url(gw.front), count=5,
                               timeout_ms=TIMEOUT_MS) as dealer:
            assert dealer.wait_done(60), gw.stderr
            assert sorted(map(tuple, dealer.received)) == [(b"", b"re:req-%d" % i)
                                                           for i in range(5)]


@pytest.mark.parametrize("kind", ["REP", "ROUTER"])
def test_nng_req_through_native_back_to_jeromq(kind: str) -> None:
    """The reverse, default backends: the gateway's native ZeroMQ back end dials a JeroMQ REP /
    ROUTER."""
    with jeromq.JeromqProc(kind, "bind", "tcp://127.0.0.1:0", count=0,
                           timeout_ms=200) as server:
        with Gateway(*bridge_args(f"sp+tcp://{ANY}", f"zmq+{server.endpoint}")) as gw, \
                nng_req(lib_url(gw.front), 30_000) as req:
            for i in range(3):
                req.send(b"q%d" % i)
                assert req.recv() == b"re:q%d" % i
            gw.wait_event("pipe.up", zmtp="2.0", peer_type=kind)
        envelopes = [frames[:-1] for frames in server.received]
        if kind == "REP":  # JeroMQ's REP strips the envelope
            assert envelopes == [[], [], []]
        else:  # the identity JeroMQ gave the gateway, its 4-byte envelope frames, the delimiter
            assert all(e[-1] == b"" and len(e) >= 3 and all(len(f) == 4 for f in e[1:-1])
                       for e in envelopes), envelopes
            assert len({tuple(e) for e in envelopes}) == 3  # one envelope per request


def test_native_engine_against_jeromq_and_libzmq() -> None:
    """The native REQ and DEALER speak 2.0 to JeroMQ; a libzmq peer of the same socket still
    negotiates ZMTP 3.1."""
    async def main() -> None:
        with jeromq.JeromqProc("ROUTER", "bind", "tcp://127.0.0.1:0", count=0,
                               timeout_ms=200) as router:
            async with gateway.Socket("REQ") as req, gateway.Socket("DEALER") as dealer:
                req.connect(f"zmq+{router.endpoint}")
                dealer.connect(f"zmq+{router.endpoint}")
                await req.send(b"one")
                assert await req.recv() == b"re:one"
                for i in range(4):  # pipelined
                    await dealer.send_multipart([b"", b"d%d" % i])
                got = [await dealer.recv_multipart() for _ in range(4)]
                assert got == [[b"", b"re:d%d" % i] for i in range(4)]
        async with gateway.Socket("REP") as rep:
            url = rep.bind("zmq+tcp://127.0.0.1:0")
            with zmq_client("REQ", lib_url(url)) as zreq:
                zreq.send(b"3.x", copy=True)
                assert await asyncio.wait_for(rep.recv(), 10) == b"3.x"
                await rep.send(b"ok")
                assert await asyncio.to_thread(zreq.recv) == b"ok"

    asyncio.run(asyncio.wait_for(main(), 90))


def test_wrong_type_jeromq_peer_is_refused_with_pairing(capfd: pytest.CaptureFixture[str]) -> None:
    """A JeroMQ REP dialing a native REP (2.0 socket-type byte 4): refused, warned, counted."""
    from gateway.logging import configure

    configure("json", "info")

    async def main() -> None:
        async with gateway.Socket("REP", name="svc") as rep:
            url = rep.bind("zmq+tcp://127.0.0.1:0")
            before = METRICS.get("gateway_handshake_failures_total", socket="svc",
                                 reason="pairing")
            with jeromq.JeromqProc("REP", "connect", lib_url(url), count=0, timeout_ms=200):
                async with asyncio.timeout(60):
                    while METRICS.get("gateway_handshake_failures_total", socket="svc",
                                      reason="pairing") == before:
                        await asyncio.sleep(0.05)
            assert rep.peers == 0

    asyncio.run(main())
    lines = [json.loads(line) for line in capfd.readouterr().err.splitlines()
             if '"handshake.failed"' in line]
    first: dict[str, Any] = lines[0]
    assert first["reason"] == "pairing" and first["socket_type"] == "REP"
    assert first["peer_type"] == "REP" and first["level"] == "warning"
