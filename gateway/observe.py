"""The HTTP endpoints an operator scrapes and probes (``--metrics HOST:PORT``).

* ``/metrics``: Prometheus text, by prometheus_client's own WSGI app over the gateway's registry;
* ``/healthz``: 200 while the process serves at all;
* ``/readyz``: 200 when every bridge's back end has at least one connected peer, else 503; the
  body has one line per bridge (``orders ready front=3 back=1``); a back end that cannot tell
  (``back=-1``) is not ready unless ``unknown_peers = "ready"`` (:data:`UNKNOWN_PEERS`).

Everything else is 404. The server is prometheus_client's threading WSGI server on a daemon
thread, so a scrape never waits for the event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from gateway.errors import ConfigError
from gateway.metrics import METRICS
from gateway.url import split_host_port

#: () -> [(bridge name, front peers, back peers)]; -1 peers: the backend cannot tell.
Readiness = Callable[[], list[tuple[str, int, int]]]


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass


def readiness_text(rows: list[tuple[str, int, int]],
                   unknown_peers: str = "waiting") -> tuple[bool, str]:
    """Ready when every bridge's back end has a peer; a back end that cannot tell (``-1``)
    counts as :data:`UNKNOWN_PEERS` says (``unknown_peers``)."""
    def ok(back: int) -> bool:
        return back > 0 or (back < 0 and unknown_peers == "ready")

    ready = all(ok(back) for _, _, back in rows)
    lines = [f"{name} {'ready' if ok(back) else 'waiting'} front={front} back={back}"
             + (" (the back end cannot tell its peers)" if back < 0 else "")
             for name, front, back in rows]
    return ready, "\n".join(lines) + "\n"


def make_app(readiness: Readiness, unknown_peers: str | Callable[[], str] = "waiting"
             ) -> Callable[..., Iterable[bytes]]:
    """``unknown_peers``: the word, or a function that says it at each request (a reload)."""
    metrics_app = make_wsgi_app(METRICS.prometheus)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics_app(environ, start_response)  # type: ignore[no-any-return]
        if path == "/healthz":
            body, status = b"ok\n", "200 OK"
        elif path == "/readyz":
            ready, text = readiness_text(readiness(), unknown_peers if isinstance(unknown_peers, str)
                                         else unknown_peers())
            body, status = text.encode(), "200 OK" if ready else "503 Service Unavailable"
        else:
            body, status = b"not found: try /metrics, /healthz or /readyz\n", "404 Not Found"
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                                ("Content-Length", str(len(body)))])
        return [body]

    return app


class HttpEndpoint:
    """Serve the WSGI ``app`` on ``address`` (``HOST:PORT``, port 0 for any) from a daemon
    thread named ``thread_name`` until closed; ``self.address`` is where it listens."""

    def __init__(self, address: str, app: Any, thread_name: str) -> None:
        host, port = split_host_port(address)
        try:
            self._server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_Quiet)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {address}: {exc.strerror or exc}") from None
        real_host, real_port = self._server.server_address[:2]
        real_host = real_host.decode() if isinstance(real_host, bytes) else real_host
        self.address = f"{real_host}:{real_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name=thread_name,
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class ObserveServer(HttpEndpoint):
    """Serve the endpoints on ``address`` (``HOST:PORT``, port 0 for any) until closed."""

    def __init__(self, address: str, readiness: Readiness,
                 unknown_peers: str | Callable[[], str] = "waiting") -> None:
        super().__init__(address, make_app(readiness, unknown_peers), "gateway-http")
