"""The documentation site (mkdocs.yml, docs/, docs/_hooks/): built with ``mkdocs build --strict``
(any warning fails: a broken link or anchor, a page outside the nav, a docstring mkdocstrings
cannot render), its generated references cover the code, and every page works in a real
browser.

The browser test serves the built site on 127.0.0.1:0 and drives Debian's Chromium (headless,
through chromedriver and selenium) over every page reachable from the front page: each renders
its title, no console error (a missing stylesheet, script or search index), and every internal
link leads to a page that exists and to an anchor on it that exists. The front page's screenshot
goes to the test's tmp directory and is checked as a PNG of a sane size. Skipped only when
Chromium or its driver is missing (CI installs both: .ci/system-deps.sh).
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urlsplit

import pytest

from gateway.tools.harness.browser import MISSING, chromium

ROOT = Path(__file__).resolve().parents[1]
MAX_PAGES = 200
CRAWL_SECONDS = 240.0

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert "WARNING" not in log, log
    return out


def _text(site: Path, page: str) -> str:
    return (site / page / "index.html").read_text()


# ---------------------------------------------------------------------------------------------
# what the build holds


def test_every_page_of_the_nav_is_built(site: Path) -> None:
    for page in ("", "getting-started", "tasks/zmq-to-nng", "tasks/curve", "tasks/systemd",
                 "tasks/metrics", "tasks/browser", "reference/cli", "reference/settings", "reference/metrics",
                 "reference/api", "reference/plugins", "design", "patterns", "observability"):
        assert (site / page / "index.html").is_file(), page
    assert not (site / "_hooks").exists()  # the build's own code is no page


def _commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for deeper, subsub in _commands(sub):
                    yield f"{name} {deeper}", subsub


def test_the_cli_reference_has_every_command_and_option(site: Path) -> None:
    from gateway.cli import build_parser

    html = _text(site, "reference/cli")
    commands = list(_commands(build_parser(active="*")))
    assert {"bridge", "run", "check", "plugins", "matrix run", "matrix report", "bench"} <= {
        name for name, _ in commands}
    for name, parser in commands:
        assert f"gateway {name}</code>" in html, name
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"<code>{option}" in html, f"gateway {name} {option}"


def test_the_settings_reference_has_every_setting_and_limit(site: Path) -> None:
    import dataclasses

    from gateway.config import Limits
    from gateway.settings.schema import REFUSED, SETTINGS

    html = _text(site, "reference/settings")
    for name in [*(s.name for s in SETTINGS), *REFUSED]:
        assert f"<code>{name}</code>" in html, name
    for f in dataclasses.fields(Limits):
        assert f"<code>{f.name}</code>" in html, f.name


def test_the_metrics_reference_has_every_metric_and_reason(site: Path) -> None:
    from gateway.errors import DROP_REASONS, HANDSHAKE_REASONS
    from gateway.metrics import SPECS

    html = _text(site, "reference/metrics")
    for name in [*SPECS, *DROP_REASONS, *HANDSHAKE_REASONS]:
        assert f"<code>{name}</code>" in html, name


def test_the_api_pages_document_the_sockets_and_the_plugin_contracts(site: Path) -> None:
    api, plugins = _text(site, "reference/api"), _text(site, "reference/plugins")
    for method in ("bind", "connect", "send", "recv", "send_multipart", "recv_multipart",
                   "send_msg", "recv_msg", "subscribe", "wait_peers", "close"):
        assert f'id="gateway.engine.socket.Socket.{method}"' in api, method
        assert f'id="gateway.blocking.Socket.{method}"' in api, method
    assert 'id="gateway.engine.socket.Socket.pipe_ready"' not in api  # the engine's own
    assert 'id="gateway.message.Message"' in api and 'id="gateway.errors.ConfigError"' in api
    for name in ("hookspecs.gateway_register_transports", "hookspecs.gateway_register_wires",
                 "hookspecs.gateway_register_adapters", "hookspecs.gateway_body_codec",
                 "hookspecs.gateway_authenticate", "hookspecs.gateway_configure",
                 "transport.Transport", "settings.schema.SideOptions", "adapter.RawSocket",
                 "testing.transport_suite", "testing.codec_checks"):
        assert f'id="gateway.{name}"' in plugins, name
    assert ":class:" not in api + plugins  # Sphinx roles read as code (docs/_hooks)


# ---------------------------------------------------------------------------------------------
# in a browser


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    if MISSING:
        pytest.skip(MISSING)
    with chromium(tmp_path / "chromium-profile") as driver:
        yield driver


_PAGE = """return {
  title: document.title,
  h1: (document.querySelector('article h1') || {}).textContent || '',
  ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id),
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
}"""


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_every_page_renders_and_no_internal_link_is_broken(served: str, browser: Any,
                                                           tmp_path: Path) -> None:
    origin = urlsplit(served).netloc
    browser.get(served)
    shot = tmp_path / "front-page.png"
    assert browser.save_screenshot(str(shot))
    width, height = _png_size(shot)
    assert 800 <= width <= 4000 and 600 <= height <= 4000, (width, height)
    assert shot.stat().st_size > 20_000, "the front page's screenshot looks blank"

    pages: dict[str, dict[str, Any]] = {}
    missing: set[str] = set()
    queue, links = [served], []
    deadline = time.monotonic() + CRAWL_SECONDS
    while queue:
        url = queue.pop(0)
        if url in pages or url in missing:
            continue
        assert len(pages) < MAX_PAGES and time.monotonic() < deadline, "crawl out of bounds"
        if _status(url) != 200:
            missing.add(url)
            continue
        browser.get(url)
        page = browser.execute_script(_PAGE)
        pages[url] = page
        assert "zmq-sp-gateway" in page["title"] and page["h1"].strip(), (url, page["title"])
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, f"{url}: console errors {errors}"
        for href in page["links"]:
            target, fragment = urldefrag(href)
            if urlsplit(target).netloc != origin:
                continue  # another site: not ours to check here
            links.append((url, target, fragment))
            if target not in pages and target not in queue and not target.endswith(
                    (".json", ".xml", ".gz", ".png", ".svg", ".css", ".js")):
                queue.append(target)

    print(f"crawled {len(pages)} pages, {len(links)} internal links; front page {shot}")
    assert len(pages) >= 14, sorted(pages)
    broken = [f"{source} -> {target}#{fragment}" for source, target, fragment in links
              if target in missing or target not in pages and _status(target) != 200
              or target in pages and fragment and fragment not in pages[target]["ids"]]
    assert not broken, "broken internal links:\n" + "\n".join(broken)
