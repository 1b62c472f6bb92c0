"""Every "goes with" rule of the endpoint settings, once: used by ``gateway check``,
``gateway run``, ``gateway bridge`` (through the config and the bridge) and the native engine.

Each function returns every mistake it finds as one line (the caller adds where: the file, the
bridge and its side, or the URL) and reads no file; what only the files can tell (a certificate
that does not load, a key file other users can read) is :mod:`gateway.settings.files`'s.

Rules, by what they look at:

* the wire family: ZeroMQ-only settings (heartbeats, handover, CURVE, PLAIN) on an SP endpoint,
  SP-only ones (TLS) on a ZeroMQ one, and ``any+`` (both wires on one port), which takes
  neither security (it would not cover the other wire's peers) nor TLS;
* the transport, by what it declares (:class:`gateway.transport.TransportSpec`): an SP-only
  transport (nng's ``tls+tcp``) on a ZeroMQ endpoint, TLS settings on a transport that runs no
  TLS, ``any+`` on anything but a byte stream without TLS; on a WebSocket (``ws`` framing):
  CURVE for ZeroMQ (ZWS 2.0, RFC 45, has NULL and PLAIN), and ``origin`` anywhere else;
* the end: settings of a listening endpoint (``allow``, ``max_connections``, ``backlog``) on a
  dialling one, and the reverse (``tls_server_name``); ``router_handover`` on a bridge's back;
* the mechanisms: CURVE and PLAIN settings that need each other or exclude each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.settings.schema import BY_FIELD, SETTINGS

SECURITY_FIELDS = tuple(s.field for s in SETTINGS if s.field.startswith(("curve_", "plain_")))
TLS_FIELDS = tuple(s.field for s in SETTINGS if s.field.startswith("tls_"))
#: ZeroMQ-only settings that are not security (their own rule has its own words)
_ZMTP_ONLY = tuple(s.field for s in SETTINGS if s.families == frozenset({"zmtp"})
                   and s.field not in SECURITY_FIELDS)


def _given(settings: Mapping[str, Any], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if settings.get(n) not in (None, False)]


def family_rules(settings: Mapping[str, Any], family: str) -> list[str]:
    """Settings that do not apply to the wire ``family`` (``"zmtp"``, ``"sp"``, ``"any"``)."""
    errors: list[str] = []
    zmtp_only = sorted(BY_FIELD[f].name for f in _given(settings, _ZMTP_ONLY))
    if zmtp_only and family == "sp":
        errors.append(f"{', '.join(zmtp_only)}: not on SP (nng/nanomsg) endpoints (SP has no "
                      "heartbeat and no routing ids; TCP keepalive applies: tcp_keepalive)")
    secured = _given(settings, SECURITY_FIELDS)
    if secured and family == "any":
        errors.append(f"{', '.join(secured)}: ZeroMQ security would not cover the SP clients of "
                      "an any+ endpoint; bind a zmq+ endpoint with it beside an sp+ one")
    elif secured and family == "sp":
        errors.append(f"{', '.join(secured)}: ZeroMQ settings on an SP endpoint (SP security is "
                      "TLS)")
    return errors


def mechanism_rules(settings: Mapping[str, Any]) -> list[str]:
    """CURVE and PLAIN settings that need or exclude each other (the family is checked by
    :func:`family_rules`)."""
    g = settings.get
    curve = [n for n in SECURITY_FIELDS if n.startswith("curve_") and g(n) not in (None, False)]
    plain = [n for n in SECURITY_FIELDS if n.startswith("plain_") and g(n) not in (None, False)]
    errors: list[str] = []
    if curve and plain:
        return [f"CURVE ({', '.join(curve)}) and PLAIN ({', '.join(plain)}) on one endpoint: "
                "choose one mechanism"]
    if curve:
        if not g("curve_cert"):
            errors.append("CURVE needs curve_cert=PATH (this side's .key_secret certificate)")
        if g("curve_server"):
            extra = [n for n in ("curve_serverkey", "curve_server_cert") if g(n)]
            if extra:
                errors.append(f"{', '.join(extra)}: only for a CURVE client (curve_server=1 here)")
        else:
            if g("curve_allow"):
                errors.append("curve_allow: only for a CURVE server (add curve_server=1)")
            if bool(g("curve_serverkey")) == bool(g("curve_server_cert")):
                errors.append("a CURVE client needs one of curve_serverkey=Z85 or "
                              "curve_server_cert=PATH")
    if plain:
        if g("plain_server"):
            extra = [n for n in ("plain_username", "plain_password_file") if g(n)]
            if extra:
                errors.append(f"{', '.join(extra)}: only for a PLAIN client (plain_server=1 here)")
            if g("plain_passwords") and g("plain_allow_any"):
                errors.append("plain_passwords and plain_allow_any: choose one (a user list, or "
                              "any user and password)")
            elif not g("plain_passwords") and not g("plain_allow_any"):
                errors.append("plain_server=1 needs plain_passwords=FILE (user=password lines, "
                              "mode 600); without it every client is refused, as libzmq's PLAIN "
                              "server without ZAP does (plain_allow_any=1 takes any user and "
                              "password; a gateway_authenticate plugin still decides first)")
        else:
            for name in ("plain_passwords", "plain_allow_any"):
                if g(name):
                    errors.append(f"{name}: only for a PLAIN server (add plain_server=1)")
            if g("plain_username") is None or not g("plain_password_file"):
                errors.append("a PLAIN client needs plain_username and plain_password_file=PATH")
    return errors


def transport_rules(family: str, scheme: str, transport: Any, *, secured: bool = False,
                    tls: bool | list[str] = False, sp_only_kind: bool = False,
                    curve: bool = False, origin: bool = False,
                    buffers: bool = False) -> list[str]:
    """What the transport (its declared ``tls``, ``sp_only``, ``buffers`` and ``framing``)
    allows: the rules the native engine applies to every endpoint it binds or dials.
    ``secured``: the endpoint has ZeroMQ security; ``tls``: it has TLS settings (their names,
    when known, lead the line); ``sp_only_kind``: the socket kind exists on SP only (pair1);
    ``curve``: the security is CURVE; ``origin``: a WebSocket ``origin`` allow-list is set;
    ``buffers``: ``sndbuf`` or ``rcvbuf`` is given a size."""
    errors: list[str] = []
    if buffers and not getattr(transport, "buffers", False):
        errors.append(f"sndbuf, rcvbuf: {scheme} connections have no kernel buffers to size")
    named = f"{', '.join(tls)}: " if isinstance(tls, list) and tls else ""
    runs_tls = bool(getattr(transport, "tls", False))
    sp_only = bool(getattr(transport, "sp_only", False))
    stream = getattr(transport, "framing", "stream") == "stream"
    if family == "any":
        if sp_only_kind:
            errors.append("an SP socket type cannot take ZeroMQ peers on an any+ endpoint")
        if secured:
            errors.append("ZeroMQ security would not cover the SP peers of an any+ endpoint; "
                          "bind zmq+ and sp+ endpoints apart")
        if tls:
            errors.append(f"{named}TLS settings need an sp+tls+tcp://, sp+wss:// or zmq+wss:// "
                          "endpoint, not any+")
        if runs_tls or sp_only or not stream:
            errors.append("any+ takes tcp or ipc (the first byte must be the wire's own)")
        return errors
    if sp_only_kind and family != "sp":
        errors.append("an SP socket type (ZeroMQ has PAIR)")
    if secured and family == "sp":
        errors.append("ZeroMQ security on an SP endpoint (SP security is TLS)")
    if sp_only and family != "sp":
        if runs_tls:
            errors.append(f"{scheme} is an SP transport (nng's); libzmq has no TLS transport: "
                          "use CURVE (curve_server, curve_cert) for ZeroMQ")
        else:
            errors.append(f"{scheme} is an SP transport (nng's): use zmq+tcp")
    if tls and not runs_tls:
        errors.append(f"{named}TLS settings need an sp+tls+tcp://, sp+wss:// or zmq+wss:// "
                      "endpoint")
    if curve and family == "zmtp" and not stream:
        errors.append(f"CURVE over {scheme}: ZWS 2.0 (RFC 45) has NULL and PLAIN; use PLAIN "
                      "over wss (TLS) instead")
    if origin and stream:
        errors.append("origin: applies to WebSocket endpoints (ws, wss), where browsers connect")
    return errors


def tls_rules(settings: Mapping[str, Any], transport: Any, bound: bool) -> list[str]:
    """TLS settings that need each other on a TLS endpoint."""
    if not getattr(transport, "tls", False):
        return []
    scheme = getattr(transport, "scheme", "tls+tcp")
    errors: list[str] = []
    if bound and not settings.get("tls_cert"):
        errors.append(f"a bound sp+{scheme}:// endpoint needs tls_cert (and tls_key unless the "
                      "key is in the same file)")
    if settings.get("tls_key") and not settings.get("tls_cert"):
        errors.append("tls_key without tls_cert")
    if bound and settings.get("tls_verify") in ("optional", "required") \
            and not settings.get("tls_ca"):
        errors.append("tls_verify on a bound endpoint needs tls_ca (the CAs of its clients)")
    return errors


def placement_rules(settings: Mapping[str, Any], bound: bool, side: str = "") -> list[str]:
    """Settings of one end (bound or connecting) or one side (front or back) set on the
    other."""
    errors = []
    for s in SETTINGS:
        if settings.get(s.field) is None or s.field not in settings:
            continue
        if s.placement == "bind" and not bound:
            errors.append(f"{s.name}: applies to a bound endpoint (@), not a connecting one")
        elif s.placement == "connect" and bound:
            errors.append(f"{s.name}: applies to a connecting endpoint (>), not a bound one")
        if s.side and side and s.side != side:
            errors.append(f"{s.name} applies to the {s.side} (the ROUTER side clients connect "
                          f"to), not to the {side}")
    return errors


def endpoint_rules(settings: Mapping[str, Any], family: str, transport: Any, bound: bool,
                   side: str = "") -> list[str]:
    """Every rule for one endpoint's settings (a URL's with its TOML table's)."""
    scheme = getattr(transport, "scheme", "")
    tls = _given(settings, TLS_FIELDS)
    errors = family_rules(settings, family)
    if family == "zmtp":
        errors += mechanism_rules(settings)
    curve = any(str(f).startswith("curve_") for f in _given(settings, SECURITY_FIELDS))
    buffers = bool(settings.get("sndbuf") or settings.get("rcvbuf"))
    errors += [e for e in transport_rules(family, scheme, transport, tls=tls, curve=curve,
                                          origin=settings.get("origin") is not None,
                                          buffers=buffers)
               if e not in errors]
    if family != "any":
        errors += tls_rules(settings, transport, bound)
    errors += placement_rules(settings, bound, side)
    return errors


__all__ = ["SECURITY_FIELDS", "TLS_FIELDS", "endpoint_rules", "family_rules", "mechanism_rules",
           "placement_rules", "tls_rules", "transport_rules"]
