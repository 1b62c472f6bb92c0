"""A griffe extension: the docstrings' Sphinx roles read as Markdown code.

The code's docstrings are written for reading in an editor, with Sphinx's roles
(``:class:`~gateway.errors.ConfigError```) and ``::`` before literal blocks; mkdocstrings
renders Markdown. This turns ``:role:`~a.b.C``` into ``C`` as code, ``:role:`a.b``` into
``a.b`` as code and a paragraph's trailing ``::`` into ``:`` (the indented block after it
stays a code block).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|obj|exc|const):`(~?)([^`]+)`")
LITERAL = re.compile(r"(\S)::$", re.MULTILINE)


def markdown(text: str) -> str:
    def code(m: re.Match[str]) -> str:
        target = m[2].rsplit(".", 1)[-1] if m[1] else m[2]
        return f"`{target}`"

    return LITERAL.sub(r"\1:", ROLE.sub(code, text))


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
