"""The accuracy cost of quantization, measured on held-out samples: per output SQNR and max abs
against the float model, top-1 agreement for outputs shaped like logits, and the budgets.

SQNR is ``10 log10(sum(f^2) / sum((f - q)^2))`` over all held-out samples of an output (the float
output ``f`` the signal, ``f - q`` the noise): 20 dB is a noise one tenth of the signal's
amplitude, 30 dB about 3 %. An output is treated as logits when it is ``[batch, classes]`` with
2 or more classes; its top-1 agreement is the share of samples whose argmax the int8 model
keeps. Without labels this is agreement, not accuracy: its complement bounds the accuracy lost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from portable.quantization.settings import Budgets

__all__ = ["BudgetCheck", "OutputAccuracy", "check_budgets", "compare_outputs", "cosine_mean", "sqnr_db", "sqnr_of_sums",
           "top1_agreement"]

PERFECT_DB = 200.0  # the SQNR reported for an output the quantized model reproduces exactly


def sqnr_db(expected: np.ndarray, actual: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio in dB (the module docstring); ``PERFECT_DB`` when equal."""
    e, a = np.asarray(expected, dtype=np.float64), np.asarray(actual, dtype=np.float64)
    return sqnr_of_sums(float(np.sum(e**2)), float(np.sum((e - a) ** 2)))


def sqnr_of_sums(signal: float, noise: float) -> float:
    """:func:`sqnr_db` from ``sum(f^2)`` and ``sum((f - q)^2)``, which add up batch by batch."""
    if not math.isfinite(noise):
        return -math.inf
    if noise == 0.0:
        return PERFECT_DB
    return 10.0 * math.log10(signal / noise) if signal > 0 else -math.inf


def top1_agreement(expected: np.ndarray, actual: np.ndarray) -> float:
    """Share (0..1) of rows whose argmax over the last axis agrees."""
    return float(np.mean(np.argmax(expected, axis=-1) == np.argmax(actual, axis=-1)))


def cosine_mean(expected: np.ndarray, actual: np.ndarray) -> float:
    """The mean cosine between the vectors along the last axis (an all-zero pair counts as 1, one zero as 0)."""
    e = np.asarray(expected, dtype=np.float64).reshape(-1, expected.shape[-1])
    a = np.asarray(actual, dtype=np.float64).reshape(-1, expected.shape[-1])
    e_norm, a_norm = np.linalg.norm(e, axis=1), np.linalg.norm(a, axis=1)
    norms = e_norm * a_norm
    cos = (e * a).sum(1) / np.where(norms > 0, norms, 1.0)
    return float(np.mean(np.where((e_norm == 0) & (a_norm == 0), 1.0, np.where(norms > 0, cos, 0.0))))


def _vectors(array: np.ndarray) -> bool:
    return array.ndim >= 2 and array.shape[-1] >= 2 and array.dtype.kind == "f"


def _logits(array: np.ndarray) -> bool:
    return array.ndim == 2 and array.shape[1] >= 2 and array.dtype.kind == "f"


@dataclass(frozen=True)
class OutputAccuracy:
    """One output over the held-out samples: SQNR, largest absolute error, the float output's RMS,
    and (for logits) top-1 agreement."""

    name: str
    samples: int
    sqnr_db: float
    max_abs: float
    rms: float
    top1_agreement: float | None = None
    cosine_mean: float | None = None  # outputs of rank 2 or more: mean cosine of the last-axis vectors

    @property
    def top1_drop_pct(self) -> float | None:
        return None if self.top1_agreement is None else 100.0 * (1.0 - self.top1_agreement)

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.name, "samples": self.samples, "sqnr_db": _finite(self.sqnr_db),
                "max_abs": _finite(self.max_abs), "rms": _finite(self.rms), "top1_agreement": self.top1_agreement,
                "top1_drop_pct": self.top1_drop_pct,
                "cosine_mean": None if self.cosine_mean is None else round(self.cosine_mean, 6)}


def _finite(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None


def compare_outputs(names: Sequence[str], expected: Sequence[np.ndarray],
                    actual: Sequence[np.ndarray]) -> tuple[OutputAccuracy, ...]:
    """One record per output, the held-out samples' outputs concatenated on the batch axis."""
    out = []
    for name, e, a in zip(names, expected, actual):
        e64 = np.asarray(e, dtype=np.float64)
        diff = np.abs(e64 - np.asarray(a, dtype=np.float64))
        out.append(OutputAccuracy(name, int(e.shape[0]) if e.ndim else 1, sqnr_db(e, a),
                                  float(diff.max()) if diff.size else 0.0, float(np.sqrt(np.mean(e64**2))),
                                  top1_agreement(e, a) if _logits(e) else None,
                                  cosine_mean(e, a) if _vectors(e) else None))
    return tuple(out)


@dataclass(frozen=True)
class BudgetCheck:
    """One budget against one output: what was allowed, what was measured, whether it holds."""

    budget: str  # "min-sqnr" | "max-top1-drop" | "min-cosine"
    output: str
    limit: float
    measured: float
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget, "output": self.output, "limit": self.limit,
                "measured": _finite(self.measured), "passed": self.passed}


def check_budgets(budgets: Budgets, outputs: Sequence[OutputAccuracy]) -> tuple[BudgetCheck, ...]:
    """``--min-sqnr`` on every output; ``--max-top1-drop`` on every logits output; ``--min-cosine`` on every
    output of vectors (a budget that applies to no output is a check that fails: it cannot be met)."""
    checks = []
    if budgets.min_sqnr_db is not None:
        checks += [BudgetCheck("min-sqnr", o.name, budgets.min_sqnr_db, o.sqnr_db, o.sqnr_db >= budgets.min_sqnr_db)
                   for o in outputs]
    if budgets.max_top1_drop_pct is not None:
        limit = budgets.max_top1_drop_pct
        logits = [o for o in outputs if o.top1_drop_pct is not None]
        checks += [BudgetCheck("max-top1-drop", o.name, limit, o.top1_drop_pct or 0.0,
                               (o.top1_drop_pct or 0.0) <= limit) for o in logits]
        if not logits:
            checks.append(BudgetCheck("max-top1-drop", "(no output shaped [batch, classes])", limit, math.nan, False))
    return tuple(checks) + _cosine_checks(budgets.min_cosine, outputs)


def _cosine_checks(limit: float | None, outputs: Sequence[OutputAccuracy]) -> tuple[BudgetCheck, ...]:
    if limit is None:
        return ()
    vectors = [o for o in outputs if o.cosine_mean is not None]
    if not vectors:
        return (BudgetCheck("min-cosine", "(no output of rank 2 or more)", limit, math.nan, False),)
    return tuple(BudgetCheck("min-cosine", o.name, limit, o.cosine_mean or 0.0, (o.cosine_mean or 0.0) >= limit)
                 for o in vectors)
