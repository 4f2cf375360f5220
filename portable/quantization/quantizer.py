"""ONNX Runtime's static QDQ quantization, driven with the resolved settings; no quantizer of our own.

Steps, in a temporary folder: ``quant_pre_process`` with its shape inference only (portable's
file is already optimized; ORT's optimizer step would save an ORT-optimized graph that imports
eight more domains and may fuse into ORT-only forms), then ``quantize_static`` in QDQ format.
ONNX Runtime's chatter is held back: its Python logging (the "consider pre-processing" warning)
by the caller's ``quiet_libraries``, the prints of its histogram calibrators ("Collecting tensor
data and making histogram ...") by a redirect of stdout here, its C++ log below errors.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from portable.errors import UsageError
from portable.quantization.data import Reader, Samples
from portable.quantization.settings import LINEAR_OPS, Settings
from portable.quantization.steps import Reuse, shape_step, step

__all__ = ["Prepared", "Quantized", "exclusions", "prepare", "quantize_file"]

_TYPES = {"uint8": "QUInt8", "int8": "QInt8"}
_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}


def exclusions(proto: onnx.ModelProto, exclude: Sequence[str]) -> tuple[list[str], list[str]]:
    """``--exclude`` values as (op types, node names) of the model: ``op:TYPE`` and ``node:NAME`` say
    which; a bare value is an op type when the model has one of that name, else a node name
    (portable's node names repeat op types: ``node:Conv`` is the first Conv alone). A value the
    model has not is a usage error naming it."""
    ops = {n.op_type for n in proto.graph.node}
    names = {n.name for n in proto.graph.node if n.name}
    chosen: tuple[list[str], list[str]] = ([], [])
    unknown = []
    for value in exclude:
        kind, sep, rest = value.partition(":")
        if sep and kind in ("op", "node"):
            found = rest in (ops if kind == "op" else names)
            target = chosen[0] if kind == "op" else chosen[1]
        else:
            rest, found, target = value, value in ops or value in names, chosen[0] if value in ops else chosen[1]
        if found:
            target.append(rest)
        else:
            unknown.append(value)
    if unknown:
        raise UsageError(f"--exclude {', '.join(unknown)}: not an op type or node name of the model "
                         f"(its op types: {', '.join(sorted(ops))}; a node: node:NAME)")
    return chosen


def _op_types(excluded_ops: Sequence[str]) -> list[str] | None:
    """Every op type ONNX Runtime's QDQ quantizer handles, less the excluded ones (None: all)."""
    if not excluded_ops:
        return None
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return sorted((set(QDQRegistry) | set(QLinearOpsRegistry)) - set(excluded_ops))


def _arguments(settings: Settings, proto: onnx.ModelProto, prepared: Prepared | None = None) -> dict[str, Any]:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType

    ops, nodes = exclusions(proto, settings.exclude)
    extra = dict(settings.extra)
    linear = settings.resolved_scope({n.op_type for n in proto.graph.node}) == "linear"
    if linear:  # every other op type is left out; the linear ops' outputs stay float unless a quantized op reads them
        ops = sorted({n.op_type for n in proto.graph.node} - set(LINEAR_OPS)) + ops
        extra["OpTypesToExcludeOutputQuantization"] = list(LINEAR_OPS)
    if prepared is not None:
        nodes = list(dict.fromkeys(nodes + list(prepared.float_nodes)))
        outputs = set(extra.get("OpTypesToExcludeOutputQuantization", ())) | set(prepared.float_output_ops)
        if outputs:
            extra["OpTypesToExcludeOutputQuantization"] = sorted(outputs)
    if settings.per_channel and settings.target.per_tensor_ops:  # the weights of the model the quantizer reads
        source = proto if prepared is None else prepared.model
        extra["TensorQuantOverrides"] = {**_per_tensor_weights(settings, source),
                                         **extra.get("TensorQuantOverrides", {})}
    return {"quant_format": QuantFormat.QDQ, "per_channel": settings.per_channel,
            "activation_type": getattr(QuantType, _TYPES[settings.activations]),
            "weight_type": getattr(QuantType, _TYPES[settings.weights]),
            "calibrate_method": getattr(CalibrationMethod, _METHODS[settings.method]),
            "op_types_to_quantize": _op_types(ops), "nodes_to_exclude": nodes,
            "extra_options": extra}


def _per_tensor_weights(settings: Settings, proto: onnx.ModelProto) -> dict[str, list[dict[str, Any]]]:
    """Per-tensor overrides for the weights of the op types the target takes per-tensor only, where the rest are
    per-channel (QNN's MatMul). ONNX Runtime's get_qnn_qdq_config writes the same overrides
    (``QnnCompatibilityOverrides._process_matmul``), but only inside a whole config of its own."""
    from onnxruntime.quantization import QuantType

    weights = {t.name for t in proto.graph.initializer}
    qtype = getattr(QuantType, _TYPES[settings.weights])
    symmetric = bool(settings.extra.get("WeightSymmetric", settings.weights == "int8"))
    return {name: [{"quant_type": qtype, "symmetric": symmetric}] for node in proto.graph.node
            if node.op_type in settings.target.per_tensor_ops for name in node.input if name in weights}


@dataclass(frozen=True)
class Quantized:
    """The QDQ model, and what the passes before ONNX Runtime's quantizer did to the float one."""

    proto: onnx.ModelProto
    passes: dict[str, Any] = field(default_factory=dict)
    # the float model as the int8 one computes it (Prepared.reference): what the worst nodes compare with
    reference: onnx.ModelProto | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Prepared:
    """The float model the quantizer reads (``source`` or a rewritten copy; ``model`` is it in memory) and what
    it keeps float."""

    path: Path
    model: onnx.ModelProto
    passes: dict[str, Any]
    float_nodes: tuple[str, ...] = ()
    float_output_ops: tuple[str, ...] = ()
    # the float model after the passes that keep its function exact (SmoothQuant), before those that change it
    # (bias correction): each int8 tensor is compared with this one's (nodes.py); None: the source as it is
    reference: onnx.ModelProto | None = None


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
               passes: dict[str, Any]) -> onnx.ModelProto:
    if not settings.bias_correction:
        return proto
    from portable.quantization.correction import correct_biases

    corrected, record = correct_biases(proto, settings, calibration)
    passes["bias_correction"] = record.to_dict()
    return corrected


def prepare(source: Path, proto: onnx.ModelProto, settings: Settings, calibration: Samples, folder: Path) -> Prepared:
    """The passes before ONNX Runtime's quantizer on ``proto`` (``source`` as loaded, weights inline), in order:
    smoothing, float islands, bias correction."""
    passes: dict[str, Any] = {"scope": settings.resolved_scope({n.op_type for n in proto.graph.node})}
    smoothed, restoring = _smoothed(proto, settings, calibration, passes)
    island_nodes, output_ops = _islands(smoothed, settings, calibration, passes)
    corrected = _corrected(smoothed, settings, calibration, passes)
    path = source if corrected is proto else folder / "prepared-float.onnx"
    if corrected is not proto:
        onnx.save(corrected, str(path))
    return Prepared(path, corrected, passes, tuple(dict.fromkeys(restoring + island_nodes)), output_ops,
                    None if smoothed is proto else smoothed)


def _prepared(source: Path, proto: onnx.ModelProto, settings: Settings, calibration: Samples,
              folder: Path) -> tuple[Prepared, Path]:
    """``prepare``'s float model and ``quant_pre_process``'s file of it (in ``folder``)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = folder / "prepared.onnx"
    with step(source, None):
        ready = prepare(source, proto, settings, calibration, folder)
    with step(source, shape_step(settings.symbolic_shape)), contextlib.chdir(folder):  # its failure writes into the cwd
        quant_pre_process(str(ready.path), str(prepared), skip_optimization=True,
                          skip_symbolic_shape=not settings.symbolic_shape)
    return ready, prepared


def quantize_file(source: Path, settings: Settings, calibration: Samples, reuse: Reuse | None = None) -> Quantized:
    """The QDQ model ONNX Runtime makes of ``source`` (read back whole: no external data). Each step's failure
    names its step (portable's own pass, ONNX Runtime's shape inference, its quantizer), with the cause chained
    (``--debug`` shows it). ``reuse``: what an earlier trial of the same run computed (``steps.Reuse``)."""
    proto = onnx.load(str(source), load_external_data=False)
    exclusions(proto, settings.exclude)  # bad --exclude values: before any work
    import onnxruntime as ort
    from onnxruntime.quantization import quantize_static

    ort.set_default_logger_severity(3)  # the calibration sessions' C++ warnings
    with tempfile.TemporaryDirectory(prefix="portable-quantize-") as tmp, contextlib.redirect_stdout(io.StringIO()):
        out = Path(tmp) / "quantized.onnx"
        ready, prepared = (reuse.get(settings) if reuse is not None else None) or _prepared(
            source, proto, settings, calibration, reuse.folder if reuse is not None else Path(tmp))
        if reuse is not None:
            reuse.keep(settings, ready, prepared)
        with step(source, "ONNX Runtime's quantize_static"):
            quantize_static(str(prepared), str(out), Reader(calibration), **_arguments(settings, proto, ready),
                            calibration_cache_path=reuse.calibration_cache if reuse is not None else None)
        return Quantized(onnx.load(str(out)), ready.passes, ready.reference)
