"""The accuracy cost of quantization, measured on held-out samples: per output SQNR and max abs against the float
model, the figure its kind is judged by (:mod:`portable.quantization.judging`), and the budgets.

SQNR is ``10 log10(sum(f^2) / sum((f - q)^2))`` over all held-out samples of an output (the float output ``f``
the signal, ``f - q`` the noise): 20 dB is a noise one tenth of the signal's amplitude, 30 dB about 3 %.
Logits: top-1 agreement, the share of rows whose argmax the int8 model keeps (without labels this is agreement,
not accuracy: its complement bounds the accuracy lost), split by the float model's confidence (its top-1
softmax probability at least ``CONFIDENT``: the confident band; the rest: the unsure band), with the mean KL
divergence ``KL(softmax(f) || softmax(q))`` (nats) and the SQNR of each band. Embeddings: the mean cosine of
the last-axis vectors (over the positions a mask input marks real, when the output has one).

The functions take arrays, not sessions: another runtime's outputs (a second "arithmetic", such as QNN's HTP
simulator) are judged by the same ones (:func:`compare_outputs`, :func:`check_budgets`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from portable.quantization.judging import OutputKind
from portable.quantization.settings import CONFIDENT, MIN_CONFIDENT, Budgets, Floor

__all__ = ["FIGURES", "Band", "BudgetCheck", "OutputAccuracy", "bands", "check_budgets", "compare_outputs",
           "cosine_mean", "judged_figures", "sqnr_db", "sqnr_of_sums", "top1_agreement"]

PERFECT_DB = 200.0  # the SQNR reported for an output the quantized model reproduces exactly
# Each figure a budget can judge, by the name the manifest's ``judged`` records use (docs/quantize.md)
FIGURES = {"sqnr_db": "SQNR (dB) of the whole output over every held-out sample",
           "cosine_mean": "mean cosine of the last-axis vectors (over the real positions of ``positions``)",
           "top1_agreement_pct": "share (%) of rows whose argmax the int8 model keeps",
           "top1_confident_pct": "top-1 agreement (%) on the rows where the float model's top-1 softmax "
                                 "probability is at least 0.5"}


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


def _rows(array: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """The last-axis vectors of ``array`` as rows, float64; only those whose position ``mask`` marks non-zero."""
    rows = np.asarray(array, dtype=np.float64).reshape(-1, array.shape[-1])
    return rows if mask is None else rows[np.asarray(mask).reshape(-1) != 0]


def top1_agreement(expected: np.ndarray, actual: np.ndarray) -> float:
    """Share (0..1) of rows whose argmax over the last axis agrees."""
    return float(np.mean(np.argmax(expected, axis=-1) == np.argmax(actual, axis=-1)))


def cosine_mean(expected: np.ndarray, actual: np.ndarray, mask: np.ndarray | None = None) -> float:
    """The mean cosine between the vectors along the last axis (an all-zero pair counts as 1, one zero as 0), over
    the positions ``mask`` (the output's leading dims) marks non-zero."""
    e, a = _rows(expected, mask), _rows(actual, mask)
    e_norm, a_norm = np.linalg.norm(e, axis=1), np.linalg.norm(a, axis=1)
    norms = e_norm * a_norm
    cos = (e * a).sum(1) / np.where(norms > 0, norms, 1.0)
    return float(np.mean(np.where((e_norm == 0) & (a_norm == 0), 1.0, np.where(norms > 0, cos, 0.0))))


def _log_softmax(rows: np.ndarray) -> np.ndarray:
    shifted = rows - rows.max(axis=1, keepdims=True)
    return np.asarray(shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)))


@dataclass(frozen=True)
class Band:
    """One confidence band of a logits output: its rows, their top-1 agreement, mean KL divergence and SQNR."""

    name: str  # "confident" (the float model's top-1 probability >= CONFIDENT) or "unsure"
    samples: int
    top1_agreement: float | None  # None: no row in the band
    kl_divergence: float | None
    sqnr_db: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"band": self.name, "samples": self.samples,
                "top1_agreement": _maybe(self.top1_agreement), "kl_divergence": _maybe(self.kl_divergence),
                "sqnr_db": _maybe(self.sqnr_db)}


def bands(expected: np.ndarray, actual: np.ndarray, mask: np.ndarray | None = None) -> tuple[Band, Band]:
    """The confident and the unsure band of a logits output (rows: its last-axis vectors)."""
    e, a = _rows(expected, mask), _rows(actual, mask)
    log_e, log_a = _log_softmax(e), _log_softmax(a)
    kl = (np.exp(log_e) * (log_e - log_a)).sum(axis=1)
    agree = np.argmax(e, axis=1) == np.argmax(a, axis=1)
    sure = np.exp(log_e.max(axis=1)) >= CONFIDENT
    return tuple(Band(name, int(rows.sum()), float(agree[rows].mean()) if rows.any() else None,
                      float(kl[rows].mean()) if rows.any() else None,
                      sqnr_db(e[rows], a[rows]) if rows.any() else None)
                 for name, rows in (("confident", sure), ("unsure", ~sure)))  # type: ignore[return-value]


def _maybe(value: float | None) -> float | None:
    return None if value is None else _finite(value)


@dataclass(frozen=True)
class OutputAccuracy:
    """One output over the held-out samples: SQNR, largest absolute error, the float output's RMS, what judges it
    (``kind``, ``why``) and, by kind, top-1 agreement and its confidence bands (logits) or the mean cosine
    (any output of vectors)."""

    name: str
    samples: int
    sqnr_db: float
    max_abs: float
    rms: float
    top1_agreement: float | None = None
    cosine_mean: float | None = None  # outputs of rank 2 or more: mean cosine of the last-axis vectors
    kind: str = "tensor"  # judging.KINDS
    why: str = ""
    positions: str | None = None  # the mask input whose real positions the row figures are taken over
    bands: tuple[Band, ...] = ()  # logits: the confident band, then the unsure one

    @property
    def top1_drop_pct(self) -> float | None:
        return None if self.top1_agreement is None else 100.0 * (1.0 - self.top1_agreement)

    def band(self, name: str) -> Band | None:
        return next((b for b in self.bands if b.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.name, "samples": self.samples, "sqnr_db": _finite(self.sqnr_db),
                "max_abs": _finite(self.max_abs), "rms": _finite(self.rms), "top1_agreement": self.top1_agreement,
                "top1_drop_pct": self.top1_drop_pct,
                "cosine_mean": None if self.cosine_mean is None else round(self.cosine_mean, 6),
                "kind": self.kind, "why": self.why, "positions": self.positions,
                "bands": [b.to_dict() for b in self.bands]}


def _finite(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None


def _vectors(array: np.ndarray) -> bool:
    return array.ndim >= 2 and array.shape[-1] >= 2 and array.dtype.kind == "f"


def _kind_of(array: np.ndarray) -> OutputKind:
    """Without the graph (arrays alone): ``[batch, classes]`` is logits, another output of vectors an embedding."""
    if array.ndim == 2 and array.shape[1] >= 2 and array.dtype.kind == "f":
        return OutputKind("logits", "[batch, classes]")
    return OutputKind("embedding" if _vectors(array) else "tensor", "")


def _one(name: str, e: np.ndarray, a: np.ndarray, kind: OutputKind, mask: np.ndarray | None) -> OutputAccuracy:
    e64 = np.asarray(e, dtype=np.float64)
    diff = np.abs(e64 - np.asarray(a, dtype=np.float64))
    logits = kind.kind == "logits" and _vectors(e)
    return OutputAccuracy(name, int(e.shape[0]) if e.ndim else 1, sqnr_db(e, a),
                          float(diff.max()) if diff.size else 0.0, float(np.sqrt(np.mean(e64**2))),
                          top1_agreement(_rows(e, mask), _rows(a, mask)) if logits else None,
                          cosine_mean(e, a, mask) if _vectors(e) else None, kind.kind, kind.why,
                          kind.positions if mask is not None else None, bands(e, a, mask) if logits else ())


def compare_outputs(names: Sequence[str], expected: Sequence[np.ndarray], actual: Sequence[np.ndarray],
                    kinds: Mapping[str, OutputKind] | None = None,
                    inputs: Mapping[str, np.ndarray] | None = None) -> tuple[OutputAccuracy, ...]:
    """One record per output, the held-out samples' outputs concatenated on the batch axis. ``kinds``: what judges
    each (:func:`portable.quantization.judging.output_kinds`; without it, from the arrays' shapes alone);
    ``inputs``: the held-out inputs, for the mask an output's ``positions`` names."""
    out = []
    for name, e, a in zip(names, expected, actual):
        kind = (kinds or {}).get(name) or _kind_of(np.asarray(e))
        mask = (inputs or {}).get(kind.positions) if kind.positions else None
        out.append(_one(name, e, a, kind, mask))
    return tuple(out)


@dataclass(frozen=True)
class BudgetCheck:
    """One budget against one output: what was allowed, what was measured, whether it holds, and (the floor's
    checks) why that figure judges the output."""

    budget: str  # "min-sqnr" | "max-top1-drop" | "min-cosine" | "min-top1-confident"
    output: str
    limit: float
    measured: float
    passed: bool
    why: str = ""

    @property
    def figure(self) -> str:
        """The figure checked, as :data:`FIGURES` names it."""
        return {"min-sqnr": "sqnr_db", "min-cosine": "cosine_mean", "max-top1-drop": "top1_agreement_pct",
                "min-top1-confident": "top1_confident_pct"}[self.budget]

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget, "output": self.output, "limit": self.limit,
                "measured": _finite(self.measured), "passed": self.passed, "figure": self.figure, "why": self.why}


def check_budgets(budgets: Budgets, outputs: Sequence[OutputAccuracy]) -> tuple[BudgetCheck, ...]:
    """The user's budgets (``--min-sqnr`` on every output, ``--max-top1-drop`` on every logits output,
    ``--min-cosine`` on every output of vectors: a budget that applies to no output is a check that fails, it
    cannot be met), or, with none given, each output by its kind's figure (:func:`judged_figures`)."""
    if budgets.floor is not None:
        return tuple(c for o in outputs for c in judged_figures(budgets.floor, o))
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
            checks.append(BudgetCheck("max-top1-drop", "(no output judged as logits)", limit, math.nan, False))
    return tuple(checks) + _cosine_checks(budgets.min_cosine, outputs)


def _at_least(budget: str, output: OutputAccuracy, limit: float, measured: float, why: str) -> BudgetCheck:
    return BudgetCheck(budget, output.name, limit, measured, measured >= limit, why)


def judged_figures(floor: Floor, output: OutputAccuracy) -> tuple[BudgetCheck, ...]:
    """The default floor's (or goal's) checks of one output, by its kind, each with the reason it is the one."""
    if output.kind == "embedding" and output.cosine_mean is not None:
        where = f" over the real positions of {output.positions}" if output.positions else ""
        return (_at_least("min-cosine", output, floor.cosine, output.cosine_mean,
                          f"an embedding ({output.why}): judged by its direction, the mean cosine{where}"),)
    sure = output.band("confident")
    if output.kind == "logits" and sure is not None and sure.samples >= MIN_CONFIDENT:
        return (_at_least("min-top1-confident", output, floor.top1_confident_pct, 100.0 * (sure.top1_agreement or 0.0),
                          f"logits ({output.why}): top-1 agreement where the float model is sure (top-1 probability "
                          f">= {CONFIDENT:g}, {sure.samples} of {output.samples} samples); noise on inputs it cannot "
                          "classify does not refuse it"),
                _at_least("min-sqnr", output, floor.logits_sqnr_db, output.sqnr_db,
                          f"logits: over every sample the output must still follow the float one (a broken model "
                          f"reads under {floor.logits_sqnr_db:g} dB)"))
    why = (f"logits ({output.why}), but only {sure.samples} held-out sample(s) where the float model is sure (top-1 "
           f"probability >= {CONFIDENT:g}; {MIN_CONFIDENT} needed): judged as a tensor, by SQNR"
           if output.kind == "logits" and sure is not None else f"a tensor ({output.why}): judged by SQNR")
    return (_at_least("min-sqnr", output, floor.sqnr_db, output.sqnr_db, why),)


def _cosine_checks(limit: float | None, outputs: Sequence[OutputAccuracy]) -> tuple[BudgetCheck, ...]:
    if limit is None:
        return ()
    vectors = [o for o in outputs if o.cosine_mean is not None]
    if not vectors:
        return (BudgetCheck("min-cosine", "(no output of rank 2 or more)", limit, math.nan, False),)
    return tuple(BudgetCheck("min-cosine", o.name, limit, o.cosine_mean or 0.0, (o.cosine_mean or 0.0) >= limit)
                 for o in vectors)
