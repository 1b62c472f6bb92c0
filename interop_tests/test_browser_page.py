"""The browser example (``examples/browser``) in a real browser: Debian's headless Chromium,
driven by selenium, loads the page from ``serve.py`` (a libzmq REP and PUB, an nng rep0 and
pub0, one ``gateway run`` with four WebSocket fronts); the page's requests are answered by
both servers (jszmq over ZWS 2.0 to nng, the browser's WebSocket over SP to libzmq), its feeds
receive from both publishers. A screenshot is taken (``tmp_path``, not kept). And a flooding
WebSocket client is bounded like any other peer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.tools.harness.browser import MISSING, chromium
from gateway.tools.harness.gateway import Gateway
from gateway.tools.harness.peers.jszmq import JszmqProc, node_env
from gateway.tools.harness.peers.jszmq import missing as jszmq_missing
from gateway.tools.harness.peers.servers import ZmqServer
from gateway.tools.harness.procs import LOCAL
from interop_tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "examples" / "browser"

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def served() -> Iterator[tuple[str, str]]:
    """``serve.py`` on ephemeral ports: (the page's URL, the gateway's metrics address)."""
    if not (PAGE / "vendor" / "jszmq.js").is_file():
        pytest.skip("examples/browser/vendor/jszmq.js missing (bash .ci/npm-deps.sh makes it)")
    proc = subprocess.Popen([sys.executable, str(PAGE / "serve.py"), "--http", "0", "--ws", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        page = proc.stdout.readline().split()
        metrics = proc.stdout.readline().split()
        assert page[:1] == ["PAGE"] and metrics[:1] == ["METRICS"], (page, metrics)
        yield page[1], metrics[1]
    finally:
        proc.terminate()  # serve.py stops its gateway on SIGTERM
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    if MISSING:
        pytest.skip(MISSING)
    with chromium(tmp_path / "chromium-profile", window="1000,900") as driver:
        yield driver


def _text(driver: Any, element: str) -> str:
    return str(driver.execute_script(f"return document.getElementById('{element}').innerText"))


def test_the_page_reaches_both_servers_and_both_publishers(served: tuple[str, str],
                                                          browser: Any,
                                                          tmp_path: Path) -> None:
    page, _ = served
    browser.get(page)
    want = {"zmq-reply": "nng rep0 answers: hello from the page",
            "sp-reply": "libzmq REP answers: hello from the page",
            "zmq-feed": "nng pub0 #", "sp-feed": "libzmq PUB #"}
    try:
        wait_until(lambda: all(w in _text(browser, e) for e, w in want.items()), 30,
                   "the page's replies and feeds")
    finally:
        shot = tmp_path / "browser-page.png"
        browser.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
        print({e: _text(browser, e)[:120] for e in want})
    assert shot.stat().st_size > 10_000
    # a second request from the page, by its button: both answer again
    browser.execute_script("document.getElementById('text').value = 'again';"
                            "document.getElementById('send').click();")
    wait_until(lambda: _text(browser, "zmq-reply").endswith("again")
               and _text(browser, "sp-reply").endswith("again"), 15, "the second replies")
    errors = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, errors


FLOOD = """
const WebSocket = require("ws");
const ws = new WebSocket(process.argv[1], ["ZWS2.0"]);
ws.on("open", () => {
  ws.send(Buffer.from([0]));  // our routing id (none)
  const body = Buffer.concat([Buffer.from([0]), Buffer.alloc(1000, 120)]);
  const flood = () => {  // requests as fast as the socket takes them, replies never read
    for (let i = 0; i < 200; i++) { ws.send(Buffer.from([1])); ws.send(body); }
    if (ws.readyState === WebSocket.OPEN) setImmediate(flood);
  };
  ws._socket.pause();  // never read what the gateway sends back
  flood();
});
ws.on("error", () => {});
setTimeout(() => process.exit(0), 60000);
"""


@pytest.mark.skipif(jszmq_missing() is not None, reason=str(jszmq_missing()))
def test_a_flooding_websocket_client_is_bounded_and_others_are_served() -> None:
    """A ZWS client that sends requests without end and reads nothing: the gateway's memory for
    it stays bounded (its pipe's high-water mark, the fair share of the back end) and a polite
    client on the same front is answered meanwhile."""
    with ZmqServer("REP") as srv, Gateway(
            "bridge", f"@zmq+ws://{LOCAL}:0/zmq?hwm=100", f">zmq+tcp://{LOCAL}:{srv.port}",
            metrics=True) as gw:
        url = gw.front.partition("+")[2]
        flood = subprocess.Popen(["node", "-e", FLOOD, url], env=node_env(),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: gw.metric("gateway_forwarded_messages_total",
                                         direction="request") > 2000, 30, "the flood")
            rss = [_rss(gw.pid)]
            for i in range(3):
                assert _polite(url, b"me too %d" % i) == [b"re:me too %d" % i]
                rss.append(_rss(gw.pid))
            sent = gw.metric("gateway_forwarded_messages_total", direction="request")
            wait_until(lambda: gw.metric("gateway_forwarded_messages_total",
                                         direction="request") > sent + 2000, 30, "more flood")
            rss.append(_rss(gw.pid))
            # KiB: what the flood makes the gateway hold does not grow with it (the replies it
            # does not read are dropped at its pipe's high-water mark, counted)
            assert max(rss) - min(rss) < 50_000, rss
            assert gw.metric("gateway_dropped_messages_total", reason="hwm") > 0
        finally:
            flood.kill()
            flood.wait(5)


def _polite(url: str, body: bytes) -> list[bytes] | None:
    """A request as the ZeroMQ guide's "lazy pirate" client makes it: a REQ that waits 15 s,
    then gives up and tries once more on a new connection (on 2 busy cores a request can wait
    behind the flood's in the back end past one deadline)."""
    for _ in range(3):
        with JszmqProc("REQ", "connect", url) as polite:
            polite.send([body])
            got = polite.recv(15)
            if got is not None:
                return got
    return None


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
