"""pyproject.toml installs every package of gateway/ and plugins/ (as gateway_plugins), and
nothing under a generic top-level name; the wheel itself is checked by .ci/wheel-check.sh."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
META = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _packages(folder: Path, name: str) -> set[str]:
    return {".".join((name, *p.parent.relative_to(folder).parts))
            for p in folder.rglob("__init__.py") if "__pycache__" not in p.parts}


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


def test_the_tools_commands_are_entry_points_that_load() -> None:
    """``gateway bench`` and ``gateway matrix`` reach the CLI through the ``gateway.commands``
    group only (gateway.cli imports no tool); each entry loads an object with the contract."""
    import importlib

    from gateway.cli import COMMANDS_GROUP

    eps = META["project"]["entry-points"][COMMANDS_GROUP]
    assert set(eps) == {"bench", "matrix"}
    for target in eps.values():
        module, _, attr = target.partition(":")
        assert module.startswith("gateway.tools.")
        command = getattr(importlib.import_module(module), attr)
        assert command.help and callable(command.configure) and callable(command.run)


def test_package_data_is_on_disk() -> None:
    for package, names in META["tool"]["setuptools"]["package-data"].items():
        folder = ROOT.joinpath(*package.split("."))
        for name in names:
            assert (folder / name).is_file(), f"{package}: {name}"
