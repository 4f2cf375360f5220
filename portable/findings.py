"""Findings: what a rule says about one place in a model."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["Finding", "Location", "Severity", "SourceLocation"]


class Severity(str, Enum):
    """How bad a finding is. Only ``error`` fails a run (``warning`` too under ``--strict``)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 2, "warning": 1, "info": 0}[self.value]

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.lower())
        except ValueError:
            choices = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown severity {text!r} (choose from {choices})") from None


@dataclass(frozen=True)
class SourceLocation:
    """Where the PyTorch code that produced a node lives (from the exporter's metadata)."""

    file: str
    line: int
    module: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where} ({self.module})" if self.module else where


@dataclass(frozen=True)
class Location:
    """A place in a model: graph path, node, op type, value and, when known, the Python source."""

    graph: str = "main"
    node: str | None = None
    op_type: str | None = None
    value: str | None = None
    source: SourceLocation | None = None

    def describe(self) -> str:
        parts = [self.graph]
        if self.node is not None:
            parts.append(f"node {self.node!r}" + (f" ({self.op_type})" if self.op_type else ""))
        elif self.op_type:
            parts.append(self.op_type)
        if self.value is not None:
            parts.append(f"value {self.value!r}")
        return ", ".join(parts)

    def sort_key(self) -> tuple[str, str, str]:
        return (self.graph, self.node or "", self.value or "")


@dataclass(frozen=True)
class Finding:
    """One violation (or note) found by one rule at one location."""

    rule_id: str
    rule_name: str
    severity: Severity
    message: str
    hint: str
    location: Location = field(default_factory=Location)

    def to_dict(self) -> dict[str, Any]:
        loc = self.location
        source = None
        if loc.source is not None:
            source = {"file": loc.source.file, "line": loc.source.line, "module": loc.source.module}
        return {
            "rule": self.rule_id,
            "name": self.rule_name,
            "severity": self.severity.value,
            "message": self.message,
            "hint": self.hint,
            "location": {
                "graph": loc.graph,
                "node": loc.node,
                "op_type": loc.op_type,
                "value": loc.value,
                "source": source,
            },
        }
