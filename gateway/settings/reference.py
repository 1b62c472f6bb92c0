"""The settings reference, from the one schema (:mod:`gateway.settings.schema`) and the
config's limits: the Markdown that ``gateway settings`` prints and that the documentation's
``reference/settings.md`` page is (``docs/_hooks/reference.py`` calls :func:`settings_page`)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

NOTE = ("<!-- generated from gateway/settings/reference.py (`gateway settings` prints the "
        "same): change the code, not this page -->\n")


def settings() -> Sequence[Any]:
    """The endpoint settings table: one row per setting (``name``, ``aliases``, ``families``,
    ``help``, ``default``, ``refused``), from the schema (``gateway.settings.schema``)."""
    from types import SimpleNamespace

    from gateway.settings.schema import REFUSED, SETTINGS, default_text

    rows = [SimpleNamespace(name=s.name, aliases=s.aliases, families=s.families, help=s.help,
                            default=default_text(s), refused=False) for s in SETTINGS]
    rows += [SimpleNamespace(name=name, aliases=(), families=None, help=hint, default="",
                             refused=True) for name, (_, hint) in REFUSED.items()]
    return rows


def cell(text: object) -> str:
    """Text for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def code(text: str) -> str:
    return f"`{text}`" if text else ""


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, help, parser)`` of each subcommand of ``parser``."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            out += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return out


# -- settings -----------------------------------------------------------------------------------
def _families(row: Any) -> str:
    names = {"zmtp": "ZeroMQ", "sp": "SP"}
    fams = getattr(row, "families", None)
    return "both" if not fams else ", ".join(names.get(f, f) for f in sorted(fams))


def _limits_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str, str]]:
    from gateway.config import Limits

    bridge = dict((n, p) for n, _, p in subcommands(parser))["bridge"]
    flags = {a.dest: a for a in bridge._actions if a.option_strings}
    rows = []
    for f in dataclasses.fields(Limits):
        flag = flags.get(f.name)
        text = flag.help if flag is not None and flag.help else ""
        rows.append((code(f.name), code(repr(f.default)),
                     code(flag.option_strings[0]) if flag is not None else "", text))
    return rows


def settings_page(parser: argparse.ArgumentParser) -> str:
    """The page; ``parser``: the CLI's (:func:`gateway.cli.build_parser`), for the flags that
    set each limit."""
    rows = list(settings())
    known = [r for r in rows if not r.refused]
    refused = [r for r in rows if r.refused]
    out = [NOTE, "# Settings\n",
           "Every endpoint setting, as `?key=value` on a `gateway bridge` URL or in a bridge's "
           "`front_options` / `back_options` table of a config file (both spellings take the "
           "same names and values). Names are libzmq's socket options without `ZMQ_`, in lower "
           "case; intervals are milliseconds as in libzmq (`reconnect_ivl=100`) or carry a unit "
           "(`250ms`, `2s`, `1m`). The native engine honours every setting; a library backend "
           "(`?backend=pyzmq`, `pynng`) those it declares, and a setting it would ignore is "
           "refused when the bridge starts. Generated from the settings table.\n",
           "```text\ngateway bridge '@zmq+tcp://0.0.0.0:5555?hwm=5000' "
           "'>sp+tcp://127.0.0.1:6000?reconnect_ivl=100&reconnect_ivl_max=5s'\n```\n",
           "```toml\n[[bridge]]\nname = \"orders\"\nfront = \"@zmq+tcp://0.0.0.0:5555\"\n"
           "back = \">sp+tcp://127.0.0.1:6000\"\nfront_options = { hwm = 5000 }\n"
           "back_options = { reconnect_ivl = 100, reconnect_ivl_max = \"5s\" }\n```\n",
           "## Endpoint settings\n",
           table(("setting", "also spelled", "wire", "default", "what"),
                 [(code(r.name), ", ".join(code(a) for a in r.aliases), _families(r),
                   r.default, r.help) for r in known]),
           "## Refused spellings\n",
           "Settings that would put a secret on a command line or in a config file are refused "
           "with a hint: name a file instead.\n",
           table(("setting", "instead"), [(code(r.name), r.help) for r in refused]),
           "## Limits\n",
           "The `[limits]` table of a config file, and the `gateway bridge` options that set the "
           "same (from the config's `Limits` and the parser):\n",
           table(("key", "default", "option", "what"), _limits_rows(parser))]
    return "\n".join(out)


__all__ = ["cell", "code", "settings", "settings_page", "subcommands", "table"]
