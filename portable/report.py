"""Validation reports: what formatters see, and what the exit code comes from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from portable.errors import ExitCode
from portable.findings import Finding, Severity
from portable.policy import Policy

__all__ = ["REPORT_SCHEMA_VERSION", "ValidationReport", "worst_exit_code"]

REPORT_SCHEMA_VERSION = "1.0"


@dataclass(frozen=True)
class ValidationReport:
    """The findings for one model (or why it could not be read: ``error``)."""

    path: str
    policy: Policy
    findings: tuple[Finding, ...] = ()
    error: str | None = None  # unreadable input: one line naming the problem
    model: dict[str, Any] = field(default_factory=dict)  # opset, producer, graph size
    suppressed: tuple[tuple[Finding, str], ...] = ()  # findings waived inline, with the reason
    rules: tuple[str, ...] = ()  # ids of the rules that ran

    @property
    def counts(self) -> dict[str, int]:
        seen = Counter(f.severity.value for f in self.findings)
        return {sev.value: seen.get(sev.value, 0) for sev in Severity}

    def failing(self, *, strict: bool | None = None) -> tuple[Finding, ...]:
        strict = self.policy.strict if strict is None else strict
        floor = Severity.WARNING.rank if strict else Severity.ERROR.rank
        return tuple(f for f in self.findings if f.severity.rank >= floor)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failing()

    @property
    def exit_code(self) -> ExitCode:
        if self.error is not None:
            return ExitCode.ERROR
        return ExitCode.FINDINGS if self.failing() else ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "exit_code": int(self.exit_code),
            "error": self.error,
            "counts": self.counts,
            "rules": list(self.rules),
            "model": dict(self.model),
            "findings": [f.to_dict() for f in self.findings],
            "suppressed": [{**f.to_dict(), "reason": why} for f, why in self.suppressed],
        }


def worst_exit_code(reports: Sequence[ValidationReport]) -> ExitCode:
    """The exit code of a run over several models: the worst of them."""
    return max((r.exit_code for r in reports), default=ExitCode.OK)
