"""gateway.settings.schema: endpoint settings declared once (SideOptions), their spellings,
defaults and help, and the readers made from it."""

from __future__ import annotations

import pytest

from gateway.errors import ConfigError
from gateway.settings import schema as options
from gateway.settings.schema import SideOptions


def test_every_setting_is_a_side_options_field_and_names_are_unique() -> None:
    fields = set(SideOptions.__dataclass_fields__)
    assert {o.field for o in options.SETTINGS} <= fields
    spellings = [n for o in options.SETTINGS for n in (o.name, *o.aliases)]
    assert len(spellings) == len(set(spellings))
    assert not set(spellings) & set(options.REFUSED)
    assert all(o.help for o in options.SETTINGS)


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
    for o in options.SETTINGS:
        assert f"  {o.name} " in text
    for refused in options.REFUSED:  # inline secrets: refused with a hint, not offered
        assert f"  {refused} " not in text
    assert max(len(line) for line in text.splitlines()) <= 79


def test_the_design_page_lists_every_setting() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "design.md").read_text()
    for o in options.SETTINGS:
        assert f"`?{o.name}=`" in page, o.name


def test_liveness_rows() -> None:
    got = options.read([("heartbeat", "250"), ("heartbeat_ttl", "2s"),
                        ("heartbeat_timeout", "1s"), ("router_handover", "0"),
                        ("tcp_keepalive", "off"), ("tcp_keepalive_idle", "30"),
                        ("tcp_keepalive_intvl", "5s"), ("tcp_keepalive_cnt", "3")], "url")
    assert got == {"heartbeat_ivl": 0.25, "heartbeat_ttl": 2.0, "heartbeat_timeout": 1.0,
                   "router_handover": False, "tcp_keepalive": False,
                   "tcp_keepalive_idle": 30.0, "tcp_keepalive_intvl": 5.0,
                   "tcp_keepalive_cnt": 3}


def test_the_schema_declares_each_default_once_and_every_reader_takes_the_same_set() -> None:
    """Issue 21: one declaration per setting. Each default is the SideOptions field's (the
    engine's SocketOptions and the bridge's Limits take it from there, not a copy); the help
    text, a TOML table and a URL query accept exactly the settings of the schema."""
    from dataclasses import fields

    from gateway.config import Limits, from_dict
    from gateway.engine.options import SocketOptions
    from gateway.url import parse

    defaults = {f.name: f.default for f in fields(SideOptions)}
    engine = {f.name: f.default for f in fields(SocketOptions)}
    assert all(engine[name] == value for name, value in defaults.items())
    assert Limits().max_message_size == defaults["max_message_size"]
    assert Limits().hop_limit == defaults["hop_limit"]
    assert Limits().message_timeout == defaults["message_timeout"]
    for s in options.SETTINGS:
        assert s.default == defaults[s.field], s.name
    samples = {"count": "3", "probes": "3", "whole": "3", "size": "3", "buffer_size": "64k", "flag": "1",
               "duration": "5",
               "seconds": "5", "ttl": "5", "path": "/tmp/x", "cidrs": "127.0.0.1/32",
               "z85_key": "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", "topics": "a.",
               "text": "u", "host_name": "h", "convert": "reqrep",
               "origins": "http://127.0.0.1:8080"}
    help_names = {line.split()[0] for line in options.help_text().splitlines()
                  if line.startswith("  ") and not line.startswith("   ")}
    assert help_names == {s.name for s in options.SETTINGS}
    for s in options.SETTINGS:
        value = "none" if s.name == "tls_verify" else samples[s.convert.__name__]
        url = parse(f"@zmq+tcp://127.0.0.1:1?{s.name}={value}")
        assert list(url.settings) == [s.field], s.name
        toml = from_dict({"bridge": [{"front": "@zmq+tcp://127.0.0.1:1",
                                      "back": ">zmq+tcp://127.0.0.1:2",
                                      "front_options": {s.name: value}}]})
        assert [f for f, _ in toml.bridges[0].front_options] == [s.field], s.name
    with pytest.raises(ConfigError, match="unknown option"):
        parse("@zmq+tcp://127.0.0.1:1?not_a_setting=1")


@pytest.mark.parametrize(("key", "secret"), [
    ("plain_password", True), ("curve_secretkey", True), ("curve_secret_key", True),
    ("plainpassword", True), ("curve_secret", True), ("db_pwd", True), ("Plain%5FPassword", True),
    ("plain_password_file", False), ("plain_passwords", False), ("curve_secretkey_file", False),
    ("curve_serverkey", False), ("hwm", False), ("curve_cert", False),
    # misspelt: a letter dropped, added, swapped or changed (the value was once echoed)
    ("plain_pasword", True), ("plainpasword", True), ("plain_passwrod", True),
    ("curve_secrtkey", True), ("curve_sceretkey", True), ("privte_key", True),
    # what a URL's text holds besides settings, close to none of those words
    ("zmq+tcp", False), ("gateway-host.example", False), ("127.0.0.1", False),
    ("reconnect", False), ("select", False), ("orders", False), ("prices", False),
])
def test_looks_secret(key: str, secret: bool) -> None:
    assert options.looks_secret(key) is secret


@pytest.mark.parametrize(("text", "shown"), [
    ("5;plain_password=pw", "5;plain_password=***"),
    ("1;curve_secretkey=x&hwm=1", "1;curve_secretkey=***&hwm=1"),
    ("plainpassword%3Dpw", "plainpassword%3D***"),
    ("{'plain_password': 'pw'}", "{'plain_password':***"),
    ("hwm=5&plain_passwords=/etc/pw", "hwm=5&plain_passwords=/etc/pw"),
    ("plain_password=a;curve_secret=b", "plain_password=***"),
])
def test_mask(text: str, shown: str) -> None:
    assert options.mask(text) == shown


def test_a_bad_value_holding_a_secret_is_masked() -> None:
    """Finding 10 (fuzz: secret-echo-loose): the value of a setting is echoed, masked."""
    with pytest.raises(ConfigError) as info:
        options.read([("hwm", "5;plain_password=hunter2"), ("allow", "10.0.0.1;pwd=hunter3"),
                     ("plain_passwordz", "hunter4")], "bridge 'b' front_options")
    text = str(info.value)
    assert "hunter" not in text, text
    assert "bad value '5;plain_password=***' for hwm in bridge 'b' front_options" in text
    assert "allow" in text and "plain_passwordz" in text
