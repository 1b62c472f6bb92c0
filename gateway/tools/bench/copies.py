"""User-space copies of each body byte in the bridge (issue 36): how many times the middle
copies a message's bytes between the read that brought them and the write that sends them.

The bridge runs with an ``LD_PRELOAD`` shim (``c/copycount.c``, built with the C compiler as
the bench's C peers are) that counts the bytes of ``memcpy``/``memmove`` calls of 4 KiB or more
and of blocks ``realloc`` moved; a client and an echo server in this process (those of
:mod:`gateway.tools.bench.instructions`) send ``small`` and then ``large`` requests, and the
difference of the two runs' counts over the bodies forwarded (two a request: the request and
its echo) is the figure (start-up cancels out). 1.0 is one copy of each body byte: uvloop's
``bytes`` of the read, with the kernel writing the body as a view of it.

    python -m gateway.tools.bench.copies --kernel --size 65536 --window 1
    python -m gateway.tools.bench.copies --kernel --size 1048576 --window 2 --requests 10,60
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass

from gateway.tools.bench import cpeers
from gateway.tools.bench.instructions import checked, drive, parser, path_env

SIZE = 65536
WINDOW = 1


@dataclass(frozen=True)
class Copies:
    """What the shim counted in one bridge process."""

    copied: int  # bytes of memcpy/memmove calls of 4 KiB or more
    calls: int
    moved: int  # bytes of blocks realloc moved
    moves: int

    def __sub__(self, other: Copies) -> Copies:
        return Copies(self.copied - other.copied, self.calls - other.calls,
                      self.moved - other.moved, self.moves - other.moves)


def count(route: str, n: int, *, kernel: bool = True, window: int = WINDOW, size: int = SIZE,
          timeout: float = 120.0) -> Copies:
    """The copies the bridge process of ``route`` made, start to exit, forwarding ``n``."""
    shim = cpeers.build("copycount")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "copies")
        drive(route, n, [sys.executable, "-m", "gateway"],
              {**path_env(kernel), "LD_PRELOAD": str(shim), "COPYCOUNT_OUT": out},
              window=window, size=size, timeout=timeout, name=f"bridge {route} counting copies")
        with open(out) as f:
            return Copies(*(int(x) for x in f.read().split()))


def per_body_byte(route: str, small: int, large: int, *, kernel: bool = True,
                  window: int = WINDOW, size: int = SIZE) -> tuple[float, float]:
    """(memcpy/memmove bytes, realloc-moved bytes) per body byte forwarded."""
    if not 0 < small < large or size <= 0:
        raise ValueError(f"need 0 < small < large and a body, not {small}, {large}, {size}")
    d = (count(route, large, kernel=kernel, window=window, size=size)
         - count(route, small, kernel=kernel, window=window, size=size))
    bodies = 2 * (large - small) * size
    return d.copied / bodies, d.moved / bodies


def main(argv: list[str] | None = None) -> int:
    args = parser("gateway.tools.bench.copies", __doc__, "100,600", WINDOW, SIZE).parse_args(argv)
    routes, small, large, errors = checked(args, least_size=4096)  # (the shim's least copy)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2
    path = "compiled" if args.kernel else "pure"
    for route in routes:
        copied, moved = per_body_byte(route, small, large, kernel=args.kernel,
                                      window=args.window, size=args.size)
        print(f"{route} ({path}, {args.window} in flight, {args.size} B): {copied + moved:.2f} "
              f"copies per body byte ({copied:.2f} memcpy/memmove, {moved:.2f} realloc moves)",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
