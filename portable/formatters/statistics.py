"""``portable validate --statistics``: how often each rule fired, most frequent first (ruff's
``--statistics``), as text or JSON, in place of the findings."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from portable.report import ValidationReport

__all__ = ["RuleCount", "render_statistics", "rule_counts"]


@dataclass(frozen=True)
class RuleCount:
    rule: str
    name: str
    severity: str
    count: int
    models: int  # how many models it fired on


def rule_counts(reports: Sequence[ValidationReport]) -> list[RuleCount]:
    """One row per (rule, severity) found, most frequent first, then by rule id."""
    counts: Counter[tuple[str, str, str]] = Counter()
    models: Counter[tuple[str, str, str]] = Counter()
    for report in reports:
        keys = [(f.rule_id, f.rule_name, f.severity.value) for f in report.findings]
        counts.update(keys)
        models.update(set(keys))
    rows = [RuleCount(*key, count=n, models=models[key]) for key, n in counts.items()]
    return sorted(rows, key=lambda r: (-r.count, r.rule, r.severity))


def render_statistics(reports: Sequence[ValidationReport], fmt: str) -> str:
    """The table (``text``) or a JSON object (``json``); unreadable models are counted too."""
    rows = rule_counts(reports)
    unreadable = sum(1 for r in reports if r.error is not None)
    if fmt == "json":
        return json.dumps({"models": len(reports), "unreadable": unreadable,
                           "rules": [asdict(r) for r in rows]}, indent=2) + "\n"
    lines = [f"{r.count:>6}  {r.rule}  {r.name:<28} {r.severity:<8} in {r.models} model{'' if r.models == 1 else 's'}"
             for r in rows]
    if unreadable:
        lines.append(f"{unreadable:>6}  unreadable model{'' if unreadable == 1 else 's'}")
    lines.append(f"{sum(r.count for r in rows)} finding(s) in {len(reports)} model(s)")
    return "".join(f"{line}\n" for line in lines)
