"""Fusions ONNX Runtime makes when it loads a model, made in the file instead.

Unlike :mod:`portable.exporters.rewrites`, these change how a product is rounded: ``conv(x, w) * g``
becomes ``conv(x, w * g)``. ONNX Runtime's default graph optimizations make the same fusion at
load (``ConvMulFusion``, basic level) from the same float32 product, so on ONNX Runtime the fused
file gives bit-identical outputs to the unfused one (tests/exporters/test_fusions.py checks it);
another runtime sees the weights ORT would have computed with. Each rule is exact about shapes
and types and holds for every batch (it reads only the weights and the per-channel constant).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

if TYPE_CHECKING:
    from onnxscript.rewriter.pattern import RewriteRule

__all__ = ["runtime_fusion_rules"]


def runtime_fusion_rules() -> list[RewriteRule]:
    """The rules, in the order they are tried."""
    from onnxscript.rewriter.pattern import RewriteRule

    return [
        *RewriteRule(_conv_mul, _scaled_conv, _per_channel, name="ConvMulFusion").commute(),
        *RewriteRule(_conv_mul_no_bias, _scaled_conv, _per_channel, name="ConvMulFusionNoBias").commute(),
    ]


def _conv_mul(op: Any, x: ir.Value, w: ir.Value, b: ir.Value, g: ir.Value) -> ir.Value:
    return op.Mul(op.Conv(x, w, b, _allow_other_attributes=True, _outputs=["conv_out"]), g)


def _conv_mul_no_bias(op: Any, x: ir.Value, w: ir.Value, g: ir.Value) -> ir.Value:
    return op.Mul(op.Conv(x, w, _allow_other_attributes=True, _outputs=["conv_out"]), g)


def _per_channel(context: Any, x: ir.Value, w: ir.Value, g: ir.Value, conv_out: ir.Value,
                 b: ir.Value | None = None, **_: Any) -> bool:
    """Constant float weights (and bias), a Conv output used by this Mul alone, and ``g`` one factor
    per output channel (:func:`_channel_factors`)."""
    weight = ir.convenience.get_const_tensor(w)
    factor = ir.convenience.get_const_tensor(g)
    if weight is None or factor is None or weight.dtype != factor.dtype or not weight.dtype.is_floating_point():
        return False
    if b is not None and ir.convenience.get_const_tensor(b) is None:
        return False
    if len(conv_out.uses()) != 1 or conv_out.is_graph_output():
        return False
    return _channel_factors(factor.numpy(), len(weight.shape), weight.shape[0]) is not None


def _channel_factors(g: np.ndarray, rank: int, channels: int) -> np.ndarray | None:
    """``g`` as one factor per output channel (shape ``[channels]``), if it is shaped ``[1, channels, 1...]``
    or ``[channels, 1...]`` against a ``[N, channels, ...]`` output of ``rank`` dims: the shapes ORT's
    ``ConvMulFusion`` takes (it leaves a scalar or ``[1]`` factor to the ``Mul``, and so does this)."""
    if g.ndim not in (rank, rank - 1):
        return None
    dims = (1,) * (rank - g.ndim) + g.shape
    if dims[0] != 1 or dims[1] != channels or any(d != 1 for d in dims[2:]):
        return None
    return g.reshape(-1)


def _scaled_conv(op: Any, x: ir.Value, w: ir.Value, g: ir.Value, conv_out: ir.Value,
                 b: ir.Value | None = None, **_: Any) -> ir.Value:
    weight = w.const_value.numpy()  # type: ignore[union-attr]
    factors = _channel_factors(g.const_value.numpy(), weight.ndim, weight.shape[0])  # type: ignore[union-attr]
    assert factors is not None  # the condition checked it
    inputs = [x, op.initializer(ir.tensor(weight * factors.reshape((-1,) + (1,) * (weight.ndim - 1))),
                                name=f"{w.name}_scaled")]
    if b is not None:
        inputs.append(op.initializer(ir.tensor(b.const_value.numpy() * factors),  # type: ignore[union-attr]
                                     name=f"{b.name}_scaled"))
    producer = conv_out.producer()
    assert producer is not None
    return op.Conv(*inputs, **producer.attributes)
