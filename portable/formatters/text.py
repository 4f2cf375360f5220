"""Human-readable text, grouped by model; coloured with rich on a terminal."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from portable.findings import Finding, Severity
from portable.formatters.base import Formatter
from portable.report import ValidationReport

__all__ = ["TextFormatter"]

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


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

    def _print(self, lines: list[Text]) -> str:
        buffer = io.StringIO()
        console = Console(file=buffer, force_terminal=self.color, no_color=not self.color,
                          width=10_000, highlight=False, emoji=False, soft_wrap=True)
        for line in lines:
            console.print(line)
        return buffer.getvalue()

    def _report(self, report: ValidationReport) -> list[Text]:
        if report.error is not None:
            return [Text.assemble((report.path, "bold"), ": ", ("unreadable", "bold red"), f": {report.error}")]
        counts = report.counts
        status = ("ok", "green") if report.ok else ("failed", "bold red")
        head = Text.assemble((report.path, "bold"), ": ", status,
                             f" ({_plural(counts['error'], 'error')}, {_plural(counts['warning'], 'warning')}, "
                             f"{counts['info']} info)")
        out = [head]
        for finding in report.findings:
            out.extend(self._finding(finding))
        for finding, reason in report.suppressed:
            out.append(Text(f"  ignored  {finding.rule_id} {finding.location.describe()}: {reason}", style="dim"))
        return out

    @staticmethod
    def _finding(finding: Finding) -> list[Text]:
        sev = finding.severity
        first = Text.assemble("  ", (f"{sev.value:<7}", _STYLE[sev]), " ", (finding.rule_id, "bold"),
                              f" [{finding.rule_name}] {finding.location.describe()}: {finding.message}")
        out = [first]
        if finding.location.source is not None:
            out.append(Text(f"          at {finding.location.source}", style="dim"))
        out.append(Text(f"          fix: {finding.hint}", style="dim"))
        return out

    @staticmethod
    def _summary(reports: Sequence[ValidationReport]) -> Text:
        failed = sum(1 for r in reports if r.error is None and not r.ok)
        unreadable = sum(1 for r in reports if r.error is not None)
        errors = sum(r.counts["error"] for r in reports)
        warnings = sum(r.counts["warning"] for r in reports)
        text = (f"{_plural(len(reports), 'model')} checked: {len(reports) - failed - unreadable} passed, "
                f"{failed} failed, {unreadable} unreadable; {_plural(errors, 'error')}, {_plural(warnings, 'warning')}")
        return Text(text, style="bold")
