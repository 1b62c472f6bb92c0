"""Endpoint URLs: wire aliases, CZMQ's @/> prefixes, the backend option, and clear errors."""

from __future__ import annotations

import pytest

from gateway.errors import ConfigError
from gateway.url import Endpoint, parse, split_host_port


@pytest.mark.parametrize(
    ("url", "wire", "transport", "address", "mode", "backend"),
    [
        ("zmq+tcp://127.0.0.1:5555", "zmtp", "tcp", "127.0.0.1:5555", None, None),
        ("zmtp+tcp://127.0.0.1:5555", "zmtp", "tcp", "127.0.0.1:5555", None, None),
        ("sp+tcp://127.0.0.1:5555", "sp", "tcp", "127.0.0.1:5555", None, None),
        ("nng+tcp://127.0.0.1:5555", "sp", "tcp", "127.0.0.1:5555", None, None),
        ("nanomsg+tcp://127.0.0.1:5555", "sp", "tcp", "127.0.0.1:5555", None, None),
        ("ZMQ+TCP://127.0.0.1:5555", "zmtp", "tcp", "127.0.0.1:5555", None, None),
        ("  zmq+tcp://127.0.0.1:1  ", "zmtp", "tcp", "127.0.0.1:1", None, None),
        ("@zmq+tcp://*:5555", "zmtp", "tcp", "*:5555", "bind", None),
        (">zmq+tcp://127.0.0.1:5555", "zmtp", "tcp", "127.0.0.1:5555", "connect", None),
        ("@sp+tcp://127.0.0.1:0", "sp", "tcp", "127.0.0.1:0", "bind", None),
        (">nng+tcp://localhost:80", "sp", "tcp", "localhost:80", "connect", None),
        ("zmq+tcp://127.0.0.1:*", "zmtp", "tcp", "127.0.0.1:*", None, None),
        ("zmq+tcp://[::1]:5555", "zmtp", "tcp", "[::1]:5555", None, None),
        ("zmq+ipc:///tmp/x.sock", "zmtp", "ipc", "/tmp/x.sock", None, None),
        (">sp+ipc:///tmp/x.sock", "sp", "ipc", "/tmp/x.sock", "connect", None),
        ("inproc://name", "zmtp", "inproc", "name", None, None),
        ("@inproc://name", "zmtp", "inproc", "name", "bind", None),
        ("sp+inproc://name", "sp", "inproc", "name", None, None),
        ("zmq+tcp://127.0.0.1:5555?backend=native", "zmtp", "tcp", "127.0.0.1:5555", None, "native"),
        ("zmq+tcp://127.0.0.1:5555?backend=pyzmq", "zmtp", "tcp", "127.0.0.1:5555", None, "pyzmq"),
        ("@sp+tcp://127.0.0.1:5555?backend=pynng", "sp", "tcp", "127.0.0.1:5555", "bind", "pynng"),
        ("sp+ipc:///tmp/a b?backend=native", "sp", "ipc", "/tmp/a b", None, "native"),
        ("@any+tcp://127.0.0.1:5555", "any", "tcp", "127.0.0.1:5555", "bind", None),
        ("any+ipc:///tmp/both.sock", "any", "ipc", "/tmp/both.sock", None, None),
    ],
)
def test_parse_table(url: str, wire: str, transport: str, address: str, mode: str | None,
                     backend: str | None) -> None:
    ep = parse(url)
    assert (ep.family, ep.transport, ep.address, ep.mode, ep.backend) == (
        wire, transport, address, mode, backend)  # one word for the wire family: zmtp, sp
    assert ep.lib_url == f"{transport}://{address}"
    # the URL we give back keeps the scheme as written (lower-cased), without prefix or query
    again = parse(ep.url)
    assert (again.family, again.transport, again.address) == (wire, transport, address)
    assert again.mode is None and again.backend is None


def test_url_keeps_the_alias_scheme() -> None:
    assert parse("nng+tcp://127.0.0.1:1").url == "nng+tcp://127.0.0.1:1"
    assert parse("@nanomsg+ipc:///tmp/s").url == "nanomsg+ipc:///tmp/s"
    assert parse("inproc://x").url == "inproc://x"
    assert Endpoint("sp", "tcp", "h:1").url == "sp+tcp://h:1"
    assert parse("zmq+tcp://h:1").url == "zmq+tcp://h:1"  # users write zmq+; the code says zmtp
    assert parse("zmtp+tcp://h:1").url == "zmtp+tcp://h:1"
    assert Endpoint("zmtp", "tcp", "h:1").url == "zmq+tcp://h:1"


def test_with_address_replaces_only_the_address() -> None:
    ep = parse("@sp+tcp://127.0.0.1:0?backend=native")
    real = ep.with_address("127.0.0.1:40001")
    assert real.url == "sp+tcp://127.0.0.1:40001"
    assert (real.mode, real.backend, real.family) == ("bind", "native", "sp")
    assert ep.address == "127.0.0.1:0"  # frozen: the original is unchanged


@pytest.mark.parametrize(
    ("address", "host", "port"),
    [
        ("127.0.0.1:5555", "127.0.0.1", 5555),
        ("localhost:0", "localhost", 0),
        ("*:7", "*", 7),
        ("127.0.0.1:*", "127.0.0.1", 0),
        ("[::1]:5555", "::1", 5555),
        ("h:65535", "h", 65535),
    ],
)
def test_host_port(address: str, host: str, port: int) -> None:
    assert split_host_port(address) == (host, port)
    assert parse(f"zmq+tcp://{address}").host_port() == (host, port)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "@",
        "127.0.0.1:5555",  # no scheme
        "tcp://127.0.0.1:5555",  # no wire
        "ipc:///tmp/x",  # no wire
        "foo+tcp://127.0.0.1:5555",  # unknown wire
        "http://example.com:80",
        "://127.0.0.1:5555",
        "zmq+tcp://",  # no address
        "zmq+tcp://127.0.0.1",  # no port
        "zmq+tcp://127.0.0.1:",
        "zmq+tcp://:5555",  # no host
        "zmq+tcp://127.0.0.1:65536",
        "zmq+tcp://127.0.0.1:99999",
        "zmq+tcp://127.0.0.1:-1",
        "zmq+tcp://127.0.0.1:http",
        "zmq+tcp://127.0.0.1:5555?backend=",
        "zmq+tcp://127.0.0.1:5555?backend=lib zmq",  # which adapters exist: the registry says
        "zmq+tcp://127.0.0.1:5555?color=blue",
        "zmq+tcp://127.0.0.1:5555?backend=native&hwm=0",
        "sp+ipc://",
        "zmq+://127.0.0.1:5555",  # no transport
    ],
)
def test_errors_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(url)
    message = str(info.value)
    assert "\n" not in message and message  # one clear line for the CLI


def test_unknown_transport_against_the_loaded_set() -> None:
    loaded = frozenset({"tcp", "ipc", "inproc"})
    assert parse("zmq+tcp://127.0.0.1:1", transports=loaded).transport == "tcp"
    assert parse("inproc://x", transports=loaded).transport == "inproc"
    with pytest.raises(ConfigError, match="ws"):
        parse("zmq+ws://127.0.0.1:1", transports=loaded)
    # without the loaded set a plugin's scheme parses (the registry decides later)
    assert parse("zmq+ws://127.0.0.1:1").transport == "ws"


def test_engine_refuses_bad_urls() -> None:
    """Socket.bind/connect go through the same parser and the loaded transports."""
    import asyncio

    import gateway

    async def main() -> None:
        async with gateway.Socket("REP") as s:
            for url in ("tcp://127.0.0.1:0", "zmq+nope://x", "zmq+tcp://127.0.0.1",
                        "zmq+tcp://127.0.0.1:0?backend=pyzmq", "sp+tcp://127.0.0.1:0?backend=pynng"):
                with pytest.raises(ConfigError):
                    s.bind(url)
                with pytest.raises(ConfigError):
                    s.connect(url)

    asyncio.run(asyncio.wait_for(main(), 10))


def test_query_settings_are_read_into_side_options_fields() -> None:
    ep = parse("zmq+tcp://127.0.0.1:5555?backend=pyzmq&hwm=5000&reconnect_ivl=250"
               "&reconnect_ivl_max=5s&handshake_ivl=2s&linger=0&maxmsgsize=64k&backlog=16")
    assert ep.backend == "pyzmq"
    assert ep.settings == {"hwm": 5000, "reconnect_ivl": 0.25, "reconnect_ivl_max": 5.0,
                           "handshake_timeout": 2.0, "linger": 0.0,
                           "max_message_size": 65536, "backlog": 16}
    assert ep.url == "zmq+tcp://127.0.0.1:5555"  # the settings are not part of the address
    assert parse("sp+tcp://127.0.0.1:1").settings == {}


def test_liveness_settings_in_a_query() -> None:
    ep = parse("zmq+tcp://127.0.0.1:5555?heartbeat=1s&heartbeat_ttl=3s&router_handover=0"
               "&tcp_keepalive_idle=30")
    assert ep.settings == {"heartbeat_ivl": 1.0, "heartbeat_ttl": 3.0, "router_handover": False,
                           "tcp_keepalive_idle": 30.0}
    assert parse("sp+tcp://127.0.0.1:1?tcp_keepalive=1&tcp_keepalive_cnt=3").settings == {
        "tcp_keepalive": True, "tcp_keepalive_cnt": 3}


@pytest.mark.parametrize(("url", "lines"), [
    ("zmq+tcp://h:1?hwm=0", ["bad value '0' for hwm"]),
    ("zmq+tcp://h:1?hwm=1&hwm=2", ["option hwm given twice"]),
    ("zmq+tcp://h:1?a=1&linger=soon", ["unknown option 'a'", "bad value 'soon' for linger"]),
    ("zmq+tcp://h:1?hwm", ["bad query 'hwm'"]),
])
def test_query_mistakes_all_at_once(url: str, lines: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        parse(url)
    got = str(info.value).splitlines()
    assert len(got) == len(lines)
    for line, want in zip(got, lines, strict=True):
        assert line.startswith(want) and repr(url) in line, line


def test_engine_refuses_what_any_cannot_be() -> None:
    """``any+`` (one port, both wires) binds; it has no dial, no SP-only kind, no ZeroMQ
    security (it would not cover the SP peers) and no TLS or WebSocket transport."""
    import asyncio

    import gateway
    from gateway.security import Security
    from gateway.tls import TlsSettings

    async def main() -> None:
        async with gateway.Socket("ROUTER") as s:
            with pytest.raises(ConfigError, match="a dial says which"):
                s.connect("any+tcp://127.0.0.1:1")
            with pytest.raises(ConfigError, match="tcp or ipc"):
                s.bind("any+ws://127.0.0.1:0")
            assert s.bind("any+tcp://127.0.0.1:0").startswith("any+tcp://127.0.0.1:")
        async with gateway.Socket("PAIR1") as s:
            with pytest.raises(ConfigError, match="SP socket type"):
                s.bind("any+tcp://127.0.0.1:0")
        plain = Security("PLAIN", as_server=True)
        async with gateway.Socket("ROUTER", security=plain) as s:
            with pytest.raises(ConfigError, match="would not cover the SP"):
                s.bind("any+tcp://127.0.0.1:0")
        async with gateway.Socket("ROUTER", tls=TlsSettings(ca="/etc/hostname")) as s:
            with pytest.raises(ConfigError, match="TLS settings need"):
                s.bind("any+tcp://127.0.0.1:0")

    asyncio.run(asyncio.wait_for(main(), 10))


# -- issue 20: Z85 keys and secrets in URLs ------------------------------------------------------
README_KEY = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"  # libzmq's zmq_curve(7) example


def test_a_z85_key_passes_through_a_url_unchanged() -> None:
    """Finding 14: Z85 uses % + & = ? # / : itself; the 40 characters after curve_serverkey=
    are taken as written (49db3ab percent-decoded them: 'not 38' for this very key)."""
    ep = parse(f">zmq+tcp://127.0.0.1:5555?curve_serverkey={README_KEY}&hwm=7")
    assert ep.settings == {"curve_serverkey": README_KEY, "hwm": 7}
    ep = parse(f">zmq+tcp://127.0.0.1:5555?hwm=7&curve_serverkey={README_KEY}")
    assert ep.settings["curve_serverkey"] == README_KEY


def test_every_pyzmq_key_survives_the_url() -> None:
    """5,000 keys made by libzmq (3,170 of them broke on 49db3ab), raw and percent-encoded."""
    from urllib.parse import quote

    import zmq

    for _ in range(5000):
        public, _ = zmq.curve_keypair()
        key = public.decode()
        assert parse(f">zmq+tcp://h:1?curve_serverkey={key}").settings == {
            "curve_serverkey": key}, key
        encoded = quote(key, safe="")
        if encoded != key:  # a key a tool percent-encoded whole still works
            assert parse(f">zmq+tcp://h:1?curve_serverkey={encoded}&hwm=2").settings == {
                "curve_serverkey": key, "hwm": 2}, key


def test_other_values_are_percent_decoded_and_plus_is_a_plus() -> None:
    from gateway.url import split_query

    assert split_query("a=b%2Fc+d&e=") == [("a", "b/c+d"), ("e", "")]
    with pytest.raises(ValueError):
        split_query("hwm")


@pytest.mark.parametrize("url", [
    "zmq+tcp://h:1?plain_password=hunter2",
    "zmq+tcp://h:1?hwm=1&plain_password=hunter2&x",
    "zmq+tcp://h:1?curve_secretkey=JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6",
    "zmq+tcp://h:1?curve_secret_key=JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6&hwm=0",
])
def test_a_refused_inline_secret_is_never_echoed(url: str) -> None:
    """Finding 10: the error names the key and shows the URL with the value masked."""
    with pytest.raises(ConfigError) as info:
        parse(url)
    text = str(info.value)
    assert "hunter2" not in text and "JTKVSB" not in text and "Ni{Lh6" not in text, text
    assert "***" in text or "?..." in text


@pytest.mark.parametrize(("url", "secrets", "names"), [
    # behind a ';' inside another setting's value
    ("zmq+tcp://127.0.0.1:5555?curve_server=1;curve_secretkey=s3cr3T-0123456789ab",
     ["s3cr3T-0123456789ab"], ["curve_server"]),
    ("zmq+tcp://127.0.0.1:5555?hwm=5;plain_password=hunter2-xyz&linger=1",
     ["hunter2-xyz"], ["hwm"]),
    # under a misspelt key close to a secret's
    ("zmq+tcp://127.0.0.1:5555?plainpassword=hunter2-xyz&hwm=2", ["hunter2-xyz"],
     ["plainpassword"]),
    ("zmq+tcp://127.0.0.1:5555?curve_secret=hunter2-xyz", ["hunter2-xyz"], ["curve_secret"]),
    ("zmq+tcp://127.0.0.1:5555?plain%5Fpassword%3Dhunter2-xyz", ["hunter2-xyz"], []),
    # a '?' before the '://'
    ("zmq?x=1://127.0.0.1:5555?plain_password=hunter2-xyz", ["hunter2-xyz"], []),
    # in the address, the scheme, the backend
    ("zmq+tcp://plain_password=hunter2-xyz", ["hunter2-xyz"], ["needs host:port"]),
    ("zmq+tcp://h:1;pwd=hunter2-xyz", ["hunter2-xyz"], ["bad port"]),
    ("zmq+tcp://h:1?backend=x;passwd=hunter2-xyz", ["hunter2-xyz"], ["bad backend"]),
    # a secret Z85 key holding '&' under a misspelt name: its 40 characters at least
    ("zmq+tcp://h:1?curve_secret=JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6&hwm=0",
     ["JTKVSB", "Ni{Lh6"], ["curve_secret", "hwm"]),
])
def test_a_secret_is_masked_wherever_it_stands(url: str, secrets: list[str],
                                               names: list[str]) -> None:
    """Finding 10 (fuzz: secret-echo-loose): not only the exact keys split on '&'."""
    with pytest.raises(ConfigError) as info:
        parse(url)
    text = str(info.value)
    for secret in secrets:
        assert secret not in text, text
    for name in names:  # the message still says which setting
        assert name in text, text
    assert "***" in text


def test_redact_masks_loosely_and_keeps_the_rest() -> None:
    from gateway.url import redact

    assert redact("zmq+tcp://h:1?hwm=5;plain_password=pw&linger=1") == (
        "zmq+tcp://h:1?hwm=5;plain_password=***&linger=1")
    assert redact("zmq+tcp://h:1?plain_password=a&b&hwm=1") == "zmq+tcp://h:1?plain_password=***&hwm=1"
    # the files and public keys stay readable
    kept = "zmq+tcp://h:1?plain_password_file=/etc/pw&curve_serverkey=abc&plain_passwords=/p"
    assert redact(kept) == kept


@pytest.mark.parametrize("url", [
    "zmq+tcp://127.0.0.1:5555?curve_serverkey=abc&plain_password=s3cr3T-0123456789abcd",
    "zmq+tcp://127.0.0.1:5555?curve_serverkey=abcdefghij&curve_secretkey=s3cr3T-012345",
    "zmq+tcp://127.0.0.1:5555?curve_serverkey=abc&plainpwd=s3cr3T-0123456789abcdefgh",
])
def test_a_secret_inside_a_z85_window_is_refused_and_masked(url: str) -> None:
    """Finding 14 against 10 (fuzz: secret-echo-z85-window): 40 characters after
    curve_serverkey= that hold '&name=' are two settings, not a key."""
    from gateway.url import split_query

    query = url.partition("?")[2]
    assert [k for k, _ in split_query(query)][0] == "curve_serverkey"
    assert len(split_query(query)) == 2
    assert split_query(query)[0][1] != query.partition("=")[2]
    with pytest.raises(ConfigError) as info:
        parse(url)
    text = str(info.value)
    assert "s3cr3T" not in text and "curve_serverkey" in text, text


def test_a_z85_key_with_an_unknown_name_after_its_ampersand_stays_a_key() -> None:
    key = "abcdefghijklmnopqrstuvwxyz&abc=ABCDEFGHI"
    assert len(key) == 40
    assert parse(f">zmq+tcp://h:1?curve_serverkey={key}").settings == {"curve_serverkey": key}


@pytest.mark.parametrize(("url", "says", "never"), [
    ("zmq://127.0.0.1:5", "say which transport, e.g. zmq+tcp://", "zmq+zmq"),  # the report
    ("nng://127.0.0.1:5", "e.g. nng+tcp://", "sp+nng"),
    ("tpc://127.0.0.1:5", "e.g. zmq+tcp:// or sp+tcp://", "zmq+tpc"),
    ("zqm+tcp://127.0.0.1:5", "did you mean zmq+?", "!"),
    ("zmq+tpc://127.0.0.1:5", "did you mean 'tcp'?", "!"),
    ("zmq+tcp://127.0.0.1:5?hmw=5", "did you mean 'hwm'?", "known:"),
    ("zmq+tcp://127.0.0.1:5?recvmaxsz=5", "did you mean 'maxmsgsize'?", "known:"),  # nng's
    ("zmq+tcp://127.0.0.1:5?reconect_ivl=5", "did you mean 'reconnect_ivl'?", "known:"),
])
def test_did_you_mean(url: str, says: str, never: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(url, transports=frozenset({"tcp", "ipc", "inproc"}))
    assert says in str(info.value) and never not in str(info.value).split(" in ")[0]
