"""Harness ``kernel_zmtp``: the compiled kernel's read path for ZeroMQ clients (plain ZMTP
frames, taken in place from each read), against the reference. The bridge's front is ZeroMQ,
its back SP or ZeroMQ; layout, steps and oracle: :mod:`fuzz._twins`."""

from __future__ import annotations

from . import _twins

NAME = "kernel_zmtp"
ROUTES = (("zmtp", "sp"), ("zmtp", "zmtp"))


def one_input(buf: bytes, strict: bool = False) -> None:
    _twins.one_input(buf, ROUTES, strict=strict)
