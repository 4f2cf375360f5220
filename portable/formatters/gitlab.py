"""GitLab code quality (the Code Climate subset GitLab reads): a JSON array of issues.

Each issue has ``description``, ``check_name``, ``fingerprint`` (stable across runs, so GitLab can
tell new findings from old), ``severity`` and ``location.path`` / ``location.lines.begin``: the
user's source line when known, else line 1 of the model file.
https://docs.gitlab.com/ci/testing/code_quality/#code-quality-report-format
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

from portable.findings import Finding, Severity
from portable.formatters.base import Formatter, annotated_source, message_with_hint
from portable.report import ValidationReport

__all__ = ["GitlabFormatter"]

_SEVERITY = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.INFO: "info"}


def _issue(path: str, check: str, description: str, severity: str, where: tuple[str, int], key: str) -> dict[str, Any]:
    return {"description": description, "check_name": check,
            "fingerprint": hashlib.sha256(f"{path}\0{check}\0{key}".encode()).hexdigest()[:32],
            "severity": severity, "location": {"path": where[0], "lines": {"begin": where[1]}}}


def _finding(path: str, finding: Finding) -> dict[str, Any]:
    source = annotated_source(finding)
    where = (source.file, source.line) if source is not None else (path, 1)
    text = f"{finding.rule_id} [{finding.rule_name}] {path}: {finding.location.describe()}: {message_with_hint(finding)}"
    key = f"{finding.location.describe()}\0{finding.message}"
    return _issue(path, finding.rule_id, text, _SEVERITY[finding.severity], where, key)


def _issues(report: ValidationReport) -> Iterator[dict[str, Any]]:
    if report.error is not None:
        yield _issue(report.path, "unreadable", f"{report.path}: {report.error}", "blocker", (report.path, 1), "")
    yield from (_finding(report.path, f) for f in report.findings)


class GitlabFormatter(Formatter):
    name = "gitlab"

    def render(self, reports: Sequence[ValidationReport]) -> str:
        issues: list[dict[str, Any]] = []
        seen: set[str] = set()
        for issue in (i for report in reports for i in _issues(report)):
            while issue["fingerprint"] in seen:  # two identical findings stay two issues
                issue["fingerprint"] = hashlib.sha256(issue["fingerprint"].encode()).hexdigest()[:32]
            seen.add(issue["fingerprint"])
            issues.append(issue)
        return json.dumps(issues, indent=2) + "\n"
