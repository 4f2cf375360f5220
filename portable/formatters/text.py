"""Human-readable text, grouped by model; coloured with rich on a terminal.

Lines are built as plain (text, style) segments. Rich renders them in colour, and is
imported only then: without colour (a pipe, a file, CI) the lines are joined here, since
rich's import is the largest part of ``portable validate``'s start-up after onnx's.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

from portable.findings import Finding, Severity
from portable.formatters.base import Formatter
from portable.report import ValidationReport

__all__ = ["TextFormatter"]

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
# What rich would change in a plain line printed with soft wrap at width 10,000: it expands
# tabs (by cell width) and strips some control codes. Lines holding any of these, or any
# other C0/C1 control, still go through rich, so plain output is byte for byte rich's.
_RICH_CHANGES = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Line:
    """One output line: segments of text, each a ``str`` or ``(str, style)``, and a style for all."""

    parts: tuple[str | tuple[str, str], ...]
    style: str = ""


def _line(*parts: str | tuple[str, str], style: str = "") -> Line:
    return Line(parts, style)


def _plain(line: Line) -> str:
    return "".join(part if isinstance(part, str) else part[0] for part in line.parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class TextFormatter(Formatter):
    name = "text"

    def __init__(self, color: bool = False) -> None:
        self.color = color

    def render(self, reports: Sequence[ValidationReport]) -> str:
        return "".join(self.render_report(r) for r in reports) + self.render_summary(reports)

    def render_report(self, report: ValidationReport) -> str:
        """One model's part, for streaming results as they come."""
        return self._print(self._report(report))

    def render_summary(self, reports: Sequence[ValidationReport]) -> str:
        return self._print([self._summary(reports)])

    def _print(self, lines: list[Line]) -> str:
        if not self.color:
            plain = [_plain(line) for line in lines]
            if not any(_RICH_CHANGES.search(text) for text in plain):
                return "".join(f"{text}\n" for text in plain)
        return self._rich(lines)

    def _rich(self, lines: list[Line]) -> str:
        from rich.console import Console
        from rich.text import Text

        buffer = io.StringIO()
        console = Console(file=buffer, force_terminal=self.color, no_color=not self.color,
                          width=10_000, highlight=False, emoji=False, soft_wrap=True)
        for line in lines:
            console.print(Text.assemble(*line.parts, style=line.style))
        return buffer.getvalue()

    def _report(self, report: ValidationReport) -> list[Line]:
        if report.error is not None:
            return [_line((report.path, "bold"), ": ", ("unreadable", "bold red"), f": {report.error}")]
        counts = report.counts
        status = ("ok", "green") if report.ok else ("failed", "bold red")
        head = _line((report.path, "bold"), ": ", status,
                             f" ({_plural(counts['error'], 'error')}, {_plural(counts['warning'], 'warning')}, "
                             f"{counts['info']} info)")
        out = [head]
        for finding in report.findings:
            out.extend(self._finding(finding))
        for finding, reason in report.suppressed:
            out.append(_line(f"  ignored  {finding.rule_id} {finding.location.describe()}: {reason}", style="dim"))
        out.extend(_line("  target   ", (t.line(), "bold" if t.loads else "yellow")) for t in report.targets)
        return out

    @staticmethod
    def _finding(finding: Finding) -> list[Line]:
        sev = finding.severity
        first = _line("  ", (f"{sev.value:<7}", _STYLE[sev]), " ", (finding.rule_id, "bold"),
                              f" [{finding.rule_name}] {finding.location.describe()}: {finding.message}")
        out = [first]
        if finding.location.source is not None:
            out.append(_line(f"          at {finding.location.source}", style="dim"))
        if sev is not Severity.INFO:  # info is allowed behaviour: nothing to fix
            out.append(_line(f"          fix: {finding.hint}", style="dim"))
        return out

    @staticmethod
    def _summary(reports: Sequence[ValidationReport]) -> Line:
        failed = sum(1 for r in reports if r.error is None and not r.ok)
        unreadable = sum(1 for r in reports if r.error is not None)
        errors = sum(r.counts["error"] for r in reports)
        warnings = sum(r.counts["warning"] for r in reports)
        text = (f"{_plural(len(reports), 'model')} checked: {len(reports) - failed - unreadable} passed, "
                f"{failed} failed, {unreadable} unreadable; {_plural(errors, 'error')}, {_plural(warnings, 'warning')}")
        return _line(text, style="bold")
