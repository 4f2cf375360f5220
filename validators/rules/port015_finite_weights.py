"""PORT015 finite-weights."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
from onnx import numpy_helper

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["FiniteWeights"]

_FLOATS = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.DOUBLE: np.float64,
}
_CHUNK = 1 << 20  # elements scanned at a time, so a large weight is never copied whole


def _bfloat16():
    import ml_dtypes

    return ml_dtypes.bfloat16


def count_non_finite(tensor: onnx.TensorProto) -> int:
    """NaN/Inf count of a float tensor, scanning raw bytes in chunks (no full copy)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return 0
    dtype = _FLOATS.get(tensor.data_type) or (_bfloat16() if tensor.data_type == onnx.TensorProto.BFLOAT16 else None)
    if dtype is None:
        return 0
    if not tensor.HasField("raw_data"):
        return int((~np.isfinite(numpy_helper.to_array(tensor).astype(np.float32))).sum())
    values = np.frombuffer(tensor.raw_data, dtype=dtype)
    return sum(int((~np.isfinite(values[i:i + _CHUNK].astype(np.float32))).sum()) for i in range(0, values.size, _CHUNK))


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
                for tensor in body.initializer:
                    count = count_non_finite(tensor)
                    if count:
                        yield self.finding(Location(graph=scope.path, value=tensor.name), name=tensor.name, count=count)
            for index, node in enumerate(body.node):
                for attr in node.attribute:
                    if attr.type == onnx.AttributeProto.TENSOR and (count := count_non_finite(attr.t)):
                        yield self.finding(ctx.location(scope, index, node, node.output[0] if node.output else None),
                                           name=attr.t.name or node.name, count=count)
