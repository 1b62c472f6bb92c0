"""nng's TLS for the pynng adapter: a side's ``tls_*`` settings (``options.tls``,
:class:`gateway.tls.TlsSettings`) as ``pynng.TLSConfig`` on a ``tls+tcp://`` or ``wss://``
bind (server) or dial (client)."""

from __future__ import annotations

from typing import Any

import pynng

from gateway.errors import ConfigError
from gateway.tls import TlsSettings


def use_tls(sock: Any, tls: TlsSettings | None, url: str, server: bool) -> None:
    """Give a socket nng's TLS configuration for a ``tls+tcp://`` or ``wss://`` URL: the
    endpoint's ``tls_*`` settings (``gateway.tls``) as ``pynng.TLSConfig``, in the role the
    bind (server) or dial (client) takes."""
    if not url.startswith(("tls+tcp://", "wss://")):
        return
    tls = tls or TlsSettings()
    if server and not tls.cert:
        raise ConfigError(f"pynng: listening on {url} needs tls_cert and tls_key")
    if tls.cert and not tls.key:
        raise ConfigError("pynng: tls_cert needs tls_key (nng reads the key separately)")

    def text(path: str | None) -> str | None:
        if path is None:
            return None
        with open(path, encoding="ascii") as fh:
            return fh.read()

    mode = tls.verify or ("none" if server else "required")
    auth = {"none": pynng.TLSConfig.AUTH_MODE_NONE,
            "optional": pynng.TLSConfig.AUTH_MODE_OPTIONAL,
            "required": pynng.TLSConfig.AUTH_MODE_REQUIRED}[mode]
    sock.tls_config = pynng.TLSConfig(
        pynng.TLSConfig.MODE_SERVER if server else pynng.TLSConfig.MODE_CLIENT,
        server_name=None if server else (tls.server_name or _host_of(url)),
        ca_string=text(tls.ca), own_cert_string=text(tls.cert), own_key_string=text(tls.key),
        auth_mode=auth)


def _host_of(url: str) -> str:
    return url.partition("://")[2].rpartition(":")[0].strip("[]")


__all__ = ["use_tls"]
