"""gateway.options: endpoint settings, their spellings and units, as tables."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import options
from gateway.adapter import SideOptions
from gateway.errors import ConfigError


@pytest.mark.parametrize(("value", "seconds"), [
    ("100", 0.1), (250, 0.25), (1.5, 0.0015), ("250ms", 0.25), ("2s", 2.0), ("1.5s", 1.5),
    ("1m", 60.0), (" 10 ms ", 0.01), ("0", 0.0),
])
def test_duration_is_milliseconds_unless_a_unit_says(value: object, seconds: float) -> None:
    assert options.duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "abc", "-1", "1h", "2 s s", True, float("nan"), -5, "1e3"])
def test_bad_durations(value: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        options.duration(value)


@pytest.mark.parametrize(("convert", "value", "expected"), [
    (options.count, "1", 1), (options.count, 5000, 5000),
    (options.whole, "0", 0), (options.whole, 128, 128),
    (options.size, "1024", 1024), (options.size, "64k", 65536), (options.size, "1MiB", 1 << 20),
    (options.size, 10, 10),
    (options.flag, "yes", True), (options.flag, "0", False), (options.flag, True, True),
    (options.flag, "OFF", False),
])
def test_converters(convert: Any, value: object, expected: object) -> None:
    assert convert(value) == expected


@pytest.mark.parametrize(("convert", "value"), [
    (options.count, "0"), (options.count, "-3"), (options.count, True), (options.count, 1.5),
    (options.whole, "x"), (options.size, "0"), (options.size, "12q"), (options.flag, "maybe"),
])
def test_converters_refuse(convert: Any, value: object) -> None:
    with pytest.raises(ValueError):
        convert(value)


def test_every_row_sets_a_side_options_field_and_names_are_unique() -> None:
    fields = set(SideOptions.__dataclass_fields__)
    assert {o.field for o in options.OPTIONS} <= fields
    spellings = [n for o in options.OPTIONS for n in (o.name, *o.aliases)]
    assert len(spellings) == len(set(spellings))
    assert all(o.help for o in options.OPTIONS)


def test_read_gives_fields_and_accepts_libzmq_aliases() -> None:
    got = options.read([("hwm", "5000"), ("handshake_timeout", "2s"), ("MaxMsgSize", "64k")],
                       "url")
    assert got == {"hwm": 5000, "handshake_timeout": 2.0, "max_message_size": 65536}


def test_read_reports_every_mistake_at_once_with_where() -> None:
    with pytest.raises(ConfigError) as info:
        options.read([("hwm", "x"), ("nope", "1"), ("sndhwm", "3"),
                      ("linger", "later")], "'zmq+tcp://h:1?...'")
    lines = str(info.value).splitlines()
    assert lines == [
        "bad value 'x' for hwm in 'zmq+tcp://h:1?...': expected a whole number, at least 1",
        f"unknown option 'nope' (known: backend, {options.known()}) in 'zmq+tcp://h:1?...'",
        "option hwm given twice ('hwm' and 'sndhwm') in 'zmq+tcp://h:1?...'",
        "bad value 'later' for linger in 'zmq+tcp://h:1?...': expected a duration: "
        "milliseconds, or 250ms, 2s, 1m",
    ]


def test_merged_refuses_a_setting_given_twice() -> None:
    assert options.merged({"hwm": 1}, {"linger": 0.1}) == {"hwm": 1, "linger": 0.1}
    with pytest.raises(ConfigError, match="hwm set both in the URL and in the table"):
        options.merged({"hwm": 1}, {"hwm": 2}, "bridge b front")


def test_help_text_lists_every_option() -> None:
    text = options.help_text()
    for o in options.OPTIONS:
        if o.refused:  # inline secrets: refused with a hint, not offered
            assert f"  {o.name} " not in text
            continue
        assert f"  {o.name} " in text
    assert max(len(line) for line in text.splitlines()) <= 79


def test_the_design_page_lists_every_setting() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "design.md").read_text()
    for o in options.OPTIONS:
        assert f"`?{o.name}=`" in page, o.name


@pytest.mark.parametrize(("value", "secs"), [("60", 60.0), (30, 30.0), ("2m", 120.0),
                                             ("1500ms", 1.5)])
def test_keepalive_seconds_are_seconds_as_in_libzmq(value: object, secs: float) -> None:
    assert options.seconds(value) == secs


@pytest.mark.parametrize("value", ["0", "500ms", "x", True, -1])
def test_keepalive_seconds_refused(value: object) -> None:
    with pytest.raises(ValueError, match="seconds"):
        options.seconds(value)


def test_heartbeat_ttl_fits_a_ping() -> None:
    assert options.ttl("6553.5s") == 6553.5
    with pytest.raises(ValueError, match="6553.5"):
        options.ttl("6554s")


def test_liveness_rows() -> None:
    got = options.read([("heartbeat", "250"), ("heartbeat_ttl", "2s"),
                        ("heartbeat_timeout", "1s"), ("router_handover", "0"),
                        ("tcp_keepalive", "off"), ("tcp_keepalive_idle", "30"),
                        ("tcp_keepalive_intvl", "5s"), ("tcp_keepalive_cnt", "3")], "url")
    assert got == {"heartbeat_ivl": 0.25, "heartbeat_ttl": 2.0, "heartbeat_timeout": 1.0,
                   "router_handover": False, "tcp_keepalive": False,
                   "tcp_keepalive_idle": 30.0, "tcp_keepalive_intvl": 5.0,
                   "tcp_keepalive_cnt": 3}


def test_sp_refuses_heartbeats_and_handover_but_keeps_keepalive() -> None:
    settings = {"heartbeat_ivl": 1.0, "router_handover": True, "tcp_keepalive_idle": 30.0}
    with pytest.raises(ConfigError) as info:
        options.check_family(settings, "sp", "bridge b front")
    text = str(info.value)
    assert "heartbeat_ivl, router_handover in bridge b front: not on SP" in text
    assert "SP has no heartbeat" in text and "\n" not in text
    options.check_family({"tcp_keepalive_idle": 30.0}, "sp")
    options.check_family(settings, "zmtp")
@pytest.mark.parametrize(("value", "expect"), [
    ("pubsub", "pubsub"), ("PIPELINE", "pipeline"), ("pair", "pair"), ("pair1", "pair1"),
    ("reqrep", "reqrep")])
def test_pattern_values(value: str, expect: str) -> None:
    assert options.pattern(value) == expect


@pytest.mark.parametrize("value", ["bus", "", True, "pub"])
def test_bad_pattern_values(value: object) -> None:
    with pytest.raises(ValueError):
        options.pattern(value)


@pytest.mark.parametrize(("value", "expect"), [
    ("a.,b.", (b"a.", b"b.")),
    ("", (b"",)),  # the empty prefix: everything
    ("a.,a.", (b"a.",)),
    (["a,b", ""], (b"a,b", b"")),  # TOML lists may hold commas
    ("é.", ("é.".encode(),)),
])
def test_subscribe_topics(value: object, expect: tuple[bytes, ...]) -> None:
    assert options.topics(value) == expect


@pytest.mark.parametrize("value", [3, [1], None])
def test_bad_subscribe_topics(value: object) -> None:
    with pytest.raises(ValueError):
        options.topics(value)


@pytest.mark.parametrize(("value", "networks"), [
    ("127.0.0.1/32", ("127.0.0.1/32",)),
    ("127.0.0.1, 10.1.2.3/8,::1", ("127.0.0.1/32", "10.0.0.0/8", "::1/128")),
    (["192.168.0.0/16"], ("192.168.0.0/16",)),
])
def test_cidrs(value: object, networks: tuple[str, ...]) -> None:
    assert options.cidrs(value) == networks


@pytest.mark.parametrize("value", ["", "10.0.0.300/8", "localhost", ","])
def test_cidrs_refused(value: object) -> None:
    with pytest.raises(ValueError, match="CIDR"):
        options.cidrs(value)
