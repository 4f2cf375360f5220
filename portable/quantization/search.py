"""Precision search under a budget: the fewest nodes kept in float that make the user's budgets hold.

Given a budget, a first all-int8 trial is quantized and measured on the held-out samples. If it misses
a budget, the nodes are ranked once: first the weight layers by what their int8 weights alone cost the
outputs, end to end (:mod:`portable.quantization.sensitivity`; EfficientNet-Lite0's stem and first block
lead), then the rest by the per-node loss the report computes
(:func:`portable.quantization.nodes.worst_nodes`: the SQNR of each tensor's own Q/DQ pair), and tried in
float one more at a time, in that order (a node that makes the trial worse is put back), each trial
quantized and measured again, until the budgets hold or ``limit`` nodes are float. The run then
takes the trial's quantized model as it is, with those exclusions in its settings as if the user had
given them (``--exclude node:NAME``), so the written file is the trial's. When ``limit`` nodes in float
still miss the budgets, the best trial is kept: only nodes that moved the worst budget closer are in it
(keeping nodes in float need not help: ranked by their own pair's loss alone, 16 float nodes of
EfficientNet-Lite0 gave 7.3 dB against the all-int8 15.1 dB, a float node between int8 ones adds a
requantization each side), so it is never worse than all-int8; the run judges it (the user's budgets
refuse it; with none given, the default floor may still take it) and the report names the nodes tried.
Trials are quantized in a temporary folder; nothing is staged.

One ranking, not a ranking per trial: the per-node analysis runs both models on every tensor
and costs more than a trial; the order it gives is the report's own, so what the search keeps in
float is what the report's table names first. The ranking runs on a few samples (the first
``PER_NODE_SAMPLES`` calibration ones for the sensitivity, held-out ones for the per-node loss).

Minutes, not hours: the trials share what the nodes kept float do not change
(:class:`~portable.quantization.steps.Reuse`: the passes' float model, quant_pre_process's output and
ONNX Runtime's calibration ranges, computed by the first trial), and the float model's outputs on the
held-out samples are computed once by the run (``measure`` runs the int8 model alone). A trial is then
ONNX Runtime's quantizer on cached ranges and one int8 run of the held-out samples. Each trial is
reported as it ends (``progress``: trial k of n, the figure furthest from its goal, the best so far).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import onnx

from portable.quantization.accuracy import OutputAccuracy, check_budgets
from portable.quantization.data import Samples
from portable.quantization.pipeline import Quantized
from portable.quantization.settings import Budgets, Settings
from portable.quantization.steps import Reuse

__all__ = ["SearchResult", "search"]

Measure = Callable[[Path], tuple[OutputAccuracy, ...]]  # the int8 model's accuracy on the held-out samples
Progress = Callable[[str], None]  # a line about the search's progress (Phases.note)


@dataclass(frozen=True)
class SearchResult:
    """The settings to quantize with, the nodes kept in float (in rank order), the trials run, and the
    quantized model of those settings (the run writes it rather than quantizing again)."""

    settings: Settings
    kept_float: tuple[str, ...]
    trials: int
    met: bool
    tried: tuple[str, ...] = ()  # not met: the nodes tried in float (the best trial, ``kept_float``, is judged)
    quantized: Quantized | None = field(default=None, compare=False, repr=False)


def _holds(budgets: Budgets, accuracy: tuple[OutputAccuracy, ...]) -> bool:
    return all(c.passed for c in check_budgets(budgets, accuracy))


def _trial(source: Path, settings: Settings, calibration: Samples, reuse: Reuse) -> tuple[Quantized, Path]:
    from portable.quantization.pipeline import quantize_file

    path = reuse.folder / "trial.onnx"
    quantized = quantize_file(source, settings, calibration, reuse)
    onnx.save(quantized.proto, str(path))
    return quantized, path


def _reference(source: Path, quantized: Quantized, folder: Path) -> Path:
    """The float model the quantizer read, as the worst nodes compare with it (the source when unchanged)."""
    if quantized.reference is None:
        return source
    onnx.save(quantized.reference, str(folder / "reference.onnx"))
    return folder / "reference.onnx"


def _ranked(source: tuple[Path, Path], settings: Settings, trial: Path, few: tuple[Samples, Samples],
            limit: int) -> list[str]:
    """Float-model node names to keep float, in order: the weight layers whose int8 weights alone cost the
    outputs most (:mod:`portable.quantization.sensitivity`, on a few calibration samples), then the rest by their
    own pair's loss on a few held-out ones (graph inputs have no node to keep). Only nodes of the user's file
    (``source[0]``): a node a pass added to the reference (CLE's ``<clip>_relu``) is no ``--exclude`` of the file's."""
    from portable.quantization.nodes import worst_nodes
    from portable.quantization.sensitivity import weight_sensitivity

    layers = [layer.node for layer in weight_sensitivity(source[0], settings, few[0])]
    rows = worst_nodes(source[1], trial, few[1], count=4 * limit)
    own = [r.node for r in rows if r.node and r.qdq_sqnr_db is not None]
    names = {n.name for n in onnx.load(str(source[0]), load_external_data=False).graph.node}
    return [name for name in dict.fromkeys(layers + own) if name in names][:limit]


def _margin(budgets: Budgets, accuracy: tuple[OutputAccuracy, ...]) -> float:
    """The worst check's distance from its limit (dB, percentage points, cosine x 100; negative: missed)."""
    scale = {"min-sqnr": 1.0, "max-top1-drop": -1.0, "min-cosine": 100.0, "min-top1-confident": 1.0}
    checks = check_budgets(budgets, accuracy)
    return min((scale[c.budget] * (c.measured - c.limit) for c in checks), default=0.0)


def _excluding(settings: Settings, nodes: list[str]) -> Settings:
    return replace(settings, exclude=(*settings.exclude, *(f"node:{k}" for k in nodes)))


def _worst(budgets: Budgets, accuracy: tuple[OutputAccuracy, ...]) -> str:
    """The check furthest from its limit, as the progress line shows it."""
    checks = check_budgets(budgets, accuracy)
    scale = {"min-sqnr": 1.0, "max-top1-drop": -1.0, "min-cosine": 100.0, "min-top1-confident": 1.0}
    worst = min(checks, key=lambda c: scale[c.budget] * (c.measured - c.limit), default=None)
    return "no check" if worst is None else f"{worst.budget} {worst.measured:.4g} on {worst.output} (goal {worst.limit:g})"


def search(source: Path, settings: Settings, budgets: Budgets, calibration: Samples, held_out: Samples,
           few: tuple[Samples, Samples], measure: Measure, limit: int,
           progress: Progress = lambda _: None) -> SearchResult:
    """See the module docstring; ``measure(int8_model)`` gives the accuracy on ``held_out``; ``few``: the first
    calibration and held-out samples the ranking runs on; ``progress`` hears of each trial (trial k of n, the
    figure furthest from its goal, the best so far). A node stays float only when its trial moves the worst budget
    closer: one in float between int8 neighbours can lose (EfficientNet-Lite0's first depthwise alone: 15.2 ->
    14.1 dB; with the stem: 19.3 dB). The trials share what does not depend on the nodes kept float
    (:class:`~portable.quantization.steps.Reuse`)."""
    with tempfile.TemporaryDirectory(prefix="portable-search-") as tmp:
        reuse = Reuse(Path(tmp))
        best_model, trial = _trial(source, settings, calibration, reuse)
        accuracy = measure(trial)
        progress(f"trial 1: every node int8: {_worst(budgets, accuracy)}")
        if _holds(budgets, accuracy) or limit < 1:
            return SearchResult(settings, (), 1, _holds(budgets, accuracy), quantized=best_model)
        kept: list[str] = []
        tried: list[str] = []
        best, best_text = _margin(budgets, accuracy), _worst(budgets, accuracy)
        progress(f"ranking the nodes to keep float (up to {limit})")
        ranked = _ranked((source, _reference(source, best_model, reuse.folder)), settings, trial, few, limit)
        for name in ranked:
            tried.append(name)
            current = _excluding(settings, [*kept, name])
            model, path = _trial(source, current, calibration, reuse)
            accuracy = measure(path)
            if _holds(budgets, accuracy):
                progress(f"trial {len(tried) + 1} of {len(ranked) + 1}: {name} float: {_worst(budgets, accuracy)}: met")
                return SearchResult(current, (*kept, name), len(tried) + 1, True, quantized=model)
            margin, text = _margin(budgets, accuracy), _worst(budgets, accuracy)
            if margin > best:
                kept, best, best_text, best_model = [*kept, name], margin, text, model
            progress(f"trial {len(tried) + 1} of {len(ranked) + 1}: {name} float: {text}, "
                     f"{'kept' if kept and kept[-1] == name else 'put back'}; best so far {best_text.split(' on ')[0]}")
        return SearchResult(_excluding(settings, kept), tuple(kept), len(tried) + 1, False, tuple(tried), best_model)
