"""Latency and error budgets: deployment gates on top of a comparison.

``--max-latency-ms [RUNNER:]STAT=MS`` (STAT one of p50, p90, p99, mean; RUNNER defaults to
every ONNX Runtime runner, the model being shipped) and ``--max-error [OUTPUT=]V`` (the
largest absolute error allowed between ONNX Runtime and eager PyTorch). A budget that a
run exceeds is a failure (exit 1), like a parity failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portable.errors import UsageError

if TYPE_CHECKING:
    from portable.runners.report import CompareReport

__all__ = ["BudgetCheck", "ErrorBudget", "LatencyBudget", "check_budgets", "parse_error_budgets",
           "parse_latency_budgets"]

_STATS = ("p50", "p90", "p99", "mean")


@dataclass(frozen=True)
class LatencyBudget:
    stat: str
    limit_ms: float
    runner: str | None = None  # None: every ONNX Runtime runner


@dataclass(frozen=True)
class ErrorBudget:
    limit: float
    output: str | None = None  # None: every output


@dataclass(frozen=True)
class BudgetCheck:
    """One budget against one measurement."""

    budget: str
    subject: str
    measured: float
    limit: float

    @property
    def passed(self) -> bool:
        return self.measured <= self.limit

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget, "subject": self.subject, "measured": self.measured, "limit": self.limit,
                "passed": self.passed}


def _number(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{option} {text!r}: not a number") from None
    if value <= 0:
        raise UsageError(f"{option} {text!r}: must be positive")
    return value


def parse_latency_budgets(values: Sequence[str]) -> tuple[LatencyBudget, ...]:
    budgets = []
    for value in values:
        head, sep, limit = value.partition("=")
        runner, _, stat = head.rpartition(":")
        if not sep or stat.lower() not in _STATS:
            raise UsageError(f"--max-latency-ms {value!r}: expected [RUNNER:]STAT=MS with STAT one of {', '.join(_STATS)}")
        budgets.append(LatencyBudget(stat.lower(), _number(limit, "--max-latency-ms"), runner or None))
    return tuple(budgets)


def parse_error_budgets(values: Sequence[str]) -> tuple[ErrorBudget, ...]:
    budgets = []
    for value in values:
        output, sep, limit = value.rpartition("=")
        budgets.append(ErrorBudget(_number(limit, "--max-error"), output if sep else None))
    return tuple(budgets)


def _latency_checks(report: CompareReport, budget: LatencyBudget) -> list[BudgetCheck]:
    checks = []
    for result in report.latency:
        wanted = result.runner == budget.runner if budget.runner else result.runner.startswith("ort-")
        if wanted:
            measured = getattr(result.stats, f"{budget.stat}_s") * 1e3
            checks.append(BudgetCheck(f"latency {budget.stat} <= {budget.limit_ms:g} ms",
                                      f"{result.runner} (batch {result.batch})", measured, budget.limit_ms))
    if not checks:
        raise UsageError(f"--max-latency-ms: no latency measured for {budget.runner or 'an ONNX Runtime runner'} "
                         "(is --no-latency set, or the runner name wrong?)")
    return checks


def _error_checks(report: CompareReport, budget: ErrorBudget) -> list[BudgetCheck]:
    checks = []
    for pair in report.parity:
        if not pair.actual.startswith("ort-") or pair.expected != "eager":
            continue
        for out in pair.outputs:
            if budget.output is None or out.output == budget.output:
                checks.append(BudgetCheck(f"max abs error <= {budget.limit:g}",
                                          f"{pair.actual} vs eager (batch {pair.batch}): {out.output}",
                                          out.stats.max_abs, budget.limit))
    if not checks:
        raise UsageError(f"--max-error: no ONNX Runtime vs eager comparison of output {budget.output or '*'!s}")
    return checks


def check_budgets(report: CompareReport, latency: Sequence[LatencyBudget],
                  errors: Sequence[ErrorBudget]) -> tuple[BudgetCheck, ...]:
    checks = [c for b in latency for c in _latency_checks(report, b)]
    checks += [c for b in errors for c in _error_checks(report, b)]
    return tuple(checks)
