"""Fusions that leave ONNX Runtime's outputs bit for bit as they were, made in the file.

Unlike :mod:`portable.exporters.rewrites`, these change the arithmetic another runtime is asked
for, and tests/exporters/test_fusions.py checks ORT's bits stay the same:
- ``conv(x, w) * g`` (one factor per output channel) becomes ``conv(x, w * g)``: ORT's default graph
  optimizations make the same fusion at load (``ConvMulFusion``, basic level) from the same float32
  products, so the fused file runs what ORT ran anyway (:func:`runtime_fusion_rules`);
- MatMuls of one input by constant weights (attention's q/k/v) become one MatMul by the weights
  side by side and a ``Split`` (:class:`MergeSharedMatMulsPass`): each output column is the same
  dot product, which ORT's CPU kernels compute in the same order either way; one wider product is
  what GPU runtimes prefer; then their biases, added to each part, are added once before the
  ``Split`` (:class:`MergeSplitBiasesPass`: elementwise, the same additions, exact everywhere).
- the exact GELU ``x * (0.5 * (1 + erf(x / sqrt2)))``, as PyTorch's exporter writes it, becomes
  ``(x * (1 + erf(x / sqrt2))) * 0.5`` (:func:`gelu_half_inside` -> :func:`gelu_in_ort_order`): the
  order ONNX Runtime's ``GeluFusion`` recognises (its "pattern 2", onnxruntime
  ``core/optimizer/gelu_fusion.cc``), so that ORT runs one Gelu kernel instead of five elementwise
  passes (on the H200, BERT-base and ConvNeXt-T at batch 32: docs/gpu/ortvc.md). Halving is exact in
  binary floating point, so the file computes the same numbers for every float32/float16 ``x`` that is
  neither subnormal nor within a factor 2 of the largest finite value.
Each holds for every batch: it reads only constant weights and static inner dims.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from portable.exporters.initializers import add_initializer

if TYPE_CHECKING:
    from onnxscript.rewriter.pattern import RewriteRule

__all__ = ["MergeSharedMatMulsPass", "MergeSplitBiasesPass", "gelu_constants", "gelu_half_inside", "gelu_in_ort_order",
           "runtime_fusion_rules", "shaped_like"]


def runtime_fusion_rules() -> list[RewriteRule]:
    """The rules, in the order they are tried."""
    from onnxscript.rewriter.pattern import RewriteRule

    return [
        *RewriteRule(_conv_mul, _scaled_conv, _per_channel, name="ConvMulFusion").commute(),
        *RewriteRule(_conv_mul_no_bias, _scaled_conv, _per_channel, name="ConvMulFusionNoBias").commute(),
        *RewriteRule(gelu_half_inside, gelu_in_ort_order, gelu_constants, name="GeluInOrtOrder").commute(),
    ]


def gelu_half_inside(op: Any, x: ir.Value, root2: ir.Value, one: ir.Value, half: ir.Value) -> ir.Value:
    """PyTorch's exact GELU (torchlib's ``aten_gelu``, approximate="none"): ``x * (0.5 * (erf(x / √2) + 1))``."""
    return op.Mul(x, op.Mul(half, op.Add(op.Erf(op.Div(x, root2)), one)))


def gelu_in_ort_order(op: Any, x: ir.Value, root2: ir.Value, one: ir.Value, half: ir.Value) -> ir.Value:
    """``(x * (erf(x / √2) + 1)) * 0.5``: the same constants, the halving last."""
    scaled = op.Div(x, root2)
    erf = op.Erf(scaled)
    plus = op.Add(erf, one)
    product = op.Mul(x, plus)
    out = op.Mul(product, half)
    shaped_like(x, (scaled, erf, plus, product, out), (root2, one, half))
    return out


def shaped_like(x: ir.Value, values: tuple[ir.Value, ...], constants: tuple[ir.Value, ...]) -> None:
    """Give the new element-wise values ``x``'s shape and type (one-element constants no wider than ``x``
    broadcast to it). Without them, shape inference later names a fresh batch symbol (``unk__17``) on
    them, and targets of fixed sizes call those nodes unfixed (docs/zoo.md's coreml and nnapi columns)."""
    if x.shape is None or any(c.shape is None or len(c.shape) > len(x.shape) for c in constants):
        return
    for value in values:
        value.shape, value.type = ir.Shape(list(x.shape)), x.type


# ORT's GeluFusion takes √2 or the 1.4142099618911743 some BERT exports carry (gelu_fusion.cc)
_ROOT2 = (float(np.sqrt(np.float32(2.0))), 1.4142099618911743)


def gelu_constants(context: Any, x: ir.Value, root2: ir.Value, one: ir.Value, half: ir.Value, **_: Any) -> bool:
    """Scalar (or one-element) float32/float16 constants of the exact GELU: √2, 1 and 0.5."""
    wanted = ((root2, _ROOT2), (one, (1.0,)), (half, (0.5,)))
    for value, allowed in wanted:
        tensor = ir.convenience.get_const_tensor(value)
        if tensor is None or tensor.dtype not in (ir.DataType.FLOAT, ir.DataType.FLOAT16) or tensor.size != 1:
            return False
        got = float(tensor.numpy().reshape(-1)[0])
        if not any(abs(got - a) <= 1e-6 * abs(a) for a in allowed):
            return False
    return x.dtype in (ir.DataType.FLOAT, ir.DataType.FLOAT16)


def _conv_mul(op: Any, x: ir.Value, w: ir.Value, b: ir.Value, g: ir.Value) -> ir.Value:
    return op.Mul(op.Conv(x, w, b, _allow_other_attributes=True, _outputs=["conv_out"]), g)


def _conv_mul_no_bias(op: Any, x: ir.Value, w: ir.Value, g: ir.Value) -> ir.Value:
    return op.Mul(op.Conv(x, w, _allow_other_attributes=True, _outputs=["conv_out"]), g)


def _per_channel(context: Any, x: ir.Value, w: ir.Value, g: ir.Value, conv_out: ir.Value,
                 b: ir.Value | None = None, **_: Any) -> bool:
    """Constant float32 weights (and bias), a Conv output used by this Mul alone, and ``g`` one factor
    per output channel (:func:`_channel_factors`)."""
    weight = ir.convenience.get_const_tensor(w)
    factor = ir.convenience.get_const_tensor(g)
    if weight is None or factor is None or weight.dtype != ir.DataType.FLOAT or factor.dtype != ir.DataType.FLOAT:
        return False  # float32 only: the bits are checked against ORT for it
    if b is not None and ir.convenience.get_const_tensor(b) is None:
        return False
    if len(conv_out.uses()) != 1 or conv_out.is_graph_output():
        return False
    channels = weight.shape[0]  # a constant's dims are ints
    return isinstance(channels, int) and _channel_factors(factor.numpy(), len(weight.shape), channels) is not None


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


class MergeSharedMatMulsPass(ir.passes.InPlacePass):
    """``MatMul(x, w1)``, ``MatMul(x, w2)``... (two or more, constant 2-D float32 weights of one inner
    size) -> ``Split(MatMul(x, concat(w1, w2, ...)))``; outputs that are graph outputs stay."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for value in list(_all_values(model.graph)):
            group = _matmuls_of(value)
            if len(group) >= 2:
                _merge(model.graph, value, group)
                modified = True
        if modified:
            model.graph.sort()  # the Split went before the group's first user of x, maybe not its first in order
        return ir.passes.PassResult(model, modified)


def _all_values(graph: ir.Graph) -> list[ir.Value]:
    return [*graph.inputs, *(v for node in graph for v in node.outputs)]


def _matmuls_of(x: ir.Value) -> list[ir.Node]:
    """The MatMuls with ``x`` as first input and a constant 2-D float32 second input of their own (the
    type whose bits are checked against ORT), all of one inner size."""
    found = []
    for node, index in x.uses():
        other = node.inputs[1] if len(node.inputs) == 2 else None
        weight = ir.convenience.get_const_tensor(other) if other is not None else None
        if (node.op_type == "MatMul" and node.domain in ("", "ai.onnx") and index == 0 and other is not x
                and weight is not None and weight.dtype == ir.DataType.FLOAT and len(weight.shape) == 2
                and not node.outputs[0].is_graph_output()
                and other is not None and len(other.uses()) == 1):  # a weight used elsewhere too would be stored twice
            found.append((node, weight))
    if not found:
        return []
    inner = found[0][1].shape[0]
    return [n for n, w in found if w.shape[0] == inner]


def _merge(graph: ir.Graph, x: ir.Value, group: list[ir.Node]) -> None:
    weights = [n.inputs[1].const_value.numpy() for n in group]  # type: ignore[union-attr]
    names = [n.inputs[1].name or "w" for n in group]  # type: ignore[union-attr]
    merged = add_initializer(graph, "__".join(names), np.concatenate(weights, axis=1))
    sizes = add_initializer(graph, "__".join(names) + "__split", np.array([w.shape[1] for w in weights], dtype=np.int64))
    first = group[0]
    product = ir.node("MatMul", [x, merged], name=first.name, metadata_props=dict(first.metadata_props))
    split = ir.node("Split", [product.outputs[0], sizes], attributes={"axis": -1}, num_outputs=len(group),
                    name=f"{first.name}.split", metadata_props=dict(first.metadata_props))
    old_shape = first.outputs[0].shape
    if old_shape is not None and len(old_shape):
        product.outputs[0].shape = ir.Shape([*list(old_shape)[:-1], sum(w.shape[1] for w in weights)])
    product.outputs[0].type = first.outputs[0].type
    graph.insert_before(first, [product, split])
    for node, out in zip(group, split.outputs):
        old = node.outputs[0]
        name, out.shape, out.type = old.name, old.shape, old.type
        old.name = None
        out.name = name
        ir.convenience.replace_all_uses_with(old, out)
        graph.remove(node, safe=True)


class MergeSplitBiasesPass(ir.passes.InPlacePass):
    """``Split(y)`` along the last axis whose every part goes only to an ``Add`` of a constant 1-D bias
    of its own width -> ``Split(Add(y, concat(biases)))``: the same elementwise additions, one node."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            adds = _bias_adds(node)
            if adds is not None:
                _hoist(model.graph, node, adds)
                modified = True
        return ir.passes.PassResult(model, modified)


def _last_axis_split(node: ir.Node) -> bool:
    if node.op_type != "Split" or node.domain not in ("", "ai.onnx") or not node.inputs or node.inputs[0] is None:
        return False
    shape, axis = node.inputs[0].shape, node.attributes.get("axis")
    last = -1 if shape is None else len(shape) - 1
    return axis is not None and axis.as_int() in (-1, last)


def _bias_adds(split: ir.Node) -> list[tuple[ir.Node, np.ndarray]] | None:
    """Each part's one Add and its bias, when every part has one (else None)."""
    if not _last_axis_split(split):
        return None
    found = []
    for part in split.outputs:
        uses = list(part.uses())
        if len(uses) != 1 or part.is_graph_output() or part.shape is None or part.dtype is None:
            return None
        add, index = uses[0]
        other = add.inputs[1 - index] if add.op_type == "Add" and add.domain in ("", "ai.onnx") else None
        bias = ir.convenience.get_const_tensor(other) if other is not None else None
        width = part.shape[len(part.shape) - 1] if len(part.shape) else None
        if bias is None or bias.dtype != part.dtype or list(bias.shape) != [width] or add.outputs[0].is_graph_output():
            return None
        found.append((add, bias.numpy()))
    return found


def _hoist(graph: ir.Graph, split: ir.Node, adds: list[tuple[ir.Node, np.ndarray]]) -> None:
    source = split.inputs[0]
    assert source is not None
    bias = add_initializer(graph, "__".join(a.inputs[1].name or "b" for a, _ in adds),  # type: ignore[union-attr]
                        np.concatenate([b for _, b in adds]))
    add = ir.node("Add", [source, bias], name=adds[0][0].name, metadata_props=dict(adds[0][0].metadata_props))
    add.outputs[0].shape, add.outputs[0].type = source.shape, source.type
    graph.insert_before(split, add)
    split.replace_input_with(0, add.outputs[0])
    for (old_add, _), part in zip(adds, split.outputs):
        result = old_add.outputs[0]
        name = result.name
        result.name = None
        ir.convenience.replace_all_uses_with(result, part)
        part.name = name
        graph.remove(old_add, safe=True)
