"""gateway.device.plan: a bridge decided once, before any socket opens: every mistake at once,
each naming the bridge and its side; the bridge's own settings stay the plan's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config import BridgeSpec
from gateway.device.plan import plan
from gateway.errors import ConfigError

L = "127.0.0.1"


def test_subscribe_on_either_url_is_the_bridges_not_a_sockets() -> None:
    """docs/patterns.md: ``?subscribe=`` on either URL names the prefixes the gateway holds at
    the publisher; the front's XPUB never sees it (it is no SUB)."""
    for front, back in ((f"@sp+tcp://{L}:0?pattern=pubsub&subscribe=a.,b.", f"zmq+tcp://{L}:1"),
                        (f"@sp+tcp://{L}:0?pattern=pubsub", f"zmq+tcp://{L}:1?subscribe=a.,b.")):
        p = plan(BridgeSpec("prices", front, back))
        assert p.subscribe == (b"a.", b"b.")
        assert p.front.options.subscribe is None and p.back.options.subscribe is None


def test_subscribe_belongs_to_pubsub() -> None:
    with pytest.raises(ConfigError, match="bridge 'orders': subscribe is a pubsub setting"):
        plan(BridgeSpec("orders", f"@zmq+tcp://{L}:0?subscribe=a.", f"sp+tcp://{L}:1"))


def test_every_mistake_at_once_naming_bridge_and_side() -> None:
    with pytest.raises(ConfigError) as info:
        plan(BridgeSpec("orders", f"@zmq+tcp://{L}:0?hwm=-1", f"sp+tcp://{L}:1?linger=soon"))
    lines = str(info.value).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("bridge 'orders' front: ") and "hwm" in lines[0]
    assert lines[1].startswith("bridge 'orders' back: ") and "linger" in lines[1]


@pytest.mark.parametrize(("front", "back", "said"), [
    # the front's value cannot be read; the back's backend refuses a setting
    (f"@zmq+tcp://{L}:0?hwm=abc", f">sp+tcp://{L}:1?backend=pynng&sndbuf=4k",
     ("hwm", "backend pynng does not support sndbuf")),
    # the back's URL names an unknown setting; the front misses its CURVE certificate
    (f"@zmq+tcp://{L}:0?curve_server=1", f">sp+tcp://{L}:1?recv_timeout=x",
     ("CURVE needs curve_cert=PATH", "unknown option 'recv_timeout'")),
    # the front's backend does not exist; the back's transport takes no buffer size
    (f"@zmq+tcp://{L}:0?backend=nope", ">sp+inproc://x?sndbuf=4k",
     ("unknown backend 'nope'", "sndbuf")),
])
def test_a_side_that_cannot_be_read_hides_none_of_the_others_mistakes(
        front: str, back: str, said: tuple[str, str]) -> None:
    """Stop 40's note: a mistake that stops one side being read (its URL, a value, its
    backend) once hid every rule the other side broke, to be met only on the next try."""
    with pytest.raises(ConfigError) as info:
        plan(BridgeSpec("orders", front, back))
    lines = str(info.value).splitlines()
    assert len(lines) == 2, lines
    by_side = {line.split(":", 1)[0]: line for line in lines}
    assert said[0] in by_side["bridge 'orders' front"]
    assert said[1] in by_side["bridge 'orders' back"]


@pytest.mark.parametrize(("front", "back", "forwarder", "said"), [
    # the front's value cannot be read; the back is any+ (a rule of the back alone)
    (f"@zmq+tcp://{L}:0?hwm=0", f"any+tcp://{L}:1", "auto",
     ("front: bad value '0' for hwm", "back: any+ is for a front")),
    # the front dials any+ (a rule of the front alone); the back's value cannot be read
    (f">any+tcp://{L}:0", f"sp+tcp://{L}:1?hwm=x", "auto",
     ("front: any+ listens; it cannot dial", "back: bad value 'x' for hwm")),
    # the front's certificate is not there; the back's value cannot be read
    (f"@zmq+tcp://{L}:0?curve_server=1&curve_cert=/nonexistent/cert", f"sp+tcp://{L}:1?hwm=0",
     "auto", ("front: curve_cert: cannot read certificate '/nonexistent/cert'", "back: bad value '0'")),
    # the sides disagree on the pattern; the proxy cannot join two families either
    (f"@zmq+tcp://{L}:0?pattern=pubsub", f"sp+tcp://{L}:1?pattern=pipeline", "proxy",
     ("the front says pattern=pubsub", "forwarder=proxy needs the same family")),
])
def test_no_mistake_of_one_side_hides_a_rule_or_a_file_of_the_other(
        front: str, back: str, forwarder: str, said: tuple[str, str]) -> None:
    """A rule of one side alone (any+ on a back, an any+ front that dials), a file a sound
    side names, and the rules that need no pattern are reported whatever else is wrong in the
    bridge: each once, in the same run."""
    spec = BridgeSpec("orders", front, back, forwarder=forwarder)
    with pytest.raises(ConfigError) as info:
        plan(spec)
    lines = str(info.value).splitlines()
    assert len(lines) == 2, lines
    for text in said:
        assert sum(text in line for line in lines) == 1, (text, lines)


def test_a_side_opens_with_the_bridges_limits_and_its_role() -> None:
    p = plan(BridgeSpec("orders", f"@zmq+tcp://{L}:0", f"sp+tcp://{L}:1?hwm=50"))
    assert (p.pattern, p.front.kind, p.back.kind) == ("reqrep", "REP", "REQ")
    assert p.front.options.router_mandatory and not p.back.options.router_mandatory
    assert p.back.options.hwm == 50 and p.front.options.hwm == 1000


def test_a_start_and_a_reload_read_each_file_once(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A bridge is planned once per start (and per reload): the check's plan is the one the
    bridge opens with, so its files are read once, not once for the check and again to open."""
    import asyncio

    from gateway.cli import _checked
    from gateway.device import Bridge

    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    reads: list[str] = []
    read_text = Path.read_text

    def counted(self: Path, *args: Any, **kwargs: Any) -> str:
        if self == secret:
            reads.append(str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    spec = BridgeSpec("once", f"@zmq+tcp://{L}:0",
                      f">zmq+tcp://{L}:9?plain_username=u&plain_password_file={secret}")

    async def start() -> None:
        bridges = [Bridge.from_spec(s) for s in _checked([spec])]  # what the supervisor does
        for bridge in bridges:
            bridge.open()
            bridge.close()

    for time in (1, 2):  # the start, then a reload (the file again, once)
        asyncio.run(start())
        assert len(reads) == time, reads
