"""Harness ``kernel_sp``: the compiled kernel's read path for SP clients (nng's TCP and IPC
framing, the backtrace words), against the reference. The bridge's front is SP, its back
ZeroMQ or SP; layout, steps and oracle: :mod:`fuzz._twins`."""

from __future__ import annotations

from . import _twins

NAME = "kernel_sp"
ROUTES = (("sp", "zmtp"), ("sp", "sp"))


def one_input(buf: bytes, strict: bool = False) -> None:
    _twins.one_input(buf, ROUTES, strict=strict)
