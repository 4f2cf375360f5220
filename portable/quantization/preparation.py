"""The float model ONNX Runtime's quantizer reads: the passes before it, in order, and what each decided.

1. SmoothQuant on LayerNorm -> MatMul (:mod:`portable.quantization.smoothing`), float islands
   (:mod:`portable.quantization.islands`): transformers.
2. Cross-layer equalization (:mod:`portable.quantization.equalize`) and the activation ranges' method
   (:mod:`portable.quantization.ranges`), **measured**: each candidate (without and with CLE where the model has
   Conv pairs; min-max and MSE ranges under ``--method auto``) is bias-corrected, quantized by ONNX Runtime and
   run on the first ``DECISION_SAMPLES`` calibration samples, and the one whose worst output SQNR against the
   float model is highest is kept. The report's ``passes`` give every candidate's figure.
3. Learned rounding (:mod:`portable.quantization.adaround`) on the kept candidate.
4. Bias correction (:mod:`portable.quantization.correction`), against the float weights AdaRound started from.
5. The kept method's activation ranges on the final model, handed to ``quantize_static`` as its calibration
   cache (ONNX Runtime's ``calibration_cache_path``), so the precision search's trials do not calibrate again.

The result is kept for the run's next call with the same settings (the nodes kept float apart; ``steps.Reuse``):
the precision search quantizes one model many times with other nodes kept float. A trial's excluded
layers get back the weights and biases they had before AdaRound and bias correction (a layer kept float must
not carry rounding made for int8); CLE is exact in float, so an equalized layer kept float computes what the
original did.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from portable.errors import one_line
from portable.quantization.data import Samples
from portable.quantization.settings import Settings

__all__ = ["DECISION_SAMPLES", "SEEDED_REASON", "Prepared", "prepared"]

SEEDED_REASON = "seeded calibration data (random inputs)"  # why a data-driven pass did not run on them
DECISION_SAMPLES = 32  # calibration samples each candidate is measured on
EXACT_DB = 60.0  # a rewrite meant to be exact in float must keep the outputs at least this close (float32: ~120 dB)


@dataclass(frozen=True)
class Prepared:
    """The shape-inferred float model the quantizer reads (``path``; ``model`` in memory), what the passes did,
    what stays float, the activation ranges as ONNX Runtime's calibration cache (None: its own calibrator runs),
    the values AdaRound and bias correction replaced, and op types a pass added for the quantizer."""

    path: Path
    model: onnx.ModelProto
    passes: dict[str, Any]
    float_nodes: tuple[str, ...] = ()
    float_output_ops: tuple[str, ...] = ()
    ranges: Path | None = None
    originals: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    extra_ops: tuple[str, ...] = ()
    # the float model after the passes that keep its function exact (SmoothQuant, CLE), before those that change
    # it (AdaRound, bias correction): each int8 tensor is compared with this one's (nodes.py); None: the source
    reference: onnx.ModelProto | None = field(default=None, compare=False, repr=False)

    def for_trial(self, kept_float: set[str], folder: Path) -> Path:
        """``path``, or a copy whose layers named in ``kept_float`` have their original weights and biases."""
        names = {i for n in self.model.graph.node if n.name in kept_float for i in n.input[1:] if i in self.originals}
        if not names:
            return self.path
        model = onnx.load(str(self.path))
        for table in model.graph.initializer:
            if table.name in names:
                table.CopyFrom(numpy_helper.from_array(self.originals[table.name], table.name))
        path = folder / "trial-float.onnx"
        onnx.save(model, str(path))
        return path


def prepared(source: Path, proto: onnx.ModelProto, settings: Settings, calibration: Samples, folder: Path) -> Prepared:
    """The passes on ``source`` (``proto`` as loaded, weights inline), their files in ``folder`` (kept by the caller
    for the run: the precision search's trials share them through ``steps.Reuse``)."""
    folder.mkdir(parents=True, exist_ok=True)
    return _build(source, proto, settings, calibration, folder)


# --- the passes ---------------------------------------------------------------------------------------------------

def _smoothed(proto: onnx.ModelProto, settings: Settings, calibration: Samples,
              passes: dict[str, Any]) -> tuple[onnx.ModelProto, tuple[str, ...]]:
    if not settings.smoothing:
        return proto, ()
    from portable.quantization.smoothing import smooth

    smoothed, record = smooth(proto, calibration)
    passes["smoothing"] = record.to_dict()
    return smoothed, record.float_nodes


def _islands(proto: onnx.ModelProto, settings: Settings, calibration: Samples,
             passes: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not settings.float_islands:
        return (), ()
    from portable.quantization.islands import float_islands

    found = float_islands(proto, calibration)
    passes["float_islands"] = found.to_dict()
    return found.nodes, found.float_output_ops


def _corrected(proto: onnx.ModelProto, settings: Settings, calibration: Samples,
               learned: Collection[str] = ()) -> tuple[onnx.ModelProto, dict[str, Any] | None]:
    if not settings.bias_correction:
        return proto, None
    from portable.quantization.correction import correct_biases

    corrected, record = correct_biases(proto, settings, calibration, learned)
    return corrected, record.to_dict()


def _first(calibration: Samples, count: int) -> Samples:
    """The first ``count`` calibration samples (whole batches of a static-batch model)."""
    count = min(calibration.count, count)
    if calibration.static:
        count = max(calibration.batch, count - count % calibration.batch)
    return calibration.take(0, count)


def _inferred(model: onnx.ModelProto, folder: Path, name: str, settings: Settings, source: Path) -> Path:
    """``model`` through ``quant_pre_process``'s shape inference (its optimizer off; symbolic unless the run found
    it fails on the source, ``steps.shape_inference``), as the quantizer reads it."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from portable.quantization.steps import shape_step, step

    raw, inferred = folder / f"{name}-float.onnx", folder / f"{name}.onnx"
    onnx.save(model, str(raw))
    with step(source, shape_step(settings.symbolic_shape)), contextlib.chdir(folder):  # a failure writes to the cwd
        quant_pre_process(str(raw), str(inferred), skip_optimization=True,
                          skip_symbolic_shape=not settings.symbolic_shape)
    raw.unlink()
    return inferred


def _ranges(path: Path, settings: Settings, op_types: list[str], calibration: Samples, method: str,
            folder: Path) -> tuple[Path | None, dict[str, Any]]:
    """The activation ranges of ``method`` from ONNX Runtime's histograms, as its calibration cache; None (its
    own calibrator) for a method of ONNX Runtime's the user chose."""
    if settings.method not in ("mse", "auto"):
        return None, {"method": method, "by": "onnxruntime's calibrator"}
    from portable.quantization.ranges import activation_grid, histograms, method_ranges, save_ranges

    try:
        found = histograms(path, op_types, calibration)
    except ValueError as exc:  # numpy's histogram of a tensor spanning float32's range (an additive mask's -3.4e38)
        return None, {"method": "minmax", "asked": method, "by": f"onnxruntime's calibrator ({one_line(exc)})"}
    choice = method_ranges(method, found, *activation_grid(settings),
                           logits=settings.logits if settings.logits_headroom else ())
    return save_ranges(choice, folder / f"{path.stem}-{method}-ranges.json"), choice.to_dict()


# --- the measured decisions ---------------------------------------------------------------------------------------

def _figure(source: Path, int8: Path, samples: Samples) -> float:
    """The worst output SQNR (dB) of ``int8`` (its own QDQ arithmetic) against ``source`` on ``samples``."""
    from portable.quantization.accuracy import sqnr_db
    from portable.quantization.speed import cpu_session

    sessions = [cpu_session(source, "the float model"), cpu_session(int8, "a candidate int8 model", as_written=True)]
    runs = [[s.run(None, feeds) for feeds in samples.batches()] for s in sessions]
    outputs = len(runs[0][0])
    return min(sqnr_db(np.concatenate([r[i] for r in runs[0]]), np.concatenate([r[i] for r in runs[1]]))
               for i in range(outputs))


@dataclass(frozen=True)
class _Candidate:
    name: str
    model: onnx.ModelProto
    extra_ops: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Context:
    """What every candidate is quantized and measured with."""

    source: Path
    proto: onnx.ModelProto
    settings: Settings
    calibration: Samples
    folder: Path
    float_nodes: tuple[str, ...]
    float_output_ops: tuple[str, ...]


def _measure(ctx: _Context, candidate: _Candidate, methods: list[str]) -> dict[str, float]:
    """Each method's figure for one candidate model (bias-corrected first, as the final model will be)."""
    from portable.quantization.quantizer import quantize_prepared
    from portable.quantization.steps import step

    model, _ = _corrected(candidate.model, ctx.settings, ctx.calibration)
    path = _inferred(model, ctx.folder, f"candidate-{candidate.name}", ctx.settings, ctx.source)
    op_types = op_types_to_quantize_of(ctx.settings, ctx.proto, candidate.extra_ops)
    found: dict[str, float] = {}
    for method in methods:
        ranges, _ = _ranges(path, ctx.settings, op_types, ctx.calibration, method, ctx.folder)
        ready = Prepared(path, model, {}, ctx.float_nodes, ctx.float_output_ops, ranges, {}, candidate.extra_ops)
        int8 = ctx.folder / f"candidate-{candidate.name}-{method}.int8.onnx"
        with step(ctx.source, "ONNX Runtime's quantize_static"):
            onnx.save(quantize_prepared(ready, path, ctx.settings, ctx.proto, ctx.calibration), str(int8))
        found[method] = _figure(ctx.source, int8, _first(ctx.calibration, DECISION_SAMPLES))
        int8.unlink()
    return found


def _candidates(proto: onnx.ModelProto, model: onnx.ModelProto, settings: Settings, calibration: Samples,
                passes: dict[str, Any]) -> list[_Candidate]:
    """The model as it is and, unless ``--no-equalization`` (or seeded data, unless ``--equalization``), equalized
    (when exact in float) but for the Conv pairs of the nodes the user keeps float."""
    plain = _Candidate("plain", model)
    if not settings.equalization and (settings.equalization is False or _seeded(calibration)):
        passes["equalization"] = {"applied": False, "by": "--no-equalization" if settings.equalization is False
                                  else SEEDED_REASON}
        return [plain]
    from portable.quantization.equalize import equalize

    equalized, record = equalize(model, _excluded(proto, model, settings))
    passes["equalization"] = {"applied": False, **record.to_dict()}
    if record.pairs == 0:
        return [plain]
    exact = _float_match(model, equalized, _first(calibration, DECISION_SAMPLES))
    passes["equalization"]["float_sqnr_db"] = round(exact, 1)
    if exact < EXACT_DB:
        return [plain]
    cle = _Candidate("equalized", equalized, ("Min",) if record.capped else ())
    return [cle] if settings.equalization else [plain, cle]


def _float_match(before: onnx.ModelProto, after: onnx.ModelProto, samples: Samples) -> float:
    """The worst output SQNR of ``after`` against ``before`` in float (a rewrite meant to be exact)."""
    from portable.quantization.accuracy import sqnr_db
    from portable.quantization.activations import calibration_outputs

    names = [o.name for o in before.graph.output]
    runs = [[[b[n] for n in names] for b in calibration_outputs(m, samples, names)] for m in (before, after)]
    return min((sqnr_db(np.concatenate([r[i] for r in runs[0]]), np.concatenate([r[i] for r in runs[1]]))
                for i in range(len(names))), default=math.inf)


def _decide(source: Path, proto: onnx.ModelProto, model: onnx.ModelProto, settings: Settings, calibration: Samples,
            folder: Path, passes: dict[str, Any], float_nodes: tuple[str, ...],
            float_output_ops: tuple[str, ...]) -> tuple[_Candidate, str]:
    """The candidate and range method of the best figure on the calibration samples (the module docstring)."""
    candidates = _candidates(proto, model, settings, calibration, passes)
    methods = ["minmax", "mse"] if settings.method == "auto" else [settings.method]
    if len(candidates) * len(methods) == 1:
        passes["equalization"]["applied"] = candidates[0].name == "equalized"
        return candidates[0], methods[0]
    ctx = _Context(source, proto, settings, calibration, folder, float_nodes, float_output_ops)
    figures = {c.name: _measure(ctx, c, methods) for c in candidates}
    name, method = max(((c, m) for c, row in figures.items() for m in row), key=lambda k: figures[k[0]][k[1]])
    rounded = {c: {m: round(v, 2) for m, v in row.items()} for c, row in figures.items()}
    passes["equalization"]["applied"] = name == "equalized"
    passes["decision"] = {"samples": _first(calibration, DECISION_SAMPLES).count, "worst_output_sqnr_db": rounded}
    return next(c for c in candidates if c.name == name), method


def _adarounded(model: onnx.ModelProto, settings: Settings, calibration: Samples, skip: frozenset[str],
                passes: dict[str, Any]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """AdaRound where the settings want it, and the float weights it replaced."""
    if not settings.adaround_for({n.op_type for n in model.graph.node}):
        passes["adaround"] = {"applied": False,
                              "by": "--no-adaround" if settings.adaround is False else "off by default (--adaround)"}
        return model, {}
    from portable.quantization.adaround import adaround

    rounded, record = adaround(model, settings, calibration, skip)
    passes["adaround"] = {"applied": record.layers > 0, **record.to_dict()}
    return rounded, record.originals


def _excluded(proto: onnx.ModelProto, model: onnx.ModelProto, settings: Settings) -> frozenset[str]:
    """The nodes of ``model`` the user's ``--exclude`` keeps float, its values read against the user's own file
    ``proto`` (as the quantizer reads them): CLE leaves the pairs of excluded nodes as they are."""
    from portable.quantization.quantizer import exclusions

    ops, nodes = exclusions(proto, settings.exclude)
    return frozenset(n.name for n in model.graph.node if n.name in nodes or n.op_type in ops)


def _biases_before(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    names = {n.input[2] for n in model.graph.node if n.op_type in ("Conv", "Gemm") and len(n.input) > 2 and n.input[2]}
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if t.name in names}


def _seeded(calibration: Samples) -> bool:
    """Seeded random calibration data (``data.seeded_samples`` names its source so)."""
    return calibration.source.startswith("seeded")


def _on_data(settings: Settings, calibration: Samples) -> Settings:
    """``settings`` with the data-driven passes left to the user on seeded random data: fitting rounding, ranges
    and equalization to random inputs fits them to noise, so the ranges are ONNX Runtime's min-max and CLE is off
    (``_candidates``) unless asked for; AdaRound is off unless asked for on any data."""
    if not _seeded(calibration):
        return settings
    return replace(settings, method="minmax" if settings.method == "auto" else settings.method)


def _build(source: Path, proto: onnx.ModelProto, settings: Settings, calibration: Samples, folder: Path) -> Prepared:
    settings = _on_data(settings, calibration)
    passes: dict[str, Any] = {"scope": settings.resolved_scope({n.op_type for n in proto.graph.node})}
    smoothed, restoring = _smoothed(proto, settings, calibration, passes)
    island_nodes, output_ops = _islands(smoothed, settings, calibration, passes)
    float_nodes = tuple(dict.fromkeys(restoring + island_nodes))
    candidate, method = _decide(source, proto, smoothed, settings, calibration, folder, passes, float_nodes, output_ops)
    rounded, originals = _adarounded(candidate.model, settings, calibration,
                                     frozenset(float_nodes) | _excluded(proto, candidate.model, settings), passes)
    biases = _biases_before(rounded)
    corrected, record = _corrected(rounded, settings, calibration, set(originals))
    if record is not None:
        passes["bias_correction"] = record
    originals.update({name: value for name, value in biases.items()
                      if not np.array_equal(value, _initializer(corrected, name))})
    path = _inferred(corrected, folder, "prepared", settings, source)
    ranges, info = _ranges(path, settings, op_types_to_quantize_of(settings, proto, candidate.extra_ops), calibration,
                           method, folder)
    passes["ranges"] = info
    exact = candidate.model if candidate.name == "equalized" else smoothed
    return Prepared(path, corrected, passes, float_nodes, output_ops, ranges, originals, candidate.extra_ops,
                    None if exact is proto else exact)


def _initializer(model: onnx.ModelProto, name: str) -> np.ndarray:
    return numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == name))


def op_types_to_quantize_of(settings: Settings, proto: onnx.ModelProto, extra_ops: tuple[str, ...]) -> list[str]:
    from portable.quantization.quantizer import op_types_to_quantize

    return op_types_to_quantize(settings, proto, extra_ops)
