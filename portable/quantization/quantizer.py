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

from portable.errors import InternalError, UsageError, one_line
from portable.quantization.data import Reader, Samples
from portable.quantization.settings import Settings

__all__ = ["Quantized", "exclusions", "quantize_file"]

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


def _arguments(settings: Settings, proto: onnx.ModelProto) -> dict[str, Any]:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType

    ops, nodes = exclusions(proto, settings.exclude)
    return {"quant_format": QuantFormat.QDQ, "per_channel": settings.per_channel,
            "activation_type": getattr(QuantType, _TYPES[settings.activations]),
            "weight_type": getattr(QuantType, _TYPES[settings.weights]),
            "calibrate_method": getattr(CalibrationMethod, _METHODS[settings.method]),
            "op_types_to_quantize": _op_types(ops), "nodes_to_exclude": nodes,
            "extra_options": dict(settings.extra)}


@dataclass(frozen=True)
class Quantized:
    """The QDQ model, and what the passes before ONNX Runtime's quantizer did to the float one."""

    proto: onnx.ModelProto
    passes: dict[str, Any] = field(default_factory=dict)


def _corrected(source: Path, settings: Settings, calibration: Samples, folder: Path) -> tuple[Path, dict[str, Any]]:
    """The float model the quantizer reads: ``source``, or its bias-corrected copy in ``folder``."""
    if not settings.bias_correction:
        return source, {}
    from portable.quantization.correction import correct_biases

    corrected, record = correct_biases(onnx.load(str(source)), settings, calibration)
    path = folder / "corrected.onnx"
    onnx.save(corrected, str(path))
    return path, {"bias_correction": record.to_dict()}


def quantize_file(source: Path, settings: Settings, calibration: Samples) -> Quantized:
    """The QDQ model ONNX Runtime makes of ``source`` (read back whole: no external data)."""
    proto = onnx.load(str(source), load_external_data=False)
    arguments = _arguments(settings, proto)  # bad --exclude values: before any work
    import onnxruntime as ort
    from onnxruntime.quantization import quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    ort.set_default_logger_severity(3)  # the calibration sessions' C++ warnings
    with tempfile.TemporaryDirectory(prefix="portable-quantize-") as tmp, contextlib.redirect_stdout(io.StringIO()):
        prepared, out = Path(tmp) / "prepared.onnx", Path(tmp) / "quantized.onnx"
        try:
            floating, passes = _corrected(source, settings, calibration, Path(tmp))
            quant_pre_process(str(floating), str(prepared), skip_optimization=True)
            quantize_static(str(prepared), str(out), Reader(calibration), **arguments)
        except (UsageError, InternalError):
            raise
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime's quantizer raises plain exceptions
            raise InternalError(f"ONNX Runtime's quantizer failed: {one_line(exc, limit=300)}",
                                path=str(source)) from None
        return Quantized(onnx.load(str(out)), passes)
