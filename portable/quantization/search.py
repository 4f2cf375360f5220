"""Precision search under a budget: the fewest nodes kept in float that make the user's budgets hold.

Given ``--min-sqnr`` or ``--max-top1-drop``, a first all-int8 trial is quantized and measured on
the held-out samples. If it misses a budget, the nodes are ranked once by the per-node loss the
report computes (:func:`portable.quantization.nodes.worst_nodes`: the SQNR of each tensor's own
Q/DQ pair, weights included), and kept in float one more at a time, in that order, each trial
quantized and measured again, until the budgets hold or ``limit`` nodes are float. The run then
quantizes with those exclusions as if the user had given them (``--exclude node:NAME``), so the
written file is the trial's. When ``limit`` nodes in float still miss the budgets, none is kept:
keeping nodes in float need not help (on EfficientNet-Lite0 the error is spread over every ReLU6
output, and 16 float nodes gave 7.3 dB against the all-int8 15.1 dB), so the all-int8 result is
the one judged, and the report names the nodes tried. Trials are quantized in a temporary folder; nothing is staged.

One ranking, not a ranking per trial: the per-node analysis holds every activation of both models
and costs more than a trial; the order it gives is the report's own, so what the search keeps in
float is what the report's table names first.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import onnx

from portable.quantization.accuracy import OutputAccuracy, check_budgets
from portable.quantization.data import Samples
from portable.quantization.settings import Budgets, Settings

__all__ = ["SearchResult", "search"]

Measure = Callable[[Path, Path, Samples], tuple[OutputAccuracy, ...]]


@dataclass(frozen=True)
class SearchResult:
    """The settings to quantize with, the nodes kept in float (in rank order) and the trials run."""

    settings: Settings
    kept_float: tuple[str, ...]
    trials: int
    met: bool
    tried: tuple[str, ...] = ()  # not met: the nodes tried in float, none kept (the all-int8 file is judged)


def _holds(budgets: Budgets, accuracy: tuple[OutputAccuracy, ...]) -> bool:
    return all(c.passed for c in check_budgets(budgets, accuracy))


def _trial(source: Path, settings: Settings, calibration: Samples, folder: Path) -> Path:
    from portable.quantization.quantizer import quantize_file

    path = folder / "trial.onnx"
    onnx.save(quantize_file(source, settings, calibration).proto, str(path))
    return path


def _ranked(source: Path, trial: Path, samples: Samples, limit: int) -> list[str]:
    """Float-model node names, worst own-pair loss first (graph inputs have no node to keep)."""
    from portable.quantization.nodes import worst_nodes

    rows = worst_nodes(source, trial, samples, count=4 * limit)
    return list(dict.fromkeys(r.node for r in rows if r.node and r.qdq_sqnr_db is not None))[:limit]


def search(source: Path, settings: Settings, budgets: Budgets, calibration: Samples, held_out: Samples,
           per_node_samples: Samples, measure: Measure, limit: int) -> SearchResult:
    """See the module docstring; ``measure(float_model, int8_model, held_out)`` gives the accuracy."""
    with tempfile.TemporaryDirectory(prefix="portable-search-") as tmp:
        folder = Path(tmp)
        trial = _trial(source, settings, calibration, folder)
        if _holds(budgets, measure(source, trial, held_out)) or limit < 1:
            return SearchResult(settings, (), 1, True)
        kept: list[str] = []
        current = settings
        for name in _ranked(source, trial, per_node_samples, limit):
            kept.append(name)
            current = replace(settings, exclude=(*settings.exclude, *(f"node:{k}" for k in kept)))
            trial = _trial(source, current, calibration, folder)
            if _holds(budgets, measure(source, trial, held_out)):
                return SearchResult(current, tuple(kept), len(kept) + 1, True)
        return SearchResult(settings, (), len(kept) + 1, False, tuple(kept))
