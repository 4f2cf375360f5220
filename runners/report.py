"""The comparison report: frozen dataclasses with ``to_dict()`` in a versioned JSON schema.

Schema ``portable.compare`` version 1 (documented in docs/runners.md): top-level keys
``schema``, ``schema_version``, ``model``, ``reference``, ``passed``, ``exit_code``,
``setup``, ``environment``, ``runners``, ``parity``, ``latency``, ``speedup``,
``localization``, ``notes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from portable.errors import ExitCode
from portable.runners.budgets import BudgetCheck
from portable.runners.comparator import HISTOGRAM_EDGES, PairComparison
from portable.runners.stats import LatencyStats
from portable.runners.timing import Warmup

__all__ = ["COMPARE_SCHEMA", "COMPARE_SCHEMA_VERSION", "CompareReport", "LatencyResult", "Localization",
           "RunnerInfo", "SpeedupRow"]

COMPARE_SCHEMA = "portable.compare"
COMPARE_SCHEMA_VERSION = 1
MAX_CV = 0.2  # a latency whose stdev/mean exceeds this is reported as unsteady


@dataclass(frozen=True)
class RunnerInfo:
    """A runner as it ran: load time (session creation / placement), first call per batch
    (for ``torch.compile`` this is compile time to first result), resident growth on load."""

    name: str
    kind: str
    device: str
    detail: str  # execution provider or compile mode
    load_seconds: float | None
    first_result_seconds: Mapping[int, float] = field(default_factory=dict)
    load_rss_growth_bytes: int | None = None
    error: str | None = None  # why the runner could not load or run (its results are then absent)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "device": self.device, "detail": self.detail,
                "load_seconds": self.load_seconds,
                "first_result_seconds": {str(b): s for b, s in self.first_result_seconds.items()},
                "load_rss_growth_bytes": self.load_rss_growth_bytes, "error": self.error}


@dataclass(frozen=True)
class LatencyResult:
    runner: str
    batch: int
    stats: LatencyStats
    timer: str  # "cuda_events" | "perf_counter"
    peak_memory_bytes: int | None
    memory_kind: str  # "cuda_max_memory_allocated" | "nvml_process_used_growth" | ... | "rss_growth"
    pipelined_s: float | None = None  # seconds per call, calls back to back (median of blocks)
    warmup: Warmup | None = None
    rounds: int | None = None  # round-robin rounds it was timed in

    def to_dict(self) -> dict[str, Any]:
        return {"runner": self.runner, "batch": self.batch, "timer": self.timer,
                "peak_memory_bytes": self.peak_memory_bytes, "memory_kind": self.memory_kind,
                "pipelined_s": self.pipelined_s, "rounds": self.rounds,
                "warmup": None if self.warmup is None else self.warmup.to_dict(), **self.stats.to_dict()}


@dataclass(frozen=True)
class SpeedupRow:
    """One runner against eager at one batch size (p50 latencies)."""

    batch: int
    runner: str
    p50_s: float
    eager_p50_s: float
    peak_memory_bytes: int | None

    @property
    def speedup(self) -> float:
        return self.eager_p50_s / self.p50_s if self.p50_s > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "runner": self.runner, "p50_s": self.p50_s,
                "eager_p50_s": self.eager_p50_s, "speedup_over_eager": self.speedup,
                "peak_memory_bytes": self.peak_memory_bytes}


@dataclass(frozen=True)
class Localization:
    """The first ONNX node whose output diverges from the PyTorch value it was exported from."""

    compared: int  # intermediate values compared, up to the divergence
    candidates: int = 0  # FX values the graph's nodes name (what could be compared at most)
    node: str | None = None
    op_type: str | None = None
    value: str | None = None
    fx_node: str | None = None
    name_scope: str | None = None
    source: str | None = None  # "file.py:LINE: code" of the user's frame
    max_abs: float | None = None
    beyond: int | None = None
    error: str | None = None  # why localization could not run

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CompareReport:
    model: str
    reference: str
    setup: Mapping[str, Any]  # device, compile mode, tf32, seed, batches, inputs, timing
    environment: Mapping[str, Any]
    runners: tuple[RunnerInfo, ...]
    parity: tuple[PairComparison, ...]
    latency: tuple[LatencyResult, ...] = ()
    localization: Localization | None = None
    notes: tuple[str, ...] = ()
    budgets: tuple[BudgetCheck, ...] = ()  # judged only on a run whose parity passed and runners all ran

    @property
    def parity_passed(self) -> bool:
        """Every pair within tolerance and every runner ran (the run completed: its budgets can be judged)."""
        return all(p.passed for p in self.parity) and not self.runner_errors

    @property
    def passed(self) -> bool:
        """Parity passed and every budget was met."""
        return self.parity_passed and all(b.passed for b in self.budgets)

    @property
    def runner_errors(self) -> tuple[str, ...]:
        """``"compiled: RuntimeError: ..."`` for each runner that could not load or run."""
        return tuple(f"{r.name}: {r.error}" for r in self.runners if r.error)

    @property
    def exit_code(self) -> ExitCode:
        """1 on a parity failure or an exceeded budget; 3 when a runner could not run (the others are
        still reported)."""
        if not all(p.passed for p in self.parity) or not all(b.passed for b in self.budgets):
            return ExitCode.FINDINGS
        return ExitCode.ERROR if self.runner_errors else ExitCode.OK

    @property
    def parity_failures(self) -> tuple[str, ...]:
        """``"ort-cpu vs eager (batch 1): logits"`` for each failing pair, then each runner's error."""
        return tuple(f"{p.actual} vs {p.expected} (batch {p.batch}): {', '.join(p.failing_outputs) or p.error}"
                     for p in self.parity if not p.passed) + self.runner_errors

    @property
    def failures(self) -> tuple[str, ...]:
        """The parity failures, then each exceeded budget."""
        return self.parity_failures + tuple(f"budget exceeded: {b.budget}: {b.subject} measured {b.measured:.6g}"
                                            for b in self.budgets if not b.passed)

    @property
    def timing_warnings(self) -> tuple[str, ...]:
        """A latency figure whose run-to-run spread makes it meaningless (CV above :data:`MAX_CV`)."""
        return tuple(f"latency of {r.runner} at batch {r.batch} varies run to run (CV {r.stats.cv:.2f} > {MAX_CV}): "
                     "its figures are not the model's; run again with the machine otherwise idle, or longer "
                     "(--duration-ms)" for r in self.latency if r.stats.cv > MAX_CV)

    def speedups(self) -> tuple[SpeedupRow, ...]:
        eager = {r.batch: r for r in self.latency if r.runner == "eager"}
        return tuple(SpeedupRow(r.batch, r.runner, r.stats.p50_s, eager[r.batch].stats.p50_s, r.peak_memory_bytes)
                     for r in self.latency if r.batch in eager)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": COMPARE_SCHEMA,
            "schema_version": COMPARE_SCHEMA_VERSION,
            "model": self.model,
            "reference": self.reference,
            "passed": self.passed,
            "parity_passed": self.parity_passed,
            "exit_code": int(self.exit_code),
            "failures": list(self.failures),
            "setup": dict(self.setup),
            "environment": dict(self.environment),
            "histogram_log10_edges": list(HISTOGRAM_EDGES),
            "runners": [r.to_dict() for r in self.runners],
            "parity": [p.to_dict() for p in self.parity],
            "latency": [r.to_dict() for r in self.latency],
            "speedup": [s.to_dict() for s in self.speedups()],
            "localization": None if self.localization is None else self.localization.to_dict(),
            "notes": list(self.notes),
            "timing_warnings": list(self.timing_warnings),
            "budgets": [b.to_dict() for b in self.budgets],
        }
