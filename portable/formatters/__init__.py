"""Report formats, one class each: text, json, junit, sarif, github."""

from __future__ import annotations

from portable.errors import UsageError
from portable.formatters.base import Formatter
from portable.formatters.github import GithubFormatter
from portable.formatters.json import JsonFormatter
from portable.formatters.junit import JunitFormatter
from portable.formatters.sarif import SarifFormatter
from portable.formatters.text import TextFormatter

__all__ = ["FORMATS", "Formatter", "get_formatter"]

FORMATS: dict[str, type[Formatter]] = {
    "text": TextFormatter,
    "json": JsonFormatter,
    "junit": JunitFormatter,
    "sarif": SarifFormatter,
    "github": GithubFormatter,
}


def get_formatter(name: str, *, color: bool = False) -> Formatter:
    """A formatter by name; ``color`` applies to ``text`` only."""
    if name not in FORMATS:
        raise UsageError(f"unknown format {name!r} (choose from {', '.join(FORMATS)})")
    return TextFormatter(color=color) if name == "text" else FORMATS[name]()
