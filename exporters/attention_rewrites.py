"""Rewrite rules for the masks PyTorch's exporter leaves in attention, in onnxscript's pattern-rule form.

``scaled_dot_product_attention`` exported by torch.onnx comes with two passes over every
``[batch, heads, seq, seq]`` score tensor that compute nothing when no position is masked:

- a mask built from a constant that masks nothing (transformers writes an all-true ``[1, 1, seq, 1]``
  padding mask for ``input_ids`` alone), ``Where(Expand(true), 0, min)``, added to the scores;
- torchlib's ``_safe_softmax``, ``Where(IsNaN(Softmax(s)), 0, Softmax(s))``, which sets the rows a mask
  removed entirely to zero.

On BERT-base at batch 32 that is an ``Add``, an ``IsNaN`` and a ``Where`` over each layer's
``[32, 12, 128, 128]`` scores: 3 % of ONNX Runtime's time on an H100 (docs/gpu/ortvc.md, round 4). The rules:

- ``WhereConstantCondition``: ``Where(Expand(c, shape), a, b)`` with ``c`` a constant all true (all
  false) becomes ``Expand(a, shape)`` (``b``), ``a`` broadcast to the shape ``Where`` gave: the same
  values, exactly;
- ``SoftmaxOfAddedZeros``: ``Add(s, z)`` whose only readers are ``Softmax`` nodes, with ``z`` zeros
  (constant, or a constant expanded) that leave ``s``'s shape as it is, becomes ``s``: ``s + 0.0``
  differs from ``s`` only in the sign of a zero, and ``exp`` gives 1 for both;
- ``SafeSoftmaxOfScores``: ``Where(IsNaN(p), 0, p)`` with ``p = Softmax(s)`` becomes ``p`` when ``s`` is
  computed from ``MatMul`` products by data movement and finite constants alone, no mask: a row of
  ``p`` is NaN only when ``s``'s row holds a NaN, an infinity, or only -inf, which finite scores
  cannot. Where the scores are finite the file computes the same bits; where an overflow makes them
  infinite it gives NaN, as PyTorch's fused attention does, instead of zeros.

Each holds for every batch (the shapes compared are the static ones, batch symbol included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

if TYPE_CHECKING:
    from onnxscript.rewriter.pattern import RewriteRule

__all__ = ["attention_rules"]

# What may lie between the attention product and its Softmax: data movement, and arithmetic with a constant
_MOVES = frozenset({"Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze"})
_ARITHMETIC = frozenset({"Mul", "Div", "Add", "Sub"})
_PRODUCTS = frozenset({"MatMul", "Gemm"})


def attention_rules() -> list[RewriteRule]:
    """The rules, in the order they are tried."""
    from onnxscript.rewriter.pattern import RewriteRule

    return [
        RewriteRule(_where_expanded, _expanded_branch, _constant_condition, name="WhereConstantCondition"),
        *RewriteRule(_add_expanded, _identity, _zeros_before_softmax, name="SoftmaxOfAddedZeros",
                     remove_nodes=False).commute(),  # one mask is added in every layer
        *RewriteRule(_add, _identity, _zeros_before_softmax, name="SoftmaxOfAddedZeroConstant").commute(),
        RewriteRule(_safe_softmax, _softmax_itself, _finite_scores, name="SafeSoftmaxOfScores"),
    ]


def _where_expanded(op: Any, c: ir.Value, shape: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    return op.Where(op.Expand(c, shape), a, b)


def _constant_condition(context: Any, c: ir.Value, a: ir.Value, b: ir.Value, **_: Any) -> bool:
    """``c`` a constant boolean tensor all one value, ``a`` and ``b`` constants."""
    return _chosen(c, a, b) is not None


def _chosen(c: ir.Value, a: ir.Value, b: ir.Value) -> np.ndarray | None:
    """The branch ``Where`` takes everywhere, broadcast to the shape of ``c``, ``a`` and ``b`` together."""
    cond, left, right = (_const(v) for v in (c, a, b))
    if cond is None or left is None or right is None or cond.dtype != np.bool_ or cond.size == 0:
        return None
    if not (cond.all() or not cond.any()):
        return None
    try:
        shape = np.broadcast_shapes(cond.shape, left.shape, right.shape)
    except ValueError:
        return None
    return np.ascontiguousarray(np.broadcast_to(left if cond.all() else right, shape))


def _expanded_branch(op: Any, c: ir.Value, shape: ir.Value, a: ir.Value, b: ir.Value, **_: Any) -> ir.Value:
    chosen = _chosen(c, a, b)
    assert chosen is not None  # the condition checked it
    return op.Expand(op.initializer(ir.tensor(chosen), name=f"{a.name or 'where'}_everywhere"), shape)


def _add_expanded(op: Any, s: ir.Value, z: ir.Value, shape: ir.Value) -> ir.Value:
    return op.Add(s, op.Expand(z, shape), _outputs=["added"])


def _add(op: Any, s: ir.Value, z: ir.Value) -> ir.Value:
    return op.Add(s, z, _outputs=["added"])


def _identity(op: Any, s: ir.Value, **_: Any) -> ir.Value:
    return op.Identity(s)


def _softmax_itself(op: Any, p: ir.Value, **_: Any) -> ir.Value:
    return op.Identity(p)


def _zeros_before_softmax(context: Any, s: ir.Value, z: ir.Value, added: ir.Value, **_: Any) -> bool:
    """``z`` constant float zeros, ``added`` read by Softmax nodes alone (not a graph output) and shaped as ``s``."""
    zeros = _const(z)
    if zeros is None or not np.issubdtype(zeros.dtype, np.floating) or np.any(zeros != 0):
        return False
    uses = added.uses()
    if not uses or added.is_graph_output() or any(node.op_type != "Softmax" for node, _ in uses):
        return False
    return s.shape is not None and added.shape is not None and list(s.shape) == list(added.shape) and \
        s.dtype == added.dtype


def _safe_softmax(op: Any, p: ir.Value, zero: ir.Value) -> ir.Value:
    return op.Where(op.IsNaN(p), zero, p)


def _finite_scores(context: Any, p: ir.Value, zero: ir.Value, **_: Any) -> bool:
    """``zero`` a constant 0, ``p`` a Softmax of scores that :func:`_from_products` traces to MatMuls."""
    value = _const(zero)
    producer = p.producer()
    if value is None or value.size != 1 or value.reshape(-1)[0] != 0:
        return False
    return producer is not None and producer.op_type == "Softmax" and _from_products(producer.inputs[0], 12)


def _from_products(value: ir.Value | None, depth: int) -> bool:
    """``value`` is computed from MatMul/Gemm outputs by data movement and arithmetic with finite
    constants, within ``depth`` nodes: nothing that can carry a mask."""
    node = value.producer() if value is not None else None
    if node is None or depth == 0:
        return False
    if node.op_type in _PRODUCTS:
        return True
    if node.op_type in _MOVES:
        return _from_products(node.inputs[0], depth - 1)
    if node.op_type not in _ARITHMETIC:
        return False
    constants = [_const(v) for v in node.inputs]
    if len(constants) != 2 or sum(c is not None for c in constants) != 1:
        return False
    index = 0 if constants[1] is not None else 1  # the data's input
    constant = constants[1 - index]
    assert constant is not None
    if not np.isfinite(constant).all() or (node.op_type == "Div" and (index == 1 or np.any(constant == 0))):
        return False  # a constant over the data, or over zero, can be infinite
    return _from_products(node.inputs[index], depth - 1)


def _const(value: ir.Value | None) -> np.ndarray | None:
    tensor = ir.convenience.get_const_tensor(value) if value is not None else None
    return None if tensor is None else tensor.numpy()
