"""PORT015 finite-weights.

Weights are scanned in chunks straight from their bytes. A weight the lean parse left in
the file (see :mod:`portable.validators.lean`) is read from the memory map, and each
chunk's pages are released once scanned, so the scan never holds a whole weight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import onnx
from onnx import numpy_helper

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["FiniteWeights"]

_FLOATS: dict[int, type] = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.DOUBLE: np.float64,
}
_CHUNK = 1 << 20  # elements scanned at a time, so a large weight is never copied whole


def _bfloat16():
    import ml_dtypes

    return ml_dtypes.bfloat16


def _dtype(tensor: onnx.TensorProto):
    if tensor.data_type == onnx.TensorProto.BFLOAT16:
        return _bfloat16()
    return _FLOATS.get(tensor.data_type)


def _exact(values: np.ndarray) -> np.ndarray:
    """float16/bfloat16 widened to float32 (exact); float32 and float64 as they are: a cast
    of float64 to float32 would turn a finite 1e300 into Inf."""
    return values if values.dtype in (np.float32, np.float64) else values.astype(np.float32)


def count_non_finite(tensor: onnx.TensorProto, raw: memoryview | None = None,
                     release: Callable[[int, int], None] | None = None) -> int:
    """NaN/Inf count of a float tensor, scanning raw bytes in chunks (no full copy).

    ``raw`` is the tensor's ``raw_data`` when the tensor itself does not hold it (a lean
    parse); ``release(start, end)`` is told each byte range of ``raw`` once it is scanned.
    """
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return 0
    dtype = _dtype(tensor)
    if dtype is None:
        return 0
    if raw is None and not tensor.HasField("raw_data"):
        return int((~np.isfinite(_exact(numpy_helper.to_array(tensor)))).sum())
    values = np.frombuffer(tensor.raw_data if raw is None else raw, dtype=dtype)
    count = 0
    for i in range(0, values.size, _CHUNK):
        chunk = _exact(values[i:i + _CHUNK])
        count += chunk.size - int(np.count_nonzero(np.isfinite(chunk)))
        if release is not None:
            release(i * values.itemsize, min(i + _CHUNK, values.size) * values.itemsize)
    return count


class FiniteWeights(Rule):
    """Weights are finite: no NaN or Inf in float initializers or constants.

    *Why*: a NaN weight poisons every output it reaches; an Inf usually comes from
    an overflowing fp16 conversion. Both are bugs that parity checks catch late.

    *Bad*: a checkpoint saved after a diverged training step; ``model.half()`` on
    weights above 65504.

    *Fix*: reload good weights; convert with clamping or keep that layer in fp32.
    """

    id = "PORT015"
    name = "finite-weights"
    severity = Severity.ERROR
    message = "tensor '{name}' holds {count} non-finite value(s) (NaN or Inf)"
    hint = "reload good weights; clamp before converting to fp16"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        for scope in ctx.scopes:
            body = scope.body
            if isinstance(body, onnx.GraphProto):
                for i, tensor in enumerate(body.initializer):
                    count = _count_initializer(ctx, scope, i, tensor)
                    if count:
                        yield self.finding(Location(graph=scope.path, value=tensor.name), name=tensor.name, count=count)
            for index, node in enumerate(body.node):
                for attr in node.attribute:
                    if attr.type == onnx.AttributeProto.TENSOR and (count := count_non_finite(attr.t)):
                        yield self.finding(ctx.location(scope, index, node, node.output[0] if node.output else None),
                                           name=attr.t.name or node.name, count=count)


def _count_initializer(ctx: ModelContext, scope, index: int, tensor: onnx.TensorProto) -> int:
    lean = ctx.lean
    if lean is None or not ctx.stripped(scope, index):
        return count_non_finite(tensor)
    raw = lean.payload(index)
    try:
        return count_non_finite(tensor, raw, lambda a, b: lean.release(index, a, b))
    finally:
        raw.release()
