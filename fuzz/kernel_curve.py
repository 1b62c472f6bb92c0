"""Harness ``kernel_curve``: the compiled kernel's read path through CURVE (MESSAGE boxes opened
and sealed by the kernel through libsodium), against the reference. The bridge's ZeroMQ sides
run CURVE (the front a server, the back a client); the peers seal what the input says in their
own boxes, so the fuzzer reaches what is inside them. Layout, steps and oracle:
:mod:`fuzz._twins`."""

from __future__ import annotations

from . import _twins

NAME = "kernel_curve"
ROUTES = (("zmtp", "sp"), ("zmtp", "zmtp"), ("sp", "zmtp"))


def one_input(buf: bytes, strict: bool = False) -> None:
    _twins.one_input(buf, ROUTES, curve=True, strict=strict)
