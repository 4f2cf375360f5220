"""GitHub Actions workflow commands: one annotation per finding."""

from __future__ import annotations

from collections.abc import Sequence

from portable.findings import Finding, Severity
from portable.formatters.base import Formatter, annotated_source, message_with_hint
from portable.report import ValidationReport

__all__ = ["GithubFormatter"]

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _annotation(finding: Finding, model: str) -> str:
    source = annotated_source(finding)
    props = [f"file={_escape_property(source.file if source else model)}"]
    if source is not None:
        props.append(f"line={source.line}")
    props.append(f"title={_escape_property(f'{finding.rule_id} {finding.rule_name}')}")
    where = finding.location.describe()
    message = f"{model}: {where}: {message_with_hint(finding)}"
    return f"::{_COMMAND[finding.severity]} {','.join(props)}::{_escape_data(message)}"


class GithubFormatter(Formatter):
    name = "github"

    def render(self, reports: Sequence[ValidationReport]) -> str:
        lines = []
        for report in reports:
            if report.error is not None:
                lines.append(f"::error file={_escape_property(report.path)},title=unreadable model::"
                             f"{_escape_data(report.path + ': ' + report.error)}")
            lines.extend(_annotation(f, report.path) for f in report.findings)
            lines.extend(f"::notice file={_escape_property(report.path)},title={_escape_property(f'target {t.name}')}::"
                         f"{_escape_data(report.path + ': ' + t.line())}" for t in report.targets)
        return "".join(line + "\n" for line in lines)
