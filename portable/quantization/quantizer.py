"""ONNX Runtime's static QDQ quantization, driven with the resolved settings; no quantizer of our own.

Steps, in a temporary folder: ``quant_pre_process`` with its shape inference only (portable's
file is already optimized; ORT's optimizer step would save an ORT-optimized graph that imports
eight more domains and may fuse into ORT-only forms), then ``quantize_static`` in QDQ format.
ONNX Runtime's chatter is held back: its Python logging (the "consider pre-processing" warning)
by the caller's ``quiet_libraries``, the prints of its histogram calibrators ("Collecting tensor
data and making histogram ...") by a redirect of stdout here, its C++ log below errors.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from portable.errors import UsageError
from portable.quantization.data import Reader, Samples
from portable.quantization.settings import LINEAR_OPS, Settings

if TYPE_CHECKING:
    from portable.quantization.preparation import Prepared

__all__ = ["exclusions", "op_types_to_quantize", "quantize_prepared"]

_TYPES = {"uint8": "QUInt8", "int8": "QInt8"}
# "mse" and "auto" ranges reach quantize_static as a calibration cache (ranges.py); its MinMax reads it
_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile", "mse": "MinMax", "auto": "MinMax"}


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


def _registry_ops() -> set[str]:
    """Every op type ONNX Runtime's QDQ quantizer handles (``quantize_static``'s default list)."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return set(QDQRegistry) | set(QLinearOpsRegistry)


def _op_types(excluded_ops: Sequence[str]) -> list[str] | None:
    """Every op type ONNX Runtime's QDQ quantizer handles, less the excluded ones (None: all)."""
    return sorted(_registry_ops() - set(excluded_ops)) if excluded_ops else None


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


def op_types_to_quantize(settings: Settings, proto: onnx.ModelProto, extra_ops: Sequence[str] = ()) -> list[str]:
    """The op types ``quantize_static`` is given (and calibrates the tensors of) for ``proto`` under ``settings``."""
    listed = _arguments(settings, proto)["op_types_to_quantize"]
    return sorted(set(_registry_ops() if listed is None else listed) | set(extra_ops))


def quantize_prepared(ready: Prepared, path: Path, settings: Settings, proto: onnx.ModelProto,
                      calibration: Samples, cache: Path | None = None) -> onnx.ModelProto:
    """ONNX Runtime's ``quantize_static`` on ``path`` (``ready``'s shape-inferred float model or a trial's copy
    of it); with ``ready.ranges``, its calibration cache (no calibration pass), else ``calibration`` (through
    ``cache``, where given: ONNX Runtime's own calibration cache, written by the first trial, read by the next)."""
    from onnxruntime.quantization import CalibrationMethod, quantize_static

    arguments = _arguments(settings, proto, ready)
    if ready.extra_ops:
        arguments["op_types_to_quantize"] = op_types_to_quantize(settings, proto, ready.extra_ops)
    reader: Reader | None = Reader(calibration)
    if cache is not None:
        arguments["calibration_cache_path"] = str(cache)
    if ready.ranges is not None:
        arguments.update(calibration_cache_path=str(ready.ranges), calibrate_method=CalibrationMethod.MinMax)
        reader = None
    with tempfile.TemporaryDirectory(prefix="portable-quantize-") as tmp:
        out = Path(tmp) / "quantized.onnx"
        quantize_static(str(path), str(out), reader, **arguments)
        return onnx.load(str(out))
