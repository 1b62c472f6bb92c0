"""gateway.cli, the operator's first hour (issue 39): errors that name the flag, start-up
errors in the log format asked for, ``gateway settings``, ``gateway --version`` (in-process)."""

from __future__ import annotations

import json

import pytest

from gateway.cli import main


@pytest.fixture(autouse=True)
def _no_log_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.logging.configure", lambda *a, **k: None)


def test_errors_name_the_flag_all_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    """The report: `--metrics 9100` said "tcp address '9100' needs host:port", `--grace -1`
    "limit grace": neither named the flag."""
    rc = main(["bridge", "@zmq+tcp://127.0.0.1:0?hmw=1", ">sp+tcp://127.0.0.1:1",
               "--metrics", "9100", "--grace", "-1"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 3, err
    assert lines[0].startswith("gateway: error: --metrics 9100: ")
    assert lines[1] == "gateway: error: --grace must be a positive number, not -1.0"
    assert "did you mean 'hwm'?" in lines[2]


def test_startup_errors_follow_log_format_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["bridge", "@zqm+tcp://127.0.0.1:0", ">sp+tcp://127.0.0.1:1", "--log-format",
               "json", "--hop-limit", "99"])
    assert rc == 2
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [e["event"] for e in events] == ["startup.failed", "startup.failed"]
    assert all(e["level"] == "error" and e["timestamp"].endswith("Z") for e in events)
    assert events[0]["error"].startswith("--hop-limit")
    assert "unknown wire 'zqm'" in events[1]["error"]


def test_run_errors_follow_the_configs_log_format(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "g.toml"
    cfg.write_text('[gateway]\nlog_format = "json"\n[[bridge]]\nfront = "@zmq+tcp://127.0.0.1:0"'
                   '\nback = ">sp+tcp://127.0.0.1:1?lingr=1"\n')
    assert main(["run", str(cfg)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "did you mean 'linger'?" in json.loads(line)["error"]


def test_settings_prints_the_docs_page(capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`gateway settings`: the reference from the one schema, the text of the docs' page."""
    import sys
    from pathlib import Path

    from gateway.settings.reference import NOTE, settings_page
    from gateway.settings.schema import SETTINGS

    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Settings\n")
    from gateway.cli import build_parser

    page = settings_page(build_parser())
    assert NOTE + "\n" + out == page
    for s in SETTINGS:
        assert f"| `{s.name}` |" in out, s.name
    assert "| `grace` |" in out  # the limits too
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "docs" / "_hooks"))
    sys.modules.pop("reference", None)
    import reference  # the mkdocs hook: the page is the same function's

    assert reference.PAGES["reference/settings.md"]() == page


def test_version_names_the_libraries(capsys: pytest.CaptureFixture[str]) -> None:
    """The report: `--version` gave no library versions, though gateway_build_info has them."""
    import platform

    import pynng
    import zmq

    import gateway
    from gateway.kernel import IMPLEMENTATION

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"gateway {gateway.__version__} (")
    assert ("compiled kernel" in lines[0]) == (IMPLEMENTATION == "compiled")
    assert lines[1].startswith(f"Python {platform.python_version()} ")
    assert lines[2] == f"pyzmq {zmq.pyzmq_version()}, libzmq {zmq.zmq_version()}"
    nng = pynng.ffi.string(pynng.lib.nng_version()).decode()
    assert lines[3].startswith("pynng ") and lines[3].endswith(f", nng {nng}")


@pytest.mark.parametrize(("words", "expected"), [
    (["gateway", "bri"], ["bridge"]),
    (["gateway", "bridge", "--log-f"], ["--log-format"]),
    (["gateway", "run", "g.toml", "--log-format", ""], ["console", "json"]),
    (["gateway", "bridge", "--unknown-peers", "r"], ["ready"]),
    (["gateway", "completion", "z"], ["zsh"]),
    (["gateway", "sett"], ["settings"]),
])
def test_bash_completion(words: list[str], expected: list[str], tmp_path,  # type: ignore[no-untyped-def]
                         capsys: pytest.CaptureFixture[str]) -> None:
    """`gateway completion bash`, sourced in a real bash, completes commands, options and
    the values of options with choices."""
    import shlex
    import shutil
    import subprocess

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    assert main(["completion", "bash"]) == 0
    path = tmp_path / "gateway.bash"
    path.write_text(capsys.readouterr().out)
    line = (f"source {shlex.quote(str(path))}; COMP_WORDS=({' '.join(map(shlex.quote, words))});"
            f" COMP_CWORD={len(words) - 1}; _gateway; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    done = subprocess.run([bash, "-c", line], capture_output=True, text=True, timeout=30,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected


def test_zsh_completion_is_the_bash_script_under_bashcompinit(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    bash = capsys.readouterr().out
    assert main(["completion", "zsh"]) == 0
    assert capsys.readouterr().out == "autoload -U +X bashcompinit && bashcompinit\n" + bash
