"""SARIF 2.1.0 for code scanning: rule metadata, the model as an artifact, the node as a
logical location, and the Python source line as the physical location when known."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from portable._version import __version__
from portable.catalogue import catalogue
from portable.findings import Finding, Severity
from portable.formatters.base import Formatter, annotated_source, message_with_hint
from portable.report import ValidationReport
from portable.ruleinfo import RuleInfo

__all__ = ["SARIF_SCHEMA", "SarifFormatter"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_INFO_URI = "https://github.com/portable-onnx/portable"


_TAGS = {"model": ["portability", "onnx"], "pre-export": ["portability", "pytorch"], "pair": ["portability", "onnx", "pair"]}


def _rule(rule: RuleInfo) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.docs},
        "help": {"text": rule.docs, "markdown": rule.docs},
        "defaultConfiguration": {"level": _LEVEL[rule.severity], "enabled": not rule.opt_in},
        "properties": {"tags": _TAGS[rule.phase]},
    }


def _rules() -> list[dict[str, Any]]:
    """Every rule's metadata from the catalogue: the model rules, then the pre-export (PORT101+) and pair (PORT301+) rules."""
    return [_rule(rule) for rule in catalogue()]


def _location(finding: Finding, artifact: int, path: str) -> dict[str, Any]:
    loc = finding.location
    logical = {
        "name": loc.node or loc.value or loc.graph,
        "fullyQualifiedName": "/".join(p for p in (loc.graph, loc.node or loc.value) if p),
        "kind": "function" if loc.node else "variable" if loc.value else "module",
    }
    source = annotated_source(finding)
    if source is not None:
        physical = {"artifactLocation": {"uri": source.file}, "region": {"startLine": source.line}}
    else:
        physical = {"artifactLocation": {"uri": path, "index": artifact}}
    return {"physicalLocation": physical, "logicalLocations": [logical]}


def _artifact(report: ValidationReport) -> dict[str, Any]:
    """The model; with ``--target``, its per-target summary in the artifact's property bag."""
    artifact: dict[str, Any] = {"location": {"uri": report.path}}
    if report.targets:
        artifact["properties"] = {"targets": [t.to_dict() for t in report.targets]}
    return artifact


class SarifFormatter(Formatter):
    name = "sarif"

    def render(self, reports: Sequence[ValidationReport]) -> str:
        return json.dumps(self.to_dict(reports), indent=2) + "\n"

    def to_dict(self, reports: Sequence[ValidationReport]) -> dict[str, Any]:
        rules = _rules()
        index = {r["id"]: i for i, r in enumerate(rules)}
        results, notes = [], []
        for artifact, report in enumerate(reports):
            if report.error is not None:
                notes.append({"level": "error", "message": {"text": f"{report.path}: {report.error}"},
                              "locations": [{"physicalLocation": {"artifactLocation": {"uri": report.path, "index": artifact}}}]})
            for finding in report.findings:
                result = {
                    "ruleId": finding.rule_id,
                    "ruleIndex": index[finding.rule_id],
                    "level": _LEVEL[finding.severity],
                    "message": {"text": message_with_hint(finding)},
                    "locations": [_location(finding, artifact, report.path)],
                }
                if annotated_source(finding) is not None:
                    result["relatedLocations"] = [{"id": 1, "message": {"text": "ONNX model"},
                                                   "physicalLocation": {"artifactLocation": {"uri": report.path, "index": artifact}}}]
                results.append(result)
        run = {
            "tool": {"driver": {"name": "portable", "version": __version__, "informationUri": _INFO_URI, "rules": rules}},
            "artifacts": [_artifact(r) for r in reports],
            "invocations": [{"executionSuccessful": not notes, "toolExecutionNotifications": notes}],
            "results": results,
        }
        return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
