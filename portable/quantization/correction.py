"""Bias correction: the float model's Conv and Gemm biases shifted so that, on the calibration
data, the int8 weights' rounding error moves no output channel's mean.

Why: rounding a weight to 8 bits changes ``W`` by ``dW``; a layer's output then moves by
``dW · x``, whose mean over the data, ``dW · E[x]``, is a bias no later layer undoes. Depthwise
convolutions of trained convnets (3x3 = 9 weights a channel after batch norm is folded in) carry
the largest such shifts, and they add up layer after layer. Subtracting ``dW · E[x]`` from each
bias takes the shift out (Nagel et al., "Data-Free Quantization Through Weight Equalization and
Bias Correction", ICCV 2019, section 4.2, in its empirical form: ``E[x]`` from the float model's
activations on the calibration samples rather than from batch-norm statistics, which a portable
file no longer has). The rounded weights are ONNX Runtime's own (``quant_utils.quantize_data``
with the run's weight type, symmetry and granularity), so ``dW`` is the error the quantizer will
make; the quantizer still runs afterwards on the corrected float model, and the accuracy is
measured against the user's original float model.

Hand-written: ONNX Runtime's quantization tooling has no bias correction (AIMET's, which has, is a
PyTorch/TensorFlow library, not an ONNX pass).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from portable.quantization.data import Samples
from portable.quantization.settings import Settings

__all__ = ["BiasCorrection", "correct_biases", "ort_rounded"]


@dataclass(frozen=True)
class BiasCorrection:
    """What the pass did: layers whose bias moved, those it could not correct, the largest shift."""

    corrected: int
    skipped: int
    largest_shift: float  # the largest |dW · E[x]| of any output channel, in the layer's output units

    def to_dict(self) -> dict[str, Any]:
        return {"corrected_layers": self.corrected, "skipped_layers": self.skipped,
                "largest_shift": round(self.largest_shift, 6)}


def _attribute(node: onnx.NodeProto, name: str, default: Any) -> Any:
    found = next((a for a in node.attribute if a.name == name), None)
    return default if found is None else onnx.helper.get_attribute_value(found)


def _layers(proto: onnx.ModelProto) -> tuple[list[onnx.NodeProto], int]:
    """Conv and plain Gemm nodes whose weight and bias are initializers that no other node reads
    (a shared bias cannot take two corrections), and how many others there are."""
    uses = Counter(name for n in proto.graph.node for name in n.input)
    inits = {t.name for t in proto.graph.initializer if uses[t.name] == 1}
    candidates = [n for n in proto.graph.node if n.op_type in ("Conv", "Gemm")]
    layers = [n for n in candidates if len(n.input) > 2 and n.input[1] in inits and n.input[2] in inits
              and (n.op_type == "Conv" or (_attribute(n, "alpha", 1.0) == 1.0 and _attribute(n, "beta", 1.0) == 1.0
                                           and not _attribute(n, "transA", 0)))]
    return layers, len(candidates) - len(layers)


def _input_means(proto: onnx.ModelProto, tensors: list[str], calibration: Samples) -> dict[str, np.ndarray]:
    """Each tensor's mean per channel (axis 1) over the calibration samples, from the float model."""
    from portable.quantization.activations import calibration_outputs

    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for batch in calibration_outputs(proto, calibration, tensors):
        for name, value in batch.items():
            flat = np.moveaxis(np.asarray(value, dtype=np.float64), 1, 0).reshape(value.shape[1], -1)
            sums[name] = sums.get(name, 0.0) + flat.sum(axis=1)
            counts[name] = counts.get(name, 0) + flat.shape[1]
    return {name: sums[name] / counts[name] for name in tensors}


def ort_rounded(weight: np.ndarray, settings: Settings, axis: int | None) -> np.ndarray:
    """``weight`` as ONNX Runtime's quantizer will round it, dequantized (per channel on ``axis``)."""
    from onnxruntime.quantization.quant_utils import QuantType, quantize_data

    qtype = (QuantType.QInt8 if settings.weights == "int8" else QuantType.QUInt8).tensor_type
    symmetric = bool(settings.extra.get("WeightSymmetric", settings.weights == "int8"))
    min_range = settings.extra.get("MinimumRealRange")

    def one(w: np.ndarray) -> np.ndarray:
        zero_point, scale, q = quantize_data(w.ravel(), qtype, symmetric, False, min_range)
        return ((np.asarray(q, dtype=np.float64) - float(zero_point)) * float(scale)).reshape(w.shape)

    if axis is None:
        return one(weight)
    return np.stack([one(weight.take(i, axis)) for i in range(weight.shape[axis])], axis=axis)


def _shift(node: onnx.NodeProto, weight: np.ndarray, mean: np.ndarray, settings: Settings) -> np.ndarray:
    """``dW · E[x]`` per output channel of one Conv or Gemm."""
    if node.op_type == "Gemm":
        trans_b = bool(_attribute(node, "transB", 0))
        axis = (0 if trans_b else 1) if settings.per_channel_for("Gemm") else None
        delta = ort_rounded(weight, settings, axis) - weight
        return np.asarray(delta @ mean if trans_b else mean @ delta)
    delta = ort_rounded(weight, settings, 0 if settings.per_channel_for(node.op_type) else None) - weight
    groups = int(_attribute(node, "group", 1))
    out_channels, group_in = delta.shape[:2]
    per_pair = delta.reshape(out_channels, group_in, -1).sum(axis=2)  # [out, in of its group]
    means = mean.reshape(groups, group_in)
    return np.asarray(np.einsum("goi,gi->go", per_pair.reshape(groups, out_channels // groups, group_in), means)).ravel()


def correct_biases(proto: onnx.ModelProto, settings: Settings, calibration: Samples,
                   learned: Collection[str] = ()) -> tuple[onnx.ModelProto, BiasCorrection]:
    """A copy of ``proto`` with every correctable layer's bias shifted (the module docstring). Layers whose weight
    is in ``learned`` are left as they are: AdaRound fitted their rounding to their output on the data, mean
    included (and the error of the layers before them), which a shift against the float weight would undo."""
    layers, skipped = _layers(proto)
    layers = [n for n in layers if n.input[1] not in learned]
    if not layers:
        return proto, BiasCorrection(0, skipped, 0.0)
    means = _input_means(proto, list(dict.fromkeys(n.input[0] for n in layers)), calibration)
    corrected = onnx.ModelProto()
    corrected.CopyFrom(proto)
    tables: Mapping[str, onnx.TensorProto] = {t.name: t for t in corrected.graph.initializer}
    largest = 0.0
    for node in layers:
        weight = numpy_helper.to_array(tables[node.input[1]]).astype(np.float64)
        bias = numpy_helper.to_array(tables[node.input[2]])
        shift = _shift(node, weight, means[node.input[0]], settings)
        largest = max(largest, float(np.abs(shift).max(initial=0.0)))
        tables[node.input[2]].CopyFrom(numpy_helper.from_array((bias - shift).astype(bias.dtype), node.input[2]))
    return corrected, BiasCorrection(len(layers), skipped, largest)
