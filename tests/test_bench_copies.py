"""gateway.tools.bench.copies: user-space copies of each body byte in the bridge (issue 36)."""

from __future__ import annotations

import pytest

from gateway import kernel
from gateway.tools.bench import copies, cpeers
from gateway.tools.harness.procs import Unavailable


def test_bad_arguments_are_all_reported_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert copies.main(["--routes", "zz,qq", "--requests", "5,2", "--window", "0",
                        "--size", "100"]) == 2
    err = capsys.readouterr().err
    assert "unknown route 'qq'" in err and "0 < SMALL < LARGE" in err
    assert "--window: 1 to 4096" in err and "--size: 4096 to 1 GiB" in err
    with pytest.raises(ValueError, match="small < large"):
        copies.per_body_byte("zz", 10, 10)


@pytest.mark.skipif(kernel.compiled is None, reason="the compiled kernel is not built")
@pytest.mark.timeout(120)
def test_a_body_in_one_read_is_not_copied() -> None:
    """64 KiB bodies, one in flight, SP both sides (each peer writes a message in one write, so
    the bridge reads it in one read): the read lands in the pipe's own buffer and the kernel
    writes the body as a view of it, so no byte of it is copied in user space (one copy
    before, uvloop's bytes of the read; two before issue 36's views). Counted over 60
    requests, 120 bodies of 64 KiB."""
    try:
        cpeers.build("copycount")
    except Unavailable as exc:
        pytest.skip(str(exc))
    copied, moved = copies.per_body_byte("ss", 20, 80, kernel=True, window=1, size=65536)
    assert copied + moved < 0.2, (copied, moved)
