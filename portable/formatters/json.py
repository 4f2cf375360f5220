"""JSON, versioned: the schema is ``portable/schemas/report.schema.json``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from portable._version import __version__
from portable.formatters.base import Formatter
from portable.report import REPORT_SCHEMA_VERSION, ValidationReport, worst_exit_code

__all__ = ["JsonFormatter", "reports_to_dict"]


def reports_to_dict(reports: Sequence[ValidationReport]) -> dict[str, Any]:
    policy = reports[0].policy.to_dict() if reports else None
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "tool": {"name": "portable", "version": __version__},
        "policy": policy,
        "exit_code": int(worst_exit_code(reports)),
        "summary": {
            "models": len(reports),
            "passed": sum(1 for r in reports if r.ok),
            "failed": sum(1 for r in reports if r.error is None and not r.ok),
            "unreadable": sum(1 for r in reports if r.error is not None),
            "errors": sum(r.counts["error"] for r in reports),
            "warnings": sum(r.counts["warning"] for r in reports),
            "info": sum(r.counts["info"] for r in reports),
        },
        "reports": [r.to_dict() for r in reports],
    }


class JsonFormatter(Formatter):
    name = "json"

    def render(self, reports: Sequence[ValidationReport]) -> str:
        return json.dumps(reports_to_dict(reports), indent=2, sort_keys=False) + "\n"
