"""SP over TLS (``sp+tls+tcp://``, nng's ``tls+tcp``): settings and ``ssl`` contexts.

The SP TLS mapping (nanomsg ``sp-tls-mapping-01``) is the TCP mapping inside TLS: the same
8-byte header and length-prefixed messages. Settings are endpoint options naming files, never
secrets (:mod:`gateway.options`)::

    @sp+tls+tcp://0.0.0.0:6443?tls_cert=/etc/gw/server.pem&tls_key=/etc/gw/server.key
    >sp+tls+tcp://backend:6443?tls_ca=/etc/gw/ca.pem&tls_server_name=backend

Defaults as nng's: a server does not ask for client certificates (``tls_verify=none``; set
``optional`` or ``required`` with ``tls_ca`` to authenticate clients), a client verifies the
server (``required``) against ``tls_ca`` or the system's CAs, with the URL's host as the
expected name unless ``tls_server_name`` says otherwise. The handshake runs on the engine's pipe
(:mod:`gateway_plugins.tls`), so a refused certificate is one ``handshake.failed`` line and
``gateway_handshake_failures_total{reason="tls"}``, like any failed handshake.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.errors import ConfigError

VERIFY_MODES = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}
#: the transports that run inside TLS
TLS_TRANSPORTS = ("tls+tcp", "wss")
#: the SideOptions fields of this module
TLS_FIELDS = ("tls_cert", "tls_key", "tls_ca", "tls_verify", "tls_server_name")


def readable_file(value: object) -> str:
    """A path to a readable file."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a file path")
    path = value.strip()
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise ValueError(f"a readable file ({path!r} is not one)")
    return path


def private_file(value: object) -> str:
    """A readable file holding a private key, readable by its owner only."""
    from gateway.security import check_private_file

    path = readable_file(value)
    check_private_file(path, "the private key")
    return path


def holds_private_key(path: str) -> bool:
    """True when the PEM file ``path`` holds a private key (``-----BEGIN ... PRIVATE KEY``)."""
    try:
        with open(path, "rb") as f:
            return b"PRIVATE KEY-----" in f.read(1 << 20)
    except OSError:
        return False


def verify_mode(value: object) -> str:
    text = str(value).strip().lower()
    if text not in VERIFY_MODES:
        raise ValueError("none, optional or required")
    return text


def server_name(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
        raise ValueError("a host name")
    return value.strip()


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert: str | None = None  # our certificate chain (PEM)
    key: str | None = None  # its private key (PEM); None: in the cert file
    ca: str | None = None  # CAs to verify the peer with (PEM); None: the system's (clients)
    verify: str | None = None  # none | optional | required; None: none (server), required (client)
    server_name: str | None = None  # client: the name expected in the server's certificate

    def context(self, server_side: bool) -> ssl.SSLContext:
        """An ``ssl.SSLContext`` for one side; a :class:`ConfigError` naming the file when a
        certificate or key does not load."""
        purpose = ssl.Purpose.CLIENT_AUTH if server_side else ssl.Purpose.SERVER_AUTH
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        mode = self.verify or ("none" if server_side else "required")
        if not server_side:
            # a client that verifies at all checks the name too (``optional`` is ``required``
            # for a client: a server always presents a certificate, Python's CERT_OPTIONAL)
            ctx.check_hostname = mode != "none"
        ctx.verify_mode = VERIFY_MODES[mode]
        try:
            if self.cert:
                ctx.load_cert_chain(self.cert, self.key)
            if self.ca:
                ctx.load_verify_locations(cafile=self.ca)
            elif mode != "none":
                ctx.load_default_certs(purpose)
        except (ssl.SSLError, OSError) as exc:
            files = ", ".join(f for f in (self.cert, self.key, self.ca) if f)
            raise ConfigError(f"TLS: cannot load {files}: {exc}") from None
        return ctx


def check_settings(settings: Mapping[str, Any], family: str, transport: str,
                   bound: bool) -> list[str]:
    """Mistakes in combining TLS settings with an endpoint (every one, one line each)."""
    given = [f for f in TLS_FIELDS if settings.get(f) is not None]
    errors: list[str] = []
    if transport in ("ws",) and family != "sp":
        errors.append("ws is an SP transport (nng's WebSocket mapping); ZeroMQ's own (ZWS) is "
                      "not supported: use zmq+tcp")
    if transport not in TLS_TRANSPORTS:
        if given:
            errors.append(f"{', '.join(given)}: TLS settings need an sp+tls+tcp:// or sp+wss:// "
                          "endpoint")
        return errors
    if family != "sp":
        errors.append(f"{transport} is an SP transport (nng's); libzmq has no TLS transport: "
                      "use CURVE (curve_server, curve_cert) for ZeroMQ")
    if bound and not settings.get("tls_cert"):
        errors.append(f"a bound sp+{transport}:// endpoint needs tls_cert (and tls_key unless "
                      "the key is in the same file)")
    if settings.get("tls_key") and not settings.get("tls_cert"):
        errors.append("tls_key without tls_cert")
    cert = settings.get("tls_cert")
    if cert and not settings.get("tls_key") and holds_private_key(cert):
        from gateway.security import check_private_file

        try:
            check_private_file(cert, "the private key in it")
        except ValueError as exc:
            errors.append(f"tls_cert: {exc}")
    if bound and settings.get("tls_verify") in ("optional", "required") \
            and not settings.get("tls_ca"):
        errors.append("tls_verify on a bound endpoint needs tls_ca (the CAs of its clients)")
    if not errors:
        try:
            (tls_of(settings) or TlsSettings()).context(server_side=bound)
        except ConfigError as exc:
            errors.append(str(exc))
    return errors


def tls_of(settings: Mapping[str, Any] | Any) -> TlsSettings | None:
    """The TLS settings of an endpoint (a mapping or a SideOptions), or None when none is set."""
    get = settings.get if isinstance(settings, Mapping) else (
        lambda name: getattr(settings, name, None))
    values = {f: get(f) for f in TLS_FIELDS}
    if all(v is None for v in values.values()):
        return None
    return TlsSettings(values["tls_cert"], values["tls_key"], values["tls_ca"],
                       values["tls_verify"], values["tls_server_name"])


__all__ = ["TLS_FIELDS", "TlsSettings", "check_settings", "holds_private_key", "private_file",
           "readable_file", "server_name", "tls_of", "verify_mode"]
