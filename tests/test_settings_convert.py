"""gateway.settings.convert: how a setting's value is read (syntax only), as tables."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.settings import convert as c


@pytest.mark.parametrize(("value", "seconds"), [
    ("100", 0.1), (250, 0.25), (1.5, 0.0015), ("250ms", 0.25), ("2s", 2.0), ("1.5s", 1.5),
    ("1m", 60.0), (" 10 ms ", 0.01), ("0", 0.0),
])
def test_duration_is_milliseconds_unless_a_unit_says(value: object, seconds: float) -> None:
    assert c.duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "abc", "-1", "1h", "2 s s", True, float("nan"), -5, "1e3"])
def test_bad_durations(value: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        c.duration(value)


@pytest.mark.parametrize(("convert", "value", "expected"), [
    (c.count, "1", 1), (c.count, 5000, 5000),
    (c.whole, "0", 0), (c.whole, 128, 128),
    (c.size, "1024", 1024), (c.size, "64k", 65536), (c.size, "1MiB", 1 << 20),
    (c.size, 10, 10),
    (c.flag, "yes", True), (c.flag, "0", False), (c.flag, True, True),
    (c.flag, "OFF", False),
])
def test_converters(convert: Any, value: object, expected: object) -> None:
    assert convert(value) == expected


@pytest.mark.parametrize(("convert", "value"), [
    (c.count, "0"), (c.count, "-3"), (c.count, True), (c.count, 1.5),
    (c.whole, "x"), (c.size, "0"), (c.size, "12q"), (c.flag, "maybe"),
])
def test_converters_refuse(convert: Any, value: object) -> None:
    with pytest.raises(ValueError):
        convert(value)


@pytest.mark.parametrize(("value", "secs"), [("60", 60.0), (30, 30.0), ("2m", 120.0),
                                             ("1500ms", 1.5)])
def test_keepalive_seconds_are_seconds_as_in_libzmq(value: object, secs: float) -> None:
    assert c.seconds(value) == secs


@pytest.mark.parametrize("value", ["0", "500ms", "x", True, -1])
def test_keepalive_seconds_refused(value: object) -> None:
    with pytest.raises(ValueError, match="seconds"):
        c.seconds(value)


def test_heartbeat_ttl_fits_a_ping() -> None:
    assert c.ttl("6553.5s") == 6553.5
    with pytest.raises(ValueError, match="6553.5"):
        c.ttl("6554s")


@pytest.mark.parametrize("value", ["bus", "", True, "pub"])
def test_bad_pattern_values(value: object) -> None:
    with pytest.raises(ValueError):
        c.pattern(value)


@pytest.mark.parametrize(("value", "expect"), [
    ("a.,b.", (b"a.", b"b.")),
    ("", (b"",)),  # the empty prefix: everything
    ("a.,a.", (b"a.",)),
    (["a,b", ""], (b"a,b", b"")),  # TOML lists may hold commas
    ("é.", ("é.".encode(),)),
])
def test_subscribe_topics(value: object, expect: tuple[bytes, ...]) -> None:
    assert c.topics(value) == expect


@pytest.mark.parametrize("value", [3, [1], None])
def test_bad_subscribe_topics(value: object) -> None:
    with pytest.raises(ValueError):
        c.topics(value)


@pytest.mark.parametrize(("value", "networks"), [
    ("127.0.0.1/32", ("127.0.0.1/32",)),
    ("127.0.0.1, 10.1.2.3/8,::1", ("127.0.0.1/32", "10.0.0.0/8", "::1/128")),
    (["192.168.0.0/16"], ("192.168.0.0/16",)),
])
def test_cidrs(value: object, networks: tuple[str, ...]) -> None:
    assert c.cidrs(value) == networks


@pytest.mark.parametrize("value", ["", "10.0.0.300/8", "localhost", ","])
def test_cidrs_refused(value: object) -> None:
    with pytest.raises(ValueError, match="CIDR"):
        c.cidrs(value)
