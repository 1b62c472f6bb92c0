"""SP over TLS (``sp+tls+tcp://``, nng's ``tls+tcp``; ``sp+wss://``): one endpoint's TLS
material and its ``ssl`` contexts.

The SP TLS mapping (nanomsg ``sp-tls-mapping-01``) is the TCP mapping inside TLS: the same
8-byte header and length-prefixed messages. Settings name files, never secrets::

    @sp+tls+tcp://0.0.0.0:6443?tls_cert=/etc/gw/server.pem&tls_key=/etc/gw/server.key
    >sp+tls+tcp://backend:6443?tls_ca=/etc/gw/ca.pem&tls_server_name=backend

Defaults as nng's: a server does not ask for client certificates (``tls_verify=none``; set
``optional`` or ``required`` with ``tls_ca`` to authenticate clients), a client verifies the
server (``required``; ``optional`` is the same for a client, a server always shows one) against
``tls_ca`` or the system's CAs, with the URL's host as the expected name unless
``tls_server_name`` says otherwise. :func:`tls_of` reads the files once per start or reload
(a private key must be mode 600); the TLS transport asks :meth:`TlsSettings.context` for the
``ssl.SSLContext`` of its side, made once. The handshake runs in front of the engine's pipe
(:mod:`gateway_plugins.tls`), so a refused certificate is one ``handshake.failed`` line and
``gateway_handshake_failures_total{reason="tls"}``, like any failed handshake.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import ConfigError
from gateway.settings import files
from gateway.settings.checks import TLS_FIELDS

VERIFY_MODES = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert: str | None = None  # our certificate chain (PEM)
    key: str | None = None  # its private key (PEM); None: in the cert file
    ca: str | None = None  # CAs to verify the peer with (PEM); None: the system's (clients)
    verify: str | None = None  # none | optional | required; None: none (server), required (client)
    server_name: str | None = None  # client: the name expected in the server's certificate
    #: the contexts made so far, by side (server_side): each is made once
    _contexts: dict[bool, ssl.SSLContext] = field(default_factory=dict, compare=False,
                                                  repr=False)

    def context(self, server_side: bool) -> ssl.SSLContext:
        """The ``ssl.SSLContext`` of one side, made the first time it is asked for; a
        :class:`ConfigError` naming the file when a certificate or key does not load."""
        made = self._contexts.get(server_side)
        if made is None:
            made = self._contexts[server_side] = self._make(server_side)
        return made

    def _make(self, server_side: bool) -> ssl.SSLContext:
        purpose = ssl.Purpose.CLIENT_AUTH if server_side else ssl.Purpose.SERVER_AUTH
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        mode = self.verify or ("none" if server_side else "required")
        if not server_side:
            # a client that verifies at all checks the name too (``optional`` is ``required``
            # for a client: a server always presents a certificate, Python's CERT_OPTIONAL)
            ctx.check_hostname = mode != "none"
        ctx.verify_mode = VERIFY_MODES[mode]
        if server_side and not self.cert:
            raise ConfigError("a bound sp+tls+tcp:// or sp+wss:// endpoint needs tls_cert")
        try:
            if self.cert:
                ctx.load_cert_chain(self.cert, self.key)
            if self.ca:
                ctx.load_verify_locations(cafile=self.ca)
            elif mode != "none":
                ctx.load_default_certs(purpose)
        except (ssl.SSLError, OSError) as exc:
            shown = ", ".join(f for f in (self.cert, self.key, self.ca) if f)
            raise ConfigError(f"TLS: cannot load {shown}: {exc}") from None
        return ctx


def tls_of(settings: Mapping[str, Any] | Any, bound: bool | None = None) -> TlsSettings | None:
    """An endpoint's TLS material from its settings (a mapping or a SideOptions), or None when
    none is set. Its files are checked now (readable; a private key mode 600, also inside the
    certificate file), and with ``bound`` given the context of that side is made (each file
    read once per start or reload); :class:`ConfigError` naming the file otherwise."""
    get = settings.get if isinstance(settings, Mapping) else (
        lambda name: getattr(settings, name, None))
    values = {f: get(f) for f in TLS_FIELDS}
    if all(v is None for v in values.values()):
        return None
    errors = []
    for name in ("tls_cert", "tls_key", "tls_ca"):
        path = values[name]
        if path is None:
            continue
        try:
            files.readable_file(path)
            if name == "tls_key" or (name == "tls_cert" and not values["tls_key"]
                                     and files.holds_private_key(path)):
                files.check_private_file(path, "the private key")
        except ValueError as exc:
            errors.append(f"{name}: {exc}")
    if errors:
        raise ConfigError("\n".join(errors))
    made = TlsSettings(values["tls_cert"], values["tls_key"], values["tls_ca"],
                       values["tls_verify"], values["tls_server_name"])
    if bound is not None:
        made.context(server_side=bound)
    return made


__all__ = ["VERIFY_MODES", "TlsSettings", "tls_of"]
