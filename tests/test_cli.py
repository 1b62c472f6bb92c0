"""gateway.cli: the parser, help, version, ``plugins`` output and exit codes (in-process).

The real process (signals, READY line, live bridges) is tested in interop_tests/test_gateway_*.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import gateway
from gateway.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_log_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI configures structlog to print to the sys.stderr of the moment: under capsys that
    stream is closed after the test, so keep the test process's logging as it is."""
    monkeypatch.setattr("gateway.logging.configure", lambda *a, **k: None)


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gateway: error: ")
    return lines[0]


# ---------------------------------------------------------------------------------------------
# parser, help, version


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for command in ("bridge", "run", "plugins", "matrix", "bench"):
        assert command in out
    assert "'@' binds, '>' connects" in " ".join(out.split())


def test_help_says_what_the_gateway_does_today(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pattern, wire, transport and security mechanism the gateway bridges is named."""
    monkeypatch.setenv("COLUMNS", "400")  # argparse wraps at hyphens: "request-" "reply"
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for word in ("request-reply", "pub/sub", "pipeline", "pair", "ZeroMQ", "nng", "nanomsg",
                 "tcp", "ipc", "inproc", "tls+tcp", "ws", "wss", "any", "CURVE", "PLAIN",
                 "pubsub", "pair1", "pyzmq", "pynng"):
        assert word in out, word
    assert "request-reply gateway" not in out  # what it said when that was all it did


def test_bridge_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bridge", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for option in ("FRONT", "BACK", "--log-format", "--metrics", "--max-message-size",
                   "--hop-limit", "--pending-tokens", "--token-ttl", "--grace", "--name"):
        assert option in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"gateway {gateway.__version__} (")
    from gateway.kernel import IMPLEMENTATION

    assert ("compiled kernel" in out) == (IMPLEMENTATION == "compiled")


def test_version_matches_the_distribution() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert meta["project"]["version"] == gateway.__version__
    assert meta["project"]["scripts"]["gateway"] == "gateway.cli:main"


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: gateway" in capsys.readouterr().out


def test_bridge_arguments() -> None:
    args = build_parser().parse_args([
        "bridge", "@zmq+tcp://127.0.0.1:5555", ">sp+tcp://127.0.0.1:6000?backend=native",
        "--name", "b1", "--log-format", "json", "--log-level", "debug",
        "--metrics", "127.0.0.1:9100", "--max-message-size", "4096", "--hop-limit", "3",
        "--pending-tokens", "10", "--token-ttl", "0.5", "--grace", "1"])
    assert (args.command, args.front, args.back, args.name) == (
        "bridge", "@zmq+tcp://127.0.0.1:5555", ">sp+tcp://127.0.0.1:6000?backend=native", "b1")
    assert (args.log_format, args.log_level, args.metrics) == ("json", "debug", "127.0.0.1:9100")
    assert (args.max_message_size, args.hop_limit, args.pending_tokens, args.token_ttl,
            args.grace) == (4096, 3, 10, 0.5, 1.0)


def test_bridge_defaults() -> None:
    args = build_parser().parse_args(["bridge", "a", "b"])
    assert args.name is None and args.metrics is None  # (None: "bridge", not on READY)
    assert args.log_format is None and args.log_level is None  # console / info at run time
    assert args.hop_limit is None and args.grace is None  # the Limits defaults apply


def test_run_arguments() -> None:
    args = build_parser().parse_args(["run", "g.toml", "--log-format", "json",
                                      "--metrics", "127.0.0.1:1"])
    assert (args.command, args.config, args.log_format, args.metrics) == (
        "run", "g.toml", "json", "127.0.0.1:1")


@pytest.mark.parametrize("argv", [
    ["bridge"],
    ["bridge", "only-front"],
    ["bridge", "a", "b", "--log-format", "xml"],
    ["bridge", "a", "b", "--log-level", "loud"],
    ["bridge", "a", "b", "--hop-limit", "many"],
    ["bridge", "a", "b", "--token-ttl", "soon"],
    ["run"],
    ["no-such-command"],
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "usage: gateway" in err and "Traceback" not in err


# ---------------------------------------------------------------------------------------------
# plugins


def test_plugins_lists_builtins_and_what_they_provide(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) == 0
    rows = {line.split(None, 2)[0]: line.split(None, 2)[1:]
            for line in capsys.readouterr().out.splitlines()}
    assert rows["tcp"] == ["gateway_plugins.tcp", "transport tcp"]
    assert rows["ipc"] == ["gateway_plugins.ipc", "transport ipc"]
    assert rows["inproc"] == ["gateway_plugins.inproc", "transport inproc"]
    assert rows["wires"] == ["gateway_plugins.wires", "wire zmtp (zmtp), wire sp (sp)"]
    assert rows["pyzmq"] == ["gateway_plugins.pyzmq_adapter", "adapter pyzmq (zmtp, polled, proxy)"]
    assert rows["pynng"] == ["gateway_plugins.pynng_adapter", "adapter pynng (sp, polled)"]


# ---------------------------------------------------------------------------------------------
# bad input: one line on stderr, exit 2 (before any socket is served)


@pytest.mark.parametrize(("front", "back", "contains"), [
    ("zmq+tcp://127.0.0.1", "sp+tcp://127.0.0.1:1", "needs host:port"),
    ("zmq+tcp://127.0.0.1:70000", "sp+tcp://127.0.0.1:1", "bad port"),
    ("foo+tcp://127.0.0.1:1", "sp+tcp://127.0.0.1:1", "unknown wire 'foo'"),
    ("zmq+udp://127.0.0.1:1", "sp+tcp://127.0.0.1:1", "unknown transport 'udp'"),
    ("zmq+tcp://127.0.0.1:0", "sp+tcp://127.0.0.1:1?backend=zmq", "unknown backend 'zmq'"),
    ("zmq+tcp://127.0.0.1:0?backend=pynng", "sp+tcp://127.0.0.1:1", "speaks sp"),
])
def test_bad_endpoint(front: str, back: str, contains: str,
                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bridge", front, back]) == 2
    assert contains in _error_line(capsys)


@pytest.mark.parametrize(("option", "value", "contains"), [
    ("--hop-limit", "16", "--hop-limit must be within 1..15"),
    ("--hop-limit", "0", "must be a positive number"),
    ("--pending-tokens", "0", "must be a positive number"),
    ("--token-ttl", "0", "must be a positive number"),
    ("--max-message-size", "-5", "must be a positive number"),
    ("--metrics", "nowhere", "needs host:port"),
])
def test_bad_option_values(option: str, value: str, contains: str,
                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bridge", "zmq+tcp://127.0.0.1:0", "sp+tcp://127.0.0.1:1", option, value]) == 2
    assert contains in _error_line(capsys)




@pytest.mark.parametrize("backend", ["pyzmq", "native"])
def test_port_in_use(busy_port: int, backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    front = f"@zmq+tcp://127.0.0.1:{busy_port}?backend={backend}"
    assert main(["bridge", front, "sp+tcp://127.0.0.1:1"]) == 2
    line = _error_line(capsys)
    assert f"127.0.0.1:{busy_port}" in line and "in use" in line
    assert "bridge 'bridge'" in line  # a bind failure at run time names the bridge


def test_unreadable_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read" in _error_line(capsys)
    (tmp_path / "bad.toml").write_text("[[bridge]\n")
    assert main(["run", str(tmp_path / "bad.toml")]) == 2
    assert "bad.toml" in _error_line(capsys)


def test_console_script_entry_runs() -> None:
    r = subprocess.run([sys.executable, "-m", "gateway", "--version"], cwd=REPO, text=True,
                       capture_output=True, timeout=30,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and r.stdout.startswith(f"gateway {gateway.__version__} (")


@pytest.mark.parametrize("argv", [
    ["bridge", "@zmq+tcp://127.0.0.1:0", ">sp+tcp://127.0.0.1:1", "--metric", "127.0.0.1:0"],
    ["bridge", "@zmq+tcp://127.0.0.1:0", ">sp+tcp://127.0.0.1:1", "--max-message", "9"],
    ["matrix", "report", "/nonexistent", "--form", "html"],
    ["run", "x.toml", "--log-form", "json"],
])
def test_abbreviated_options_are_refused(argv: list[str],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_bare_matrix_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix"]) == 2
    err = capsys.readouterr().err
    assert "usage: gateway matrix" in err and "run" in err and "report" in err


EXAMPLE_CONFIGS = sorted(p for p in (Path(__file__).resolve().parents[1] / "examples").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLE_CONFIGS, ids=lambda p: p.name)
def test_check_passes_on_every_example_config(path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(path)]) == 0
    assert "ok" in capsys.readouterr().out


def test_check_reports_five_mistakes_at_once(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[gateway]\nlog_format = "xml"\n[limits]\nhop_limit = 99\n'
                   '[[bridge]]\nname = "a"\nfront = "zmq+tcp://127.0.0.1"\nback = "sp+tcp://127.0.0.1:1"\n'
                   '[[bridge]]\nname = "a"\nfront = "zmq+tcp://127.0.0.1:2"\nback = "sp+tcp://127.0.0.1:3"\n'
                   '[[bridge]]\nname = "b"\nfront = "zmq+tcp://127.0.0.1:4"\n'
                   'back = "sp+tcp://127.0.0.1:5"\nbakend = "x"\n')
    assert main(["check", str(bad)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 5 and all(line.startswith(f"gateway: error: {bad}: ") for line in lines)


def test_check_reports_the_rules_of_a_bridge_with_a_bad_url(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bridge whose front URL cannot be read still has its back checked (and a bridge with
    a duplicate name its URLs): each mistake once, all in one run."""
    cfg = tmp_path / "g.toml"
    cfg.write_text('[[bridge]]\nname = "one"\nfront = "@zmq+tcp://127.0.0.1:0?hwm=abc"\n'
                   'back = ">sp+tcp://127.0.0.1:1?backend=pynng&sndbuf=4k"\n'
                   '[[bridge]]\nname = "one"\nfront = "@zmq+tcp://127.0.0.1:0?curve_server=1"\n'
                   'back = ">sp+tcp://127.0.0.1:1"\n')
    assert main(["check", str(cfg)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4, lines
    assert all(line.startswith(f"gateway: error: {cfg}: bridge ") for line in lines)
    text = "\n".join(lines)
    for said in ("'one' front: bad value 'abc' for hwm", "backend pynng does not support sndbuf",
                 "duplicate name", "CURVE needs curve_cert=PATH"):
        assert text.count(said) == 1, said


def test_check_knows_the_backends_and_transports_too(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "g.toml"
    cfg.write_text('[[bridge]]\nname = "x"\nfront = "zmq+tcp://127.0.0.1:0?backend=nope"\n'
                   'back = "sp+tcp://127.0.0.1:1"\n')
    assert main(["check", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "bridge 'x'" in err and "unknown backend 'nope'" in err


def test_the_example_systemd_unit(tmp_path: Path) -> None:
    """Type=notify with reload by SIGHUP; `systemd-analyze verify` checks it where it exists."""
    import configparser
    import shutil

    unit = Path(__file__).resolve().parents[1] / "examples" / "gateway.service"
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read_string(unit.read_text())
    assert parser["Service"]["Type"] == "notify"
    assert parser["Service"]["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert " run " in parser["Service"]["ExecStart"]
    assert parser["Service"]["RestartPreventExitStatus"] == "2"  # a mistake is not retried
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed (the unit's fields were checked above)")
    gateway_exe = shutil.which("gateway") or sys.executable
    local = tmp_path / "gateway.service"
    local.write_text(unit.read_text().replace("/usr/local/bin/gateway", gateway_exe))
    done = subprocess.run([analyze, "verify", str(local)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


# ---------------------------------------------------------------------------------------------
# issue 20: the findings of the fuzzing harnesses, through the real process


def _gateway(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *argv], cwd=REPO, text=True,
                          capture_output=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("front", [
    # secret-echo-loose: behind a ';', under a misspelt key, a '?' before the '://'
    "@zmq+tcp://127.0.0.1:0?curve_server=1;curve_secretkey=s3cr3T-0123456789ab",
    "@zmq+tcp://127.0.0.1:0?hwm=5;plain_password=s3cr3T-0123456789ab",
    "@zmq+tcp://127.0.0.1:0?plainpassword=s3cr3T-0123456789ab",
    "@zmq?x=1://127.0.0.1:0?plain_password=s3cr3T-0123456789ab",
    # secret-echo-z85-window: the secret inside the 40 characters after curve_serverkey=
    ">zmq+tcp://127.0.0.1:1?curve_serverkey=abc&plain_password=s3cr3T-0123456789abcd",
])
def test_a_secret_in_an_endpoint_never_reaches_stderr(front: str) -> None:
    r = _gateway("bridge", front, ">sp+tcp://127.0.0.1:1")
    assert r.returncode == 2, r.stderr
    assert "s3cr3T" not in r.stderr and "s3cr3T" not in r.stdout, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.startswith("gateway: error: "), r.stderr


def test_a_secret_in_a_config_never_reaches_stderr(tmp_path: Path) -> None:
    cfg = tmp_path / "g.toml"
    cfg.write_text('[[bridge]]\nname = "orders"\n'
                   'front = "@zmq+tcp://127.0.0.1:0?curve_serverkey=abc&plain_password='
                   's3cr3T-0123456789abcd"\n'
                   'back = ">sp+tcp://127.0.0.1:1"\n'
                   'back_options = {hwm = "5;curve_secret_key=s3cr3T-99", plainpassword = "s3cr3T-1"}\n')
    r = _gateway("check", str(cfg))
    assert r.returncode == 2, r.stderr
    assert "s3cr3T" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert any("bridge 'orders' front: bad value for plain_password" in line for line in lines)
    assert any("bridge 'orders' back_options: unknown option 'plainpassword'" in line
               for line in lines), r.stderr


def test_a_file_name_the_system_refuses_is_a_config_error(tmp_path: Path) -> None:
    """fuzz: config-name-too-long: every file setting's mistake at once, naming the bridge,
    the setting and the file: exit 2, no traceback."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    long = str(tmp_path / ("a" * 300))
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'[[bridge]]\nname = "orders"\n'
                   f'front = "@zmq+tcp://127.0.0.1:0?curve_server=1&curve_cert={long}'
                   f'&curve_allow={loop}"\n'
                   f'back = ">sp+tls+tcp://127.0.0.1:1?tls_ca={long}"\n'
                   f'[[bridge]]\nname = "users"\n'
                   f'front = "@zmq+tcp://127.0.0.1:0?plain_server=1&plain_passwords={tmp_path}"\n'
                   f'back = ">sp+tcp://127.0.0.1:2"\n')
    r = _gateway("check", str(cfg))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 4, r.stderr
    assert all(line.startswith("gateway: error: ") for line in lines)
    text = r.stderr
    assert "bridge 'orders' front: curve_cert: cannot read certificate " in text
    assert f"({len(long)} characters): File name too long" in text
    assert f"bridge 'orders' front: curve_allow: cannot read {str(loop)!r}" in text
    assert "bridge 'orders' back: tls_ca: a readable file" in text
    assert (f"bridge 'users' front: plain_passwords: cannot read password file "
            f"{str(tmp_path)!r}: Is a directory") in text


def test_bridge_reports_its_control_and_capture_with_its_sides(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A control or capture endpoint's mistake comes with those of the bridge's sides, not
    on the next try (the secret in the capture URL masked)."""
    secret = "abcdefghij" * 4
    assert main(["bridge", "@zmq+tcp://127.0.0.1:0?hwm=0", ">sp+tcp://127.0.0.1:1",
                 "--control", "nope", "--capture",
                 f"zmq+tcp://127.0.0.1:0?curve_secretkey={secret}"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3, lines
    for said in ("bridge 'bridge' front: bad value '0' for hwm",
                 "bridge 'bridge' control: bad endpoint 'nope'",
                 "bridge 'bridge' capture: bad value for curve_secretkey"):
        assert sum(said in line for line in lines) == 1, (said, lines)
    assert secret not in "\n".join(lines)


def test_check_reports_clashes_and_ipc_paths_with_the_files_mistakes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two bridges binding one address, an ipc path with no directory and a control endpoint's
    rule are reported with a mistake elsewhere in the file, in one run."""
    cfg = tmp_path / "g.toml"
    cfg.write_text('[gateway]\nlog_levle = "info"\n'
                   '[[bridge]]\nname = "a"\nfront = "@zmq+tcp://127.0.0.1:7001"\n'
                   'back = ">sp+tcp://127.0.0.1:1"\n'
                   'control = "zmq+tcp://127.0.0.1:7002?backend=pyzmq"\n'
                   '[[bridge]]\nname = "b"\nfront = "@sp+tcp://127.0.0.1:7001"\n'
                   f'back = "@zmq+ipc://{tmp_path}/none/x.sock"\n')
    assert main(["check", str(cfg)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4, lines
    assert all(line.startswith(f"gateway: error: {cfg}: ") for line in lines)
    for said in ("log_levle: unknown key", "bridge 'a' control: the control endpoint is the "
                 "native engine's", "bridge 'b' front: tcp://127.0.0.1:7001 is bound by "
                 "bridge 'a' front too", "bridge 'b' back: ipc://"):
        assert sum(said in line for line in lines) == 1, (said, lines)


def test_run_reports_its_flags_mistakes_with_the_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--metrics`` and ``--workers`` mistakes come with those of the config file (and with a
    bridge's for ``gateway bridge``), not on the next try."""
    cfg = tmp_path / "g.toml"
    cfg.write_text('[gateway]\nlog_levle = "info"\n[[bridge]]\nfront = "@zmq+tcp://127.0.0.1:0"\n'
                   'back = ">sp+tcp://127.0.0.1:1"\n')
    for argv, said in ((["run", str(cfg)], f"{cfg}: [gateway] log_levle: unknown key"),
                       (["bridge", "@zmq+tcp://127.0.0.1:0?hwm=0", ">sp+tcp://127.0.0.1:1"],
                        "bridge 'bridge' front: bad value '0' for hwm")):
        assert main([*argv, "--metrics", "9100", "--workers", "0"]) == 2
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 3, lines
        for text in ("--metrics 9100: ", "--workers must be 1..64, not 0", said):
            assert sum(text in line for line in lines) == 1, (text, lines)


@pytest.mark.parametrize("key", ["plain_pasword", "plainpasword", "curve_secrtkey"])
def test_a_misspelt_secret_key_keeps_its_value_unsaid(
        key: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``?plain_pasword=...`` is an unknown option, reported with its URL: the value, a
    password with one letter missing from its key, is masked like a well-spelt one's."""
    assert main(["bridge", f"@zmq+tcp://127.0.0.1:0?{key}=s3cr3T-hunter2",
                 ">sp+tcp://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert f"unknown option '{key}'" in err and f"{key}=***" in err, err
    assert "s3cr3T-hunter2" not in err


def test_a_bridge_is_named_as_written_so_each_mistake_comes_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A name that looks like ``key: value`` (``bypass: eu``) was masked by the file's checks
    and not by the rules: a bad URL, which both report, came twice in two forms."""
    cfg = tmp_path / "g.toml"
    cfg.write_text('[[bridge]]\nname = "bypass: eu"\nfront = "@zmq+tcp://127.0.0.1:0?hwm=0"\n'
                   'back = ">sp+tcp://127.0.0.1:1?curve_server=1"\n')
    assert main(["check", str(cfg)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert sum("bridge 'bypass: eu' front: bad value '0' for hwm" in line for line in lines) == 1
    assert sum("bridge 'bypass: eu' back: curve_server" in line for line in lines) == 1
