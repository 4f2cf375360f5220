"""What one quantization run did, measured and wrote: the record the CLI renders and the manifest keeps."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portable.errors import ExitCode, FindingsError
from portable.findings import Finding
from portable.quantization.accuracy import BudgetCheck, OutputAccuracy
from portable.quantization.nodes import NodeError
from portable.quantization.on_htp import HtpAccuracy
from portable.quantization.search import SearchResult
from portable.quantization.settings import Budgets, Settings
from portable.quantization.speed import LatencyComparison
from portable.report import ValidationReport

__all__ = ["QUANTIZE_SCHEMA", "QuantizeFailed", "QuantizeResult", "SampleSet"]

QUANTIZE_SCHEMA = "portable.quantize/1"


@dataclass(frozen=True)
class SampleSet:
    """Where a set of samples came from and how many there were."""

    source: str
    count: int
    seeded: bool
    preprocess: dict[str, Any] | None = None  # a folder of images: resize, crop, mean and std

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "samples": self.count, "seeded": self.seeded, "preprocess": self.preprocess}


@dataclass(frozen=True)
class QuantizeResult:
    """The run's record. ``written`` is False when the result fails the contract or a budget."""

    source: Path
    path: Path
    settings: Settings
    calibration: SampleSet
    held_out: SampleSet
    budgets: Budgets = Budgets()
    written: bool = False
    report: ValidationReport | None = None
    accuracy: tuple[OutputAccuracy, ...] = ()
    checks: tuple[BudgetCheck, ...] = ()
    worst_nodes: tuple[NodeError, ...] = ()
    latency: LatencyComparison | None = None
    fingerprint: str | None = None
    ops: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    passes: dict[str, Any] = field(default_factory=dict)  # what ran on the float model before the quantizer
    search: SearchResult | None = None  # the precision search, when a budget of the user's ran one
    htp: HtpAccuracy | None = None  # --target qnn with onnxruntime-qnn: ``accuracy`` is the HTP's, ORT CPU's beside it

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The quantized model's findings that fail the contract (nothing is written then)."""
        return self.report.failing() if self.report is not None else ()

    @property
    def budgets_ok(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def ok(self) -> bool:
        return self.report is not None and not self.findings and self.budgets_ok

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok and self.written else ExitCode.FINDINGS

    @property
    def manifest_path(self) -> Path:
        return self.path.with_name(self.path.name + ".json")

    def to_dict(self) -> dict[str, Any]:
        return {"schema": QUANTIZE_SCHEMA, "source": str(self.source), "path": str(self.path),
                "written": self.written, "manifest": str(self.manifest_path) if self.written else None,
                "ok": self.ok, "exit_code": int(self.exit_code), "fingerprint": self.fingerprint,
                **self.measurements(), "validation": self.report.to_dict() if self.report is not None else None,
                "timings": dict(self.timings)}

    def measurements(self) -> dict[str, Any]:
        """What the manifest keeps of the run: settings, samples, accuracy, budgets, nodes, latency."""
        return {"settings": self.settings.to_dict(), "calibration": self.calibration.to_dict(),
                "held_out": self.held_out.to_dict(), "ops": dict(self.ops),
                "accuracy": [a.to_dict() for a in self.accuracy], "budgets": self.budgets.to_dict(),
                "budget_checks": [c.to_dict() for c in self.checks], "budgets_ok": self.budgets_ok,
                "judged": judged(self.accuracy, self.checks, floor=self.budgets.floor is not None),
                "worst_nodes": [n.to_dict() for n in self.worst_nodes],
                "latency": self.latency.to_dict() if self.latency is not None else None, "notes": list(self.notes),
                "passes": dict(self.passes), "precision_search": _search_dict(self.search),
                "htp": self.htp.to_dict() if self.htp is not None else None}


def judged(accuracy: tuple[OutputAccuracy, ...], checks: tuple[BudgetCheck, ...], *,
           floor: bool) -> dict[str, dict[str, Any]]:
    """Per output: what judges it (``kind``, ``why``, ``positions``) and each figure held to a least value, as
    another tool reads them to judge the int8 file again (``compare``): ``figure`` (a name of
    :data:`portable.quantization.accuracy.FIGURES`), ``min``, ``measured``, ``passed``, ``budget`` (the flag's
    spelling) and ``by`` ("default floor" or "your budget"). A top-1 drop budget is written as the least
    agreement it leaves (``top1_agreement_pct`` at least 100 - PCT)."""
    figures: dict[str, list[dict[str, Any]]] = {a.name: [] for a in accuracy}
    for c in checks:
        if c.output not in figures:
            continue
        drop = c.budget == "max-top1-drop"
        figures[c.output].append({"figure": c.figure, "min": 100.0 - c.limit if drop else c.limit,
                                  "measured": _finite(100.0 - c.measured if drop else c.measured),
                                  "passed": c.passed, "budget": c.budget,
                                  "by": "default floor" if floor else "your budget", "why": c.why})
    return {a.name: {"kind": a.kind, "why": a.why, "positions": a.positions, "figures": figures[a.name]}
            for a in accuracy}


def _finite(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None


def _search_dict(found: SearchResult | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"kept_float": list(found.kept_float), "trials": found.trials, "met": found.met,
            "tried_float": list(found.tried)}


class QuantizeFailed(FindingsError):
    """Nothing was written: the quantized model fails the contract or an accuracy budget (exit 1).
    ``result`` holds everything measured up to there."""

    def __init__(self, message: str, result: QuantizeResult) -> None:
        super().__init__(message, path=str(result.source))
        self.result = result
