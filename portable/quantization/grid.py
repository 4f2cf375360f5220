"""ONNX Runtime's integer grid for one weight, and float weights that land on chosen points of it.

A pass that chooses a weight's integers itself (learned rounding, :mod:`portable.quantization.adaround`)
still hands ONNX Runtime's quantizer a float model: the quantizer computes each channel's scale and zero
point from the channel's smallest and largest value (``quant_utils.compute_data_quant_params``), then
rounds ``w / scale`` to the nearest integer (``quantize_nparray``). So the written weight keeps each
channel's smallest and largest element as they were, bit for bit (the scale and zero point ONNX Runtime
computes are then the original's), and every other element is written as ``(q - zero) * scale`` in
float32 for the chosen integer ``q``, kept within the channel's range: ONNX Runtime's round-to-nearest of
``w / scale`` gives back ``q``; :func:`ort_integers` (ONNX Runtime's ``quantize_data``) reads them back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from portable.quantization.settings import Settings

__all__ = ["Grid", "grid_of", "ort_integers", "weight_axis", "written_weight"]


@dataclass(frozen=True)
class Grid:
    """One weight's grid: per-channel scale and zero point on ``axis`` (None: one for the tensor, shape
    ``[1]``), the integer range, and which elements hold a channel's smallest or largest value."""

    scale: np.ndarray  # float32 [channels]
    zero: np.ndarray  # int64 [channels]
    qmin: int
    qmax: int
    axis: int | None
    extremes: np.ndarray  # bool, the weight's shape

    def broadcast(self, values: np.ndarray, ndim: int) -> np.ndarray:
        """Per-channel ``values`` shaped to broadcast against the weight."""
        if self.axis is None:
            return values.reshape((1,) * ndim)
        return values.reshape([-1 if i == self.axis else 1 for i in range(ndim)])


def weight_axis(node: onnx.NodeProto, settings: Settings) -> int | None:
    """The axis ONNX Runtime's QDQ quantizer takes a weight's channels on (``QDQConv``: 0; ``QDQGemm``: 0 with
    transB, else 1; ``QDQMatMul``: 1), or None when the run quantizes this op type's weights per tensor."""
    if not settings.per_channel_for(node.op_type):
        return None
    if node.op_type == "Gemm":
        return 0 if next((a.i for a in node.attribute if a.name == "transB"), 0) else 1
    return 1 if node.op_type == "MatMul" else 0


def _quant_args(settings: Settings) -> tuple[int, bool, float | None]:
    from onnxruntime.quantization.quant_utils import QuantType

    qtype = (QuantType.QInt8 if settings.weights == "int8" else QuantType.QUInt8).tensor_type
    symmetric = bool(settings.extra.get("WeightSymmetric", settings.weights == "int8"))
    return qtype, symmetric, settings.extra.get("MinimumRealRange")


def _channels(weight: np.ndarray, axis: int | None) -> list[np.ndarray]:
    return [weight] if axis is None else [weight.take(i, axis) for i in range(weight.shape[axis])]


def _extremes(weight: np.ndarray, axis: int | None) -> np.ndarray:
    if axis is None:
        return np.asarray((weight == weight.min()) | (weight == weight.max()))
    moved = np.moveaxis(weight, axis, 0).reshape(weight.shape[axis], -1)
    flags = (moved == moved.min(axis=1, keepdims=True)) | (moved == moved.max(axis=1, keepdims=True))
    return np.moveaxis(flags.reshape(np.moveaxis(weight, axis, 0).shape), 0, axis)


def grid_of(weight: np.ndarray, settings: Settings, axis: int | None) -> Grid:
    """ONNX Runtime's grid for the float32 ``weight`` under the run's weight settings (its own functions)."""
    from onnxruntime.quantization.quant_utils import compute_data_quant_params, get_qmin_qmax_for_qType

    qtype, symmetric, min_range = _quant_args(settings)
    params = [compute_data_quant_params(c.ravel(), qtype, symmetric, False, min_range) for c in _channels(weight, axis)]
    qmin, qmax = get_qmin_qmax_for_qType(qtype, reduce_range=False, symmetric=symmetric)
    return Grid(np.array([float(s) for _, s in params], np.float32), np.array([int(z) for z, _ in params], np.int64),
                int(qmin), int(qmax), axis, _extremes(weight, axis))


def ort_integers(weight: np.ndarray, settings: Settings, axis: int | None) -> np.ndarray:
    """The integers ONNX Runtime's quantizer makes of ``weight`` (``quantize_data`` per channel), int64."""
    from onnxruntime.quantization.quant_utils import quantize_data

    qtype, symmetric, min_range = _quant_args(settings)
    parts = [np.asarray(quantize_data(c.ravel(), qtype, symmetric, False, min_range)[2], np.int64).reshape(c.shape)
             for c in _channels(weight, axis)]
    return parts[0] if axis is None else np.stack(parts, axis=axis)


def written_weight(weight: np.ndarray, integers: np.ndarray, grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """The float32 weight whose ONNX Runtime quantization gives ``integers`` (the module docstring), and the
    integers it gives: extremes kept (their integers ONNX Runtime's nearest), every other element
    ``(q - zero) * scale``, nudged one step inward where float32 rounding would take it past its channel's
    range (which would change the scale)."""
    scale = grid.broadcast(grid.scale, weight.ndim)
    zero = grid.broadcast(grid.zero, weight.ndim)
    low, high = (grid.broadcast(f(np.moveaxis(weight, grid.axis, 0).reshape(weight.shape[grid.axis], -1), axis=1),
                                weight.ndim) if grid.axis is not None else f(weight) for f in (np.min, np.max))
    q = integers.astype(np.int64)
    for _ in range(2):  # one step inward is enough: the range holds at least one step
        values = ((q - zero).astype(np.float32) * scale).astype(np.float32)
        q = np.where(values > high, q - 1, np.where(values < low, q + 1, q))
    q = np.where(grid.extremes, integers, q)  # an extreme keeps its value, so ONNX Runtime gives it its nearest
    values = ((q - zero).astype(np.float32) * scale).astype(np.float32)
    return np.where(grid.extremes, weight, values).astype(np.float32), q
