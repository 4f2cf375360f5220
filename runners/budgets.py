"""Latency and error budgets: deployment gates on top of a comparison; and the figures that judge a quantized
file's outputs instead of atol/rtol.

``--max-latency-ms [RUNNER:]STAT=MS`` (STAT one of p50, p90, p99, mean; RUNNER defaults to
every ONNX Runtime runner, the model being shipped) and ``--max-error [OUTPUT=]V`` (the
largest absolute error allowed between ONNX Runtime and eager PyTorch). A budget that a
run exceeds is a failure (exit 1), like a parity failure.

An int8 file is not the float model to 1e-4 (issue 48: ``compare int8.onnx`` failed a sentence embedding at
cosine 0.989 by fp32's atol, and ``--runtime ort,openvino`` at 0.064 against atol 1e-4). Its outputs are judged
as ``portable quantize`` judged them (:class:`Figures`): an embedding-like output by the mean cosine of its
last-axis vectors, any other by SQNR, each against the budget its manifest records (:func:`read_quantized`, the
one place its keys are read), or quantize's default where it records none; ``--min-cosine`` / ``--min-sqnr``
set them for any file. Each output's :class:`Judge` says which figure and why, for the report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from portable.errors import UsageError

if TYPE_CHECKING:
    from portable.runners.report import CompareReport
    from portable.runners.tolerances import ToleranceTable

__all__ = ["DEFAULT_MIN_COSINE", "BudgetCheck", "ErrorBudget", "Figures", "Judge", "LatencyBudget", "check_budgets",
           "embedding_like", "figures_of", "parse_error_budgets", "parse_latency_budgets", "read_quantized",
           "with_figures"]

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


# -- the figures that judge a quantized file -------------------------------------------------------------------

# The least mean cosine of an embedding-like output, where neither the user nor the file's manifest gives one:
# issue 44's bar for an int8 sentence encoder (quantize's default floor records SQNR and top-1 only).
DEFAULT_MIN_COSINE = 0.99
_EMBEDDING_WORDS = ("embed", "hidden", "pooler")  # sentence_embedding, last_hidden_state, pooler_output...


class Judge(NamedTuple):
    """One float output judged by ``figure`` (``cosine``: the mean cosine of its last-axis vectors; ``sqnr``:
    ``10 log10(sum e^2 / sum (e - a)^2)`` in dB, quantize's definitions) at least ``limit``; ``why`` for the report."""

    figure: str
    limit: float
    why: str

    def describe(self) -> str:
        return f"cosine >= {self.limit:g}" if self.figure == "cosine" else f"SQNR >= {self.limit:g} dB"

    def measure(self, actual: np.ndarray, expected: np.ndarray) -> float:
        from portable.quantization.accuracy import cosine_mean, sqnr_db

        return cosine_mean(expected, actual) if self.figure == "cosine" else sqnr_db(expected, actual)


class Figures(NamedTuple):
    """How float outputs are judged by a figure instead of atol/rtol, and where each limit comes from. A NamedTuple,
    so that ``dataclasses.asdict`` of a :class:`~portable.runners.tolerances.ToleranceTable` keeps it whole."""

    min_cosine: float | None = None
    min_sqnr_db: float | None = None
    cosine_from: str = ""
    sqnr_from: str = ""
    recorded: tuple[tuple[str, str], ...] = ()  # (output, figure) as the file's manifest judges it
    given: bool = False  # the user's --min-cosine/--min-sqnr, which come before --atol/--rtol

    def judge(self, name: str, expected: np.ndarray) -> Judge | None:
        """The figure for this output (:meth:`_kind`), at its limit; the other figure where this one has none;
        None when neither applies (the output is then judged by atol/rtol)."""
        kind, reason = self._kind(name, expected)
        for figure in dict.fromkeys((kind, "sqnr", "cosine")):
            limit, source = (self.min_cosine, self.cosine_from) if figure == "cosine" else (self.min_sqnr_db, self.sqnr_from)
            if limit is not None and (figure == "sqnr" or _vectors(expected)):
                said = reason if figure == kind else f"{reason}, but no {kind} limit is set: {figure}"
                return Judge(figure, float(limit), f"{said}; the limit: {source}")
        return None

    def _kind(self, name: str, expected: np.ndarray) -> tuple[str, str]:
        """``cosine`` or ``sqnr``, and why: what the manifest records for the output, else its look."""
        recorded = dict(self.recorded).get(name)
        if recorded in ("cosine", "sqnr"):
            return recorded, f"the file's manifest judges {name!r} by {recorded}"
        if recorded:
            return "sqnr", (f"the file's manifest judges {name!r} by {recorded}, which a few seeded inputs cannot "
                            "measure: SQNR")
        like = embedding_like(name, expected)
        if like is not None:
            return "cosine", f"{name!r} is embedding-like ({like})"
        return "sqnr", f"{name!r} is not embedding-like (logits or another tensor: SQNR)"


def _vectors(expected: np.ndarray) -> bool:
    return expected.dtype.kind == "f" and expected.ndim >= 2 and expected.shape[-1] >= 2


def embedding_like(name: str, expected: np.ndarray) -> str | None:
    """Why an output reads as embeddings (token states ``[batch, seq, hidden]``, a name that says so, rows of unit
    norm: ``F.normalize``), or None."""
    if not _vectors(expected):
        return None
    if expected.ndim == 3:
        return "rank 3: token states"
    if any(word in name.lower() for word in _EMBEDDING_WORDS):
        return "its name"
    norms = np.linalg.norm(np.asarray(expected, dtype=np.float64).reshape(-1, expected.shape[-1]), axis=1)
    return "its rows have unit norm" if norms.size and np.allclose(norms, 1.0, atol=1e-3) else None


def read_quantized(manifest: Mapping[str, Any], where: str) -> Figures | None:
    """A quantized file's figures from its manifest; None for a float file. The keys read, all here:
    ``precision`` (``int8...``: ``int8-qdq`` today), ``quantization.budgets.min_cosine`` and
    ``quantization.budgets.min_sqnr_db`` (quantize's limits: the user's budgets or the default floor), and per
    output ``quantization.accuracy[i].output`` with its ``judged_by`` (``cosine``, ``sqnr``, ``top1``...),
    where quantize records which figure judges it."""
    if not str(manifest.get("precision", "")).startswith("int8"):
        return None
    quantization = manifest.get("quantization") or {}
    budgets = quantization.get("budgets") or {}
    floor = " (quantize's default floor)" if budgets.get("default_floor") else ""
    judged = _judged(quantization.get("judged"))
    cosine, sqnr = budgets.get("min_cosine"), budgets.get("min_sqnr_db")
    cosine_key = "min_cosine" if cosine is not None else "quantization.judged"
    sqnr_key = "min_sqnr_db" if sqnr is not None else "quantization.judged"
    cosine, sqnr = _or_least(cosine, judged, "cosine_mean"), _or_least(sqnr, judged, "sqnr_db")
    recorded = tuple((str(row["output"]), str(row["judged_by"])) for row in quantization.get("accuracy") or ()
                     if isinstance(row, Mapping) and row.get("output") and row.get("judged_by"))
    recorded += tuple((name, _figure_of(entry)) for name, entry in judged.items())
    return Figures(
        float(cosine) if cosine is not None else DEFAULT_MIN_COSINE,
        float(sqnr) if sqnr is not None else _default_sqnr(),
        f"the {manifest['precision']} file's {cosine_key}{floor} ({where})" if cosine is not None else
        f"{DEFAULT_MIN_COSINE:g}, the default for an int8 embedding (its manifest, {where}, records no min_cosine)",
        f"the {manifest['precision']} file's {sqnr_key}{floor} ({where})" if sqnr is not None else
        f"quantize's default floor (its manifest, {where}, records no min_sqnr_db)",
        recorded)


# quantize's ``quantization.judged`` (issue 45 item 4, portable/quantization/result.py::judged): per output, its
# kind and each figure it was held to ({"figure": "sqnr_db" | "cosine_mean" | "top1_confident_pct" | ..., "min"}).
# Where the budgets record no limit (the default floor judges by kind), the least limit of a figure is compare's.
def _judged(value: Any) -> dict[str, Mapping[str, Any]]:
    return {str(k): v for k, v in value.items() if isinstance(v, Mapping)} if isinstance(value, Mapping) else {}


def _limits(entry: Mapping[str, Any], figure: str) -> list[float]:
    return [float(f["min"]) for f in entry.get("figures") or () if isinstance(f, Mapping) and f.get("figure") == figure
            and f.get("min") is not None]


def _or_least(limit: Any, judged: Mapping[str, Mapping[str, Any]], figure: str) -> Any:
    found = [m for entry in judged.values() for m in _limits(entry, figure)]
    return limit if limit is not None or not found else min(found)


def _figure_of(entry: Mapping[str, Any]) -> str:
    """``cosine``, ``top1`` (logits by the confident band: compare's seeded inputs cannot measure it) or ``sqnr``."""
    figures = {f.get("figure") for f in entry.get("figures") or () if isinstance(f, Mapping)}
    return "cosine" if "cosine_mean" in figures else "top1" if any(
        str(f).startswith("top1") for f in figures) else "sqnr"


def _default_sqnr() -> float:
    from portable.quantization.settings import DEFAULT_FLOOR

    return float(DEFAULT_FLOOR.min_sqnr_db or 20.0)


def figures_of(model: str | Path, min_cosine: float | None = None, min_sqnr: float | None = None) -> Figures | None:
    """The figures that judge ``model``: the user's ``--min-cosine``/``--min-sqnr`` over what its manifest
    (``MODEL.json``, beside it) says of a quantized file; None when neither says anything."""
    path = Path(f"{model}.json")
    try:
        manifest = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):  # a manifest that cannot be read says nothing: atol/rtol, as for any file
        manifest = {}
    found = read_quantized(manifest, path.name) if isinstance(manifest, Mapping) else None
    if min_cosine is None and min_sqnr is None:
        return found
    base = found or Figures()
    return base._replace(
        min_cosine=min_cosine if min_cosine is not None else base.min_cosine,
        min_sqnr_db=min_sqnr if min_sqnr is not None else base.min_sqnr_db,
        cosine_from="given (--min-cosine)" if min_cosine is not None else base.cosine_from,
        sqnr_from="given (--min-sqnr)" if min_sqnr is not None else base.sqnr_from, given=True)


def with_figures(table: ToleranceTable, model: str | Path, min_cosine: float | None = None,
                 min_sqnr: float | None = None) -> ToleranceTable:
    """``table`` with the figures that judge ``model`` (:func:`figures_of`)."""
    return replace(table, figures=figures_of(model, min_cosine, min_sqnr))
