"""gateway.config: TOML config parsing, as tables of inputs and outcomes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config import Config, Limits, from_dict, limits_from, load
from gateway.device import check
from gateway.errors import ConfigError
from gateway.settings import schema as options

REPO = Path(__file__).resolve().parents[1]

ONE = {"bridge": [{"front": "@zmq+tcp://127.0.0.1:5555", "back": ">sp+tcp://127.0.0.1:6000"}]}


def _with(**sections: Any) -> dict[str, Any]:
    return {**ONE, **sections}


# ---------------------------------------------------------------------------------------------
# good configs


def test_minimal_config_defaults() -> None:
    cfg = from_dict(ONE)
    assert isinstance(cfg, Config)
    assert [(b.name, b.front, b.back) for b in cfg.bridges] == [
        ("bridge1", "@zmq+tcp://127.0.0.1:5555", ">sp+tcp://127.0.0.1:6000")]
    assert cfg.limits == Limits()
    assert (cfg.log_format, cfg.log_level, cfg.metrics) == ("console", "info", None)
    assert cfg.raw is ONE


def test_full_config() -> None:
    cfg = from_dict({
        "gateway": {"log_format": "json", "log_level": "debug", "metrics": "127.0.0.1:9100"},
        "limits": {"max_message_size": 4096, "hop_limit": 15, "pending_tokens": 10,
                   "token_ttl": 2, "grace": 0.5},
        "bridge": [
            {"name": "a", "front": "zmq+tcp://127.0.0.1:1", "back": "sp+tcp://127.0.0.1:2"},
            {"front": "nng+tcp://127.0.0.1:3?backend=native", "back": "zmq+ipc:///tmp/x"},
        ],
        "plugins": {"mine": {"option": 1}},
    })
    assert [b.name for b in cfg.bridges] == ["a", "bridge2"]
    assert cfg.limits == Limits(max_message_size=4096, hop_limit=15, pending_tokens=10,
                                token_ttl=2.0, grace=0.5)
    assert isinstance(cfg.limits.token_ttl, float)
    assert (cfg.log_format, cfg.log_level, cfg.metrics) == ("json", "debug", "127.0.0.1:9100")
    assert cfg.raw["plugins"] == {"mine": {"option": 1}}  # for the gateway_configure hook


def test_whole_float_accepted_for_integer_limit() -> None:
    assert from_dict(_with(limits={"pending_tokens": 10.0})).limits.pending_tokens == 10


def test_shipped_example_config_parses() -> None:
    cfg = load(str(REPO / "examples" / "gateway.toml"))
    assert [b.name for b in cfg.bridges] == ["zmq-to-nng", "nng-to-zmq"]
    assert cfg.limits == Limits()  # it spells out the defaults
    assert cfg.metrics == "127.0.0.1:9100"


def test_load_from_file(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[[bridge]]\nname = "x"\nfront = "zmq+tcp://127.0.0.1:1"\n'
                    'back = "sp+tcp://127.0.0.1:2"\n')
    assert load(str(path)).bridges[0].name == "x"


# ---------------------------------------------------------------------------------------------
# bad configs: one ConfigError each, naming the problem


@pytest.mark.parametrize(("data", "message"), [
    ({}, "no [[bridge]] tables"),
    ({"bridge": []}, "no [[bridge]] tables"),
    ({"bridge": {"front": "x", "back": "y"}}, "no [[bridge]] tables"),
    ({"bridge": [{"front": "zmq+tcp://127.0.0.1:1"}]}, "bridge 'bridge1' back: missing"),
    ({"bridge": ["zmq+tcp://127.0.0.1:1"]}, "bridge #1: must be a table"),
    ({"bridge": [{"front": 5, "back": "sp+tcp://127.0.0.1:1"}]}, "bridge 'bridge1' front: must be a string"),
    ({"bridge": [{"front": "zmq+tcp://127.0.0.1:1", "back": "sp+tcp://127.0.0.1:1",
                  "name": 3}]}, "bridge #1 name: must be a string"),
    ({"bridge": [{"front": "zmq+tcp://127.0.0.1:1", "back": "sp+tcp://127.0.0.1:1",
                  "bakend": "native"}]}, "bridge 'bridge1' bakend: unknown key"),
    ({"bridge": [{"front": "zmq+tcp://127.0.0.1", "back": "sp+tcp://127.0.0.1:1"}]},
     "needs host:port"),
    ({"bridge": [{"front": "foo+tcp://127.0.0.1:1", "back": "sp+tcp://127.0.0.1:1"}]},
     "unknown wire 'foo'"),
    ({"bridge": [{"front": "zmq+tcp://127.0.0.1:1", "back": "sp+tcp://127.0.0.1:1?x=1"}]},
     "unknown option 'x'"),
    (_with(extra={}), "[extra]: unknown section"),
    (_with(gateway=3), "[gateway]: must be a table"),
    (_with(gateway={"log_format": "xml"}), "[gateway] log_format: must be console or json"),
    (_with(gateway={"log_level": "verbose"}), "[gateway] log_level: must be one of"),
    (_with(gateway={"metrics": 9100}), "[gateway] metrics: must be"),
    (_with(gateway={"metrics": "9100"}), "needs host:port"),
    (_with(gateway={"metrics": "127.0.0.1:http"}), "bad port"),
    (_with(gateway={"log_fmt": "json"}), "[gateway] log_fmt: unknown key: did you mean "
                                         "'log_format'?"),
    (_with(gateway={"unknown_peers": "maybe"}), "[gateway] unknown_peers: must be waiting or "
                                                "ready"),
    (_with(limits={"grase": 5}), "unknown limit 'grase': did you mean 'grace'?"),
    (_with(limitz={}), "[limitz]: unknown section: did you mean 'limits'?"),
    (_with(limits=3), "[limits]: must be a table"),
    (_with(limits={"ttl": 5}), "unknown limit 'ttl'"),
    (_with(limits={"hop_limit": 0}), "must be a positive number"),
    (_with(limits={"hop_limit": 16}), "hop_limit must be within 1..15"),
    (_with(limits={"grace": -1}), "must be a positive number"),
    (_with(limits={"token_ttl": "60"}), "must be a positive number"),
    (_with(limits={"pending_tokens": True}), "must be a positive number"),
    (_with(limits={"pending_tokens": 0.5}), "must be a whole number"),
    (_with(limits={"max_message_size": 1.5}), "must be a whole number"),
    (_with(limits={"hop_limit": float("inf")}), "must be a positive number"),
    (_with(limits={"token_ttl": float("nan")}), "must be a positive number"),
    (_with(plugins=[1, 2]), "[plugins]: must be a table"),
], ids=lambda v: None if isinstance(v, dict) else v)
def test_bad_config(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_dict(data, source="g.toml")
    assert message in str(err.value)
    assert "\n" not in str(err.value)  # one mistake: one line
    assert str(err.value).startswith("g.toml: ")  # which file


def test_every_mistake_at_once_with_file_bridge_and_key() -> None:
    data = {
        "gateway": {"log_format": "xml"},
        "limits": {"hop_limit": 99},
        "bridge": [
            {"name": "orders", "front": "zmq+tcp://127.0.0.1", "back": "sp+tcp://127.0.0.1:1"},
            {"name": "orders", "front": "zmq+tcp://127.0.0.1:2", "back": "sp+tcp://127.0.0.1:3"},
            {"name": "audit", "front": "zmq+tcp://127.0.0.1:4", "back": "sp+tcp://127.0.0.1:5",
             "bakend": "native"},
        ],
    }
    with pytest.raises(ConfigError) as err:
        from_dict(data, source="g.toml")
    lines = str(err.value).splitlines()
    assert len(lines) == 5, lines
    assert all(line.startswith("g.toml: ") for line in lines)
    text = str(err.value)
    assert "[gateway] log_format" in text and "[limits]" in text and "hop_limit" in text
    assert "bridge 'orders' front: " in text and "needs host:port" in text
    assert "bridge 'orders': duplicate name" in text
    assert "bridge 'audit' bakend: unknown key" in text


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read"),
    ("dir", "cannot read"),
    (b"[[bridge]\n", "g.toml: "),
    (b"front = \n", "g.toml: "),
    (b"\xff\xfe not utf-8", "g.toml: "),
    (b"", "no [[bridge]] tables"),
], ids=["missing", "directory", "bad-table", "bad-value", "not-utf8", "empty"])
def test_load_errors(tmp_path: Path, content: bytes | str | None, message: str) -> None:
    path = tmp_path / "g.toml"
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load(str(path))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------
# limits_from (shared by the config file and the CLI flags)


def test_limits_from_overrides_a_base() -> None:
    base = Limits(pending_tokens=5)
    out = limits_from({"grace": 0.1}, base)
    assert out.pending_tokens == 5 and out.grace == 0.1


def test_limits_from_empty_is_defaults() -> None:
    assert limits_from({}) == Limits()


def test_bridge_option_tables_are_read_into_settings() -> None:
    cfg = from_dict({"bridge": [{
        "name": "orders", "front": "@zmq+tcp://127.0.0.1:5555?hwm=3000",
        "back": ">sp+tcp://127.0.0.1:6000",
        "front_options": {"handshake_ivl": "2s"},
        "back_options": {"reconnect_ivl": 100, "reconnect_ivl_max": "5s"}}]})
    (b,) = cfg.bridges
    assert dict(b.front_options) == {"handshake_timeout": 2.0}  # the URL's hwm stays there
    assert dict(b.back_options) == {"reconnect_ivl": 0.1, "reconnect_ivl_max": 5.0}


def test_bridge_option_table_refuses_heartbeats_on_sp() -> None:
    data = {"bridge": [{"name": "b", "front": "@sp+tcp://127.0.0.1:5555",
                        "back": ">zmq+tcp://127.0.0.1:6000",
                        "front_options": {"heartbeat_ivl": "1s", "tcp_keepalive_idle": 30},
                        "back_options": {"heartbeat_ivl": "1s"}}]}
    assert check(from_dict(data, source="g.toml").bridges, "g.toml") == [
        "g.toml: bridge 'b' front: heartbeat_ivl: not on SP (nng/nanomsg) endpoints (SP "
        "has no heartbeat and no routing ids; TCP keepalive applies: tcp_keepalive)"]


def test_bridge_option_mistakes_name_file_bridge_and_table() -> None:
    data = {"bridge": [{
        "name": "orders", "front": "@zmq+tcp://127.0.0.1:5555?hwm=3000&linger=x",
        "back": ">sp+tcp://127.0.0.1:6000",
        "front_options": {"hwm": 10, "colour": "red"},
        "back_options": "fast"}]}
    with pytest.raises(ConfigError) as info:
        from_dict(data, source="g.toml")
    assert str(info.value).splitlines() == [
        "g.toml: bridge 'orders' front: bad value 'x' for linger in "
        "'@zmq+tcp://127.0.0.1:5555?hwm=3000&linger=x': expected a duration: milliseconds, "
        "or 250ms, 2s, 1m",
        "g.toml: bridge 'orders' front_options: unknown option 'colour' (known: backend, "
        f"{options.known()})",
        "g.toml: bridge 'orders' back_options: must be a table of settings, not 'fast'",
    ]


def test_a_setting_in_the_url_and_the_table_is_refused() -> None:
    data = {"bridge": [{"name": "b", "front": "@zmq+tcp://127.0.0.1:5555?hwm=3000",
                        "back": ">sp+tcp://127.0.0.1:6000", "front_options": {"hwm": 10}}]}
    with pytest.raises(ConfigError, match="bridge 'b' front_options: hwm set both in the URL"):
        from_dict(data, source="g.toml")


def test_security_mistakes_are_reported_with_the_others() -> None:
    data = {"bridge": [{
        "name": "secure", "front": "@zmq+tcp://127.0.0.1:5555?curve_allow=/tmp",
        "back": ">sp+tcp://127.0.0.1:6000?plain_server=1",
        "front_options": {"plain_password": "hunter2"}}]}
    with pytest.raises(ConfigError) as info:
        from_dict(data, source="g.toml")
    lines = str(info.value).splitlines()
    assert "g.toml: bridge 'secure' front_options: bad value for plain_password: a file, not " \
           "the secret itself: secrets are never written inline in a URL or TOML (use " \
           "plain_password_file=PATH)" in lines
    assert not any("hunter2" in line for line in lines)
    data["bridge"][0].pop("front_options")  # the syntax is right: the rules say the rest
    lines = check(from_dict(data, source="g.toml").bridges, "g.toml")
    assert "g.toml: bridge 'secure' back: plain_server: ZeroMQ settings on an SP endpoint " \
           "(SP security is TLS)" in lines
    assert "g.toml: bridge 'secure' front: curve_allow: only for a CURVE server (add " \
           "curve_server=1)" in lines


@pytest.mark.parametrize("bridge", [
    {"front": "@zmq+tcp://127.0.0.1:5555?max_connections=10",
     "back": ">sp+tcp://127.0.0.1:6000?allow=10.0.0.0/8"},
    {"front": ">zmq+tcp://127.0.0.1:5555?allow=10.0.0.0/8",  # issue 21: a dialling front
     "back": "@sp+tcp://127.0.0.1:6000"},
])
def test_listener_limits_belong_to_a_bound_endpoint(bridge: dict[str, str]) -> None:
    """``allow``/``max_connections`` on a dialling endpoint did nothing on 49db3ab when the
    URL was given to ``gateway bridge`` (the rule lived only in the config file's checks)."""
    side = "back" if bridge["back"].startswith(">") else "front"
    lines = check(from_dict({"bridge": [{"name": "b", **bridge}]}, source="g.toml").bridges,
                  "g.toml")
    assert f"g.toml: bridge 'b' {side}: allow: applies to a bound endpoint (@), not a " \
           "connecting one" in lines


def test_an_any_front_takes_neither_zeromq_security_nor_tls() -> None:
    """One port, both wires: CURVE/PLAIN would leave its SP clients out, TLS is not its first
    byte; both said at once, with the bridge and side."""
    data = {"bridge": [
        {"name": "p", "front": "@any+tcp://127.0.0.1:5555?plain_server=1",
         "back": ">sp+tcp://127.0.0.1:6000"},
        {"name": "t", "front": "@any+tcp://127.0.0.1:5556?tls_verify=none",
         "back": ">zmq+tcp://127.0.0.1:6001"},
        {"name": "ok", "front": "@any+tcp://127.0.0.1:5557?hwm=10&heartbeat_ivl=1s",
         "back": ">zmq+tcp://127.0.0.1:6002"}]}
    lines = check(from_dict(data, source="g.toml").bridges, "g.toml")
    assert any(line.startswith("g.toml: bridge 'p' front: plain_server: ZeroMQ security would "
                               "not cover the SP clients of an any+ endpoint") for line in lines)
    assert any(line.startswith("g.toml: bridge 't' front: tls_verify: TLS settings need")
               for line in lines)
    assert not any("bridge 'ok'" in line for line in lines)


def test_a_secret_in_a_value_echoed_by_the_config_is_masked() -> None:
    """Issue 20 finding 10 (fuzz: secret-echo-loose): the values the config echoes (a front
    that is not a string, a table's bad value, the URL) never show a secret."""
    with pytest.raises(ConfigError) as info:
        from_dict({"bridge": [
            {"name": "a", "front": {"plain_password": "hunter2"}, "back": "sp+tcp://h:1"},
            {"name": "b", "front": "zmq+tcp://h:1?hwm=5;curve_secretkey=hunter3",
             "back": "sp+tcp://h:2", "back_options": {"linger": "1;pwd=hunter4"}},
        ]}, source="g.toml")
    text = str(info.value)
    assert "hunter" not in text, text
    assert "g.toml: bridge 'a' front: must be a string" in text
    assert "g.toml: bridge 'b' front: bad value '5;curve_secretkey=***' for hwm" in text
    assert "bridge 'b' front" in text and "bridge 'b' back_options" in text
