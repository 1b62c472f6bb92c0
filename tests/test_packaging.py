"""pyproject.toml installs every package of gateway/ and plugins/ (as gateway_plugins), and
nothing under a generic top-level name; the wheel itself is checked by .ci/wheel-check.sh."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
META = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _packages(folder: Path, name: str) -> set[str]:
    """Every folder with Python modules (a folder without ``__init__.py`` counts too: a
    namespace package setuptools would leave out of the wheel)."""
    return {".".join((name, *p.parent.relative_to(folder).parts))
            for p in folder.rglob("*.py") if "__pycache__" not in p.parts}


def test_every_package_has_its_init() -> None:
    for folder in (ROOT / "gateway", ROOT / "plugins"):
        for p in folder.rglob("*.py"):
            if "__pycache__" not in p.parts:
                assert (p.parent / "__init__.py").is_file(), p.parent


def test_every_package_is_listed_and_only_those() -> None:
    listed = set(META["tool"]["setuptools"]["packages"])
    on_disk = _packages(ROOT / "gateway", "gateway") | _packages(ROOT / "plugins", "gateway_plugins")
    assert listed == on_disk
    assert {p.split(".")[0] for p in listed} == {"gateway", "gateway_plugins"}
    assert META["tool"]["setuptools"]["package-dir"] == {"gateway_plugins": "plugins"}


def test_builtin_entry_points_name_the_project_namespace() -> None:
    from gateway.plugins import BUILTIN_PLUGINS

    eps = META["project"]["entry-points"]["gateway"]
    assert eps == BUILTIN_PLUGINS
    assert all(v.startswith("gateway_plugins.") for v in eps.values())


def test_spark_is_an_extra_not_a_dependency() -> None:
    deps = " ".join(META["project"]["dependencies"])
    assert "pyspark" not in deps and "prometheus_client" in deps
    extras = META["project"]["optional-dependencies"]
    assert any(d.startswith("pyspark") for d in extras["matrix"])
    assert {"matrix", "bench", "test"} <= set(extras)


def test_metadata_a_user_and_an_index_read() -> None:
    """SPDX license (PEP 639, no deprecated table), URLs, classifiers and type hints."""
    project = META["project"]
    assert project["license"] == "MPL-2.0"
    assert project["license-files"] == ["LICENSE"] and (ROOT / "LICENSE").is_file()
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # PEP 639
    assert "Typing :: Typed" in project["classifiers"]
    # the Pythons claimed are the ones CI tests: make test's, and .ci/pythons.sh's
    tested = ["3.11", *(ROOT / ".ci" / "pythons.sh").read_text().split('PYTHONS:-"')[1]
              .split('"')[0].split()]
    assert project["requires-python"] == f">={tested[0]},<3.{int(tested[-1][2:]) + 1}"
    assert [c.rsplit(" ", 1)[1] for c in project["classifiers"]
            if c.startswith("Programming Language :: Python :: 3.")] == tested
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(project["urls"])
    assert any(r.startswith("setuptools>=77") for r in META["build-system"]["requires"])
    for package, folder in (("gateway", "gateway"), ("gateway_plugins", "plugins")):
        assert "py.typed" in META["tool"]["setuptools"]["package-data"][package]
        assert (ROOT / folder / "py.typed").is_file()


def test_the_description_says_what_the_gateway_does_today() -> None:
    text = META["project"]["description"]
    for word in ("request-reply", "pub/sub", "pipeline", "pair", "tcp", "ipc", "inproc",
                 "tls+tcp", "ws", "wss", "any+", "CURVE", "PLAIN", "ZMTP", "SP"):
        assert word in text, word


def test_the_plugin_skeleton_uses_an_spdx_license_too() -> None:
    meta = tomllib.loads((ROOT / "examples" / "plugin-skeleton" / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "MPL-2.0"


def test_make_env_does_not_install_the_plugin_skeleton() -> None:
    """Its ``abstract`` transport and ``skeleton`` backend showed in every developer's
    ``gateway plugins`` and transport error; its own tests install it for themselves."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("$(STAMP):", 1)[1].split("\n\n", 1)[0]
    assert "pip install" in recipe
    installs = [line for line in recipe.splitlines() if "pip install" in line]
    assert not any("plugin-skeleton" in line for line in installs), installs
    tests = (ROOT / "interop_tests" / "test_gateway_plugins.py").read_text()
    assert '"--target"' in tests  # the tests' own install


def test_the_tools_commands_are_entry_points_that_load() -> None:
    """``gateway bench`` and ``gateway matrix`` reach the CLI through the ``gateway.commands``
    group only (gateway.cli imports no tool); each entry loads an object with the contract."""
    import importlib

    from gateway.cli import COMMANDS_GROUP

    eps = META["project"]["entry-points"][COMMANDS_GROUP]
    assert set(eps) == {"bench", "matrix", "ctl", "capture", "replay"}
    for target in eps.values():
        module, _, attr = target.partition(":")
        assert module.startswith("gateway.tools.")
        command = getattr(importlib.import_module(module), attr)
        assert command.help and callable(command.configure) and callable(command.run)


def test_package_data_is_on_disk() -> None:
    dirs = META["tool"]["setuptools"]["package-dir"]  # gateway_plugins lives in plugins/
    for package, names in META["tool"]["setuptools"]["package-data"].items():
        top, *rest = package.split(".")
        folder = ROOT.joinpath(dirs.get(top, top), *rest)
        for name in names:  # (a pattern names one file at least)
            assert [f for f in folder.glob(name) if f.is_file()], f"{package}: {name}"
