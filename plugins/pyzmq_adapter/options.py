"""libzmq's socket options from a bridge side's settings (:class:`SideOptions`), security
included: CURVE/PLAIN from the material the gateway loaded once (``options.security``), and
for a server a ZAP domain that :mod:`.zap` maps to the policy and the auth hook."""

from __future__ import annotations

from typing import Any

import zmq

from gateway.adapter import SideOptions
from gateway.settings.checks import SECURITY_FIELDS
from gateway.wire import z85

from . import zap


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


#: the endpoint settings (``gateway.settings.schema``) this adapter hands to libzmq
HONOURED = frozenset({"hwm", "max_message_size", "reconnect_ivl", "reconnect_ivl_max",
                      "handshake_timeout", "linger", "backlog", "heartbeat_ivl",
                      "heartbeat_ttl", "heartbeat_timeout", "router_handover", "tcp_keepalive",
                      "tcp_keepalive_idle", "tcp_keepalive_intvl", "tcp_keepalive_cnt",
                      "immediate", "sndbuf", "rcvbuf", *SECURITY_FIELDS})


def libzmq_options(kind: str, options: SideOptions) -> dict[int, int | bytes]:
    """``{zmq option: value}`` for a side of ``kind`` ("REP": the front, "REQ": the back...)."""
    opts: dict[int, int | bytes] = {
        zmq.MAXMSGSIZE: options.max_message_size,
        zmq.RECONNECT_IVL: _ms(options.reconnect_ivl),
        zmq.RECONNECT_IVL_MAX: _ms(options.reconnect_ivl_max),
        zmq.HANDSHAKE_IVL: _ms(options.handshake_timeout),
        zmq.LINGER: _ms(options.linger),
        zmq.TCP_KEEPALIVE: 1 if options.tcp_keepalive else 0,
    }
    if options.tcp_keepalive:  # libzmq counts these in seconds
        opts[zmq.TCP_KEEPALIVE_IDLE] = max(1, round(options.tcp_keepalive_idle))
        opts[zmq.TCP_KEEPALIVE_INTVL] = max(1, round(options.tcp_keepalive_intvl))
        opts[zmq.TCP_KEEPALIVE_CNT] = options.tcp_keepalive_cnt
    if options.heartbeat_ivl:
        opts[zmq.HEARTBEAT_IVL] = _ms(options.heartbeat_ivl)
        if options.heartbeat_timeout is not None:
            opts[zmq.HEARTBEAT_TIMEOUT] = _ms(options.heartbeat_timeout)
    if options.heartbeat_ttl:
        opts[zmq.HEARTBEAT_TTL] = _ms(options.heartbeat_ttl)
    if kind == "REP" and options.router_handover:
        opts[zmq.ROUTER_HANDOVER] = 1  # asked for: a reconnecting client with a known id takes over
    if options.backlog:
        opts[zmq.BACKLOG] = options.backlog
    if options.sndbuf:  # (unset: libzmq's own, the OS's: libzmq sizes all connections alike)
        opts[zmq.SNDBUF] = options.sndbuf
    if options.rcvbuf:
        opts[zmq.RCVBUF] = options.rcvbuf
    if options.immediate:
        opts[zmq.IMMEDIATE] = 1  # libzmq: no queue on a connection that is not complete
    if kind == "REP" and options.router_mandatory:
        opts[zmq.ROUTER_MANDATORY] = 1  # a reply to a vanished client raises, to be counted
    opts.update(security_options(kind, options))
    return opts


def security_options(kind: str, options: SideOptions) -> dict[int, int | bytes]:
    """libzmq's own PLAIN/CURVE options from the same material as the native engine's (loaded
    once per start: ``options.security``); a server gets a ZAP domain its handler (``zap``)
    maps to the policy and the hook."""
    sec = options.security
    if sec is None:
        return {}
    opts: dict[int, int | bytes] = {}
    if sec.mechanism == "CURVE":
        opts[zmq.CURVE_PUBLICKEY] = z85.encode(sec.public).encode()
        opts[zmq.CURVE_SECRETKEY] = z85.encode(sec.secret).encode()
        if sec.as_server:
            opts[zmq.CURVE_SERVER] = 1
        else:
            opts[zmq.CURVE_SERVERKEY] = z85.encode(sec.server_key).encode()
    elif sec.as_server:
        opts[zmq.PLAIN_SERVER] = 1
    else:
        opts[zmq.PLAIN_USERNAME] = sec.username.encode()
        opts[zmq.PLAIN_PASSWORD] = sec.password.encode()
    if sec.as_server:
        name = "pyzmq-front" if kind == "REP" else "pyzmq-back"
        opts[zmq.ZAP_DOMAIN] = zap.register_policy(sec, name)
        opts[zmq.ZAP_ENFORCE_DOMAIN] = 1  # no handler answering: refuse, never accept all
    return opts


def start_zap(ctx: Any, opts: dict[int, int | bytes]) -> None:
    """Start the context's ZAP handler when ``opts`` give a socket a ZAP domain."""
    if zmq.ZAP_DOMAIN in opts:
        zap.ensure_handler(ctx)


def pattern_options(sock: Any, kind: str) -> None:
    """XPUB: every subscription and cancel of every subscriber reaches the bridge (its
    :class:`~gateway.envelope.Subscriptions` counts them), including the cancels libzmq
    makes up for a subscriber that leaves."""
    if kind == "XPUB":
        sock.setsockopt(zmq.XPUB_VERBOSER, 1)


__all__ = ["HONOURED", "libzmq_options", "pattern_options", "security_options", "start_zap"]
