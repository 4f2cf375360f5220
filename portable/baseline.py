"""Baselines: accept today's findings, fail only on new ones, report the ones that went away.

An entry is keyed by the model (its path, or the exporter's fingerprint when the file
moved), the rule id and the location (graph, node, value) — never by message text,
which may be reworded. Matching counts: two identical findings need two entries.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from portable.errors import ConfigError
from portable.findings import Finding
from portable.io import atomic_write_text
from portable.report import ValidationReport

__all__ = ["BASELINE_VERSION", "Baseline", "BaselineEntry"]

BASELINE_VERSION = 1
REASON = "in baseline"


@dataclass(frozen=True)
class BaselineEntry:
    model: str
    rule: str
    graph: str
    node: str | None
    value: str | None
    fingerprint: str | None = None

    def key(self, *, by_fingerprint: bool = False) -> tuple[Any, ...]:
        return (self.fingerprint if by_fingerprint else self.model, self.rule, self.graph, self.node, self.value)


def _entry(report: ValidationReport, finding: Finding) -> BaselineEntry:
    loc = finding.location
    return BaselineEntry(model=Path(report.path).as_posix(), rule=finding.rule_id, graph=loc.graph,
                         node=loc.node, value=loc.value, fingerprint=report.model.get("fingerprint"))


@dataclass(frozen=True)
class Baseline:
    entries: tuple[BaselineEntry, ...]

    @classmethod
    def from_reports(cls, reports: Iterable[ValidationReport]) -> Baseline:
        entries = [_entry(r, f) for r in reports for f in r.findings]
        return cls(tuple(sorted(entries, key=lambda e: tuple(str(k) for k in e.key()))))

    def write(self, path: str | Path) -> None:
        data = {"version": BASELINE_VERSION, "tool": "portable",
                "entries": [{k: v for k, v in e.__dict__.items()} for e in self.entries]}
        atomic_write_text(path, json.dumps(data, indent=2) + "\n")

    @classmethod
    def read(cls, path: str | Path) -> Baseline:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            if data.get("version") != BASELINE_VERSION:
                raise ConfigError(f"baseline {path}: unsupported version {data.get('version')!r}")
            return cls(tuple(BaselineEntry(**e) for e in data["entries"]))
        except FileNotFoundError:
            raise ConfigError(f"baseline file not found: {path}") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"baseline {path} is not a portable baseline: {exc}") from None

    def apply(self, reports: Sequence[ValidationReport]) -> tuple[list[ValidationReport], list[BaselineEntry]]:
        """Move baselined findings to ``suppressed``; return the reports and the stale entries."""
        by_path = Counter(e.key() for e in self.entries)
        by_print = Counter(e.key(by_fingerprint=True) for e in self.entries if e.fingerprint)
        out = []
        for report in reports:
            kept, waived = [], list(report.suppressed)
            for finding in report.findings:
                entry = _entry(report, finding)
                if by_path[entry.key()] > 0:
                    by_path[entry.key()] -= 1
                    waived.append((finding, REASON))
                elif entry.fingerprint and by_print[entry.key(by_fingerprint=True)] > 0:
                    by_print[entry.key(by_fingerprint=True)] -= 1
                    waived.append((finding, REASON))
                else:
                    kept.append(finding)
            out.append(replace(report, findings=tuple(kept), suppressed=tuple(waived)))
        checked = {Path(r.path).as_posix() for r in reports if r.error is None}
        stale = []
        for entry in self.entries:
            if entry.model in checked and by_path[entry.key()] > 0:
                by_path[entry.key()] -= 1
                stale.append(entry)
        return out, stale
