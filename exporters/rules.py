"""Pre-export rules (PORT101+): what torch.export and dynamo say about the model's Python code.

They are :class:`portable.findings.Finding` like the validators' rules, so a precheck
result is a :class:`portable.report.ValidationReport` that every formatter renders.
"""

from __future__ import annotations

from dataclasses import dataclass

from portable.findings import Finding, Location, Severity, SourceLocation

__all__ = ["PRECHECK_RULES", "PrecheckRule", "precheck_finding"]


@dataclass(frozen=True)
class PrecheckRule:
    id: str
    name: str
    severity: Severity
    hint: str


PRECHECK_RULES: dict[str, PrecheckRule] = {r.id: r for r in (
    PrecheckRule("PORT101", "data-dependent-branch", Severity.ERROR,
                 "decide the branch from configuration, or compute both sides and select with torch.where"),
    PrecheckRule("PORT102", "graph-break", Severity.WARNING,
                 "remove the construct dynamo cannot trace (print, data-dependent Python, unsupported calls)"),
    PrecheckRule("PORT103", "batch-specialized", Severity.ERROR,
                 "size buffers and views from configuration or x.shape[0], not the example batch; or export with --batch N"),
    PrecheckRule("PORT104", "export-failed", Severity.ERROR,
                 "make the model traceable by torch.export (see the torch message)"),
    PrecheckRule("PORT105", "control-flow-operator", Severity.ERROR,
                 "torch.cond/while_loop export to If/Loop (PORT004): compute both sides and select with torch.where"),
    PrecheckRule("PORT106", "data-dependent-shape", Severity.ERROR,
                 "avoid ops whose output size depends on values (nonzero, masked_select, unique); use masks of fixed size"),
)}


def precheck_finding(rule_id: str, message: str, source: SourceLocation | None = None,
                     value: str | None = None, hint: str | None = None) -> Finding:
    """A finding of one of the :data:`PRECHECK_RULES`, located at the user's source line
    (``hint``: a remedy known for this case, instead of the rule's general one)."""
    rule = PRECHECK_RULES[rule_id]
    location = Location(graph="torch.export", value=value, source=source)
    return Finding(rule.id, rule.name, rule.severity, message, hint or rule.hint, location)
