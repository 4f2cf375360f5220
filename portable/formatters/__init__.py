"""Report formats, one class each: text, concise, json, junit, sarif, github, gitlab.

A formatter's module is imported when it is asked for (``portable validate`` with the text
format never loads the XML or SARIF writers: start-up time)."""

from __future__ import annotations

import importlib

from portable.errors import UsageError
from portable.formatters.base import Formatter

__all__ = ["FORMATS", "Formatter", "formatter_class", "get_formatter"]

# format name -> "module:class"
FORMATS: dict[str, str] = {
    "text": "portable.formatters.text:TextFormatter",
    "json": "portable.formatters.json:JsonFormatter",
    "junit": "portable.formatters.junit:JunitFormatter",
    "sarif": "portable.formatters.sarif:SarifFormatter",
    "github": "portable.formatters.github:GithubFormatter",
    "concise": "portable.formatters.concise:ConciseFormatter",
    "gitlab": "portable.formatters.gitlab:GitlabFormatter",
}


def formatter_class(name: str) -> type[Formatter]:
    """The formatter class of a format name (a usage error for an unknown one)."""
    if name not in FORMATS:
        raise UsageError(f"unknown format {name!r} (choose from {', '.join(FORMATS)})")
    module, attr = FORMATS[name].split(":")
    cls: type[Formatter] = getattr(importlib.import_module(module), attr)
    return cls


def get_formatter(name: str, *, color: bool = False) -> Formatter:
    """A formatter by name; ``color`` applies to ``text`` only."""
    cls = formatter_class(name)
    return cls(color=color) if name == "text" else cls()  # type: ignore[call-arg]
