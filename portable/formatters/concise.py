"""One line per finding, for grep and for terminals in CI logs (ruff's ``concise``).

``MODEL: SEVERITY RULE [name] WHERE: MESSAGE (fix: HINT)``; an unreadable model and each
target's summary get a line of their own; the last line counts what was found.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from portable.findings import Finding
from portable.formatters.base import Formatter, message_with_hint
from portable.report import ValidationReport

__all__ = ["ConciseFormatter"]


def _finding(path: str, finding: Finding) -> str:
    source = finding.location.source
    where = finding.location.describe() + (f" at {source}" if source is not None else "")
    return f"{path}: {finding.severity.value} {finding.rule_id} [{finding.rule_name}] {where}: {message_with_hint(finding)}"


def _lines(report: ValidationReport) -> Iterator[str]:
    if report.error is not None:
        yield f"{report.path}: unreadable: {report.error}"
    yield from (_finding(report.path, f) for f in report.findings)
    yield from (f"{report.path}: target {t.line()}" for t in report.targets)


def _summary(reports: Sequence[ValidationReport]) -> str:
    found = sum(len(r.findings) for r in reports)
    failed = sum(1 for r in reports if not r.ok)
    return f"{found} finding{'' if found == 1 else 's'} in {len(reports)} model{'' if len(reports) == 1 else 's'}; {failed} failed"


class ConciseFormatter(Formatter):
    name = "concise"

    def render(self, reports: Sequence[ValidationReport]) -> str:
        lines = [line for report in reports for line in _lines(report)]
        return "".join(f"{line}\n" for line in [*lines, _summary(reports)])
