"""Hand-written passes of the second round (after the static-shape passes), where no library rule exists.

:class:`ElementwiseReshapePass` is a region rewrite (a DAG of elementwise nodes between two
``Reshape`` s), which a fixed-size pattern of onnxscript's rewriter cannot express;
:class:`FoldGatherElementsPass` folds what onnxscript's folder fails to evaluate.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from portable.exporters.initializers import add_initializer

__all__ = ["ELEMENTWISE", "ElementwiseReshapePass", "FoldGatherElementsPass"]

# Default-domain ops that compute each output element from the same element of each input.
ELEMENTWISE = frozenset({
    "Abs", "Add", "Cast", "Ceil", "Cos", "Div", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
    "IsInf", "IsNaN", "LeakyRelu", "Log", "Max", "Min", "Mish", "Mul", "Neg", "Not", "Pow", "Reciprocal", "Relu", "Round", "Selu",
    "Sigmoid", "Sign", "Sin", "Softplus", "Softsign", "Sqrt", "Sub", "Tan", "Tanh",
})


class ElementwiseReshapePass(ir.passes.InPlacePass):
    """Remove a ``Reshape`` pair around elementwise work: ``Reshape`` to ``y``, elementwise nodes
    (other inputs single-element constants), ``Reshape`` back to the first input's shape.

    GPT-2's ``Conv1D`` computes its MLP in 2-D (``Gemm``) and its GELU in 3-D between them.
    Elementwise nodes compute the same elements in the same order in either shape, so the
    result is exact; the shapes compared are the static ones (``batch`` expressions included),
    equal at every batch.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            if _is_op(node, "Reshape") and node.outputs[0].uses():
                region = _region(node)
                if region is not None:
                    _collapse(node, *region)
                    modified = True
        return ir.passes.PassResult(model, modified)


def _is_op(node: ir.Node, op_type: str) -> bool:
    return node.op_type == op_type and node.domain in ("", "ai.onnx")


def _region(reshape: ir.Node) -> tuple[list[ir.Node], list[ir.Node]] | None:
    """The elementwise nodes fed by ``reshape`` and the Reshapes back that end them, or None."""
    source, start = reshape.inputs[0], reshape.outputs[0]
    if source is None or not _static(source.shape) or not _static(start.shape) or start.is_graph_output():
        return None
    walked = _walk(start, source.shape)  # type: ignore[arg-type]
    if walked is None:
        return None
    inner, exits = walked
    values = {start, *(n.outputs[0] for n in inner)}
    rank = len(source.shape)  # type: ignore[arg-type]
    if not inner or not exits or not all(_operand(v, values, rank) for n in inner for v in n.inputs):
        return None
    return inner, exits


def _walk(start: ir.Value, back: ir.Shape) -> tuple[list[ir.Node], list[ir.Node]] | None:
    """Every node downstream of ``start`` up to Reshapes to ``back``: elementwise ones, then those
    Reshapes; None when something else uses a value on the way."""
    inner: list[ir.Node] = []
    exits: list[ir.Node] = []
    frontier = [start]
    while frontier:
        for use in frontier.pop().uses():
            node = use.node
            if node in inner or node in exits:
                continue
            if _is_op(node, "Reshape") and use.idx == 0 and node.outputs[0].shape == back:
                if node.outputs[0].is_graph_output():
                    return None  # the output keeps its name
                exits.append(node)
            elif _elementwise(node, start.shape):
                inner.append(node)
                frontier.append(node.outputs[0])
            else:
                return None
    return inner, exits


def _static(shape: ir.Shape | None) -> bool:
    return shape is not None and all(isinstance(d, int) or d.value is not None for d in shape)


def _elementwise(node: ir.Node, shape: ir.Shape | None) -> bool:
    """One output, of the region's shape, computed element by element; not a graph output."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in ELEMENTWISE or len(node.outputs) != 1:
        return False
    return node.outputs[0].shape == shape and not node.outputs[0].is_graph_output()


def _operand(value: ir.Value | None, region: set[ir.Value], rank: int) -> bool:
    """A region value, or a single-element constant that broadcasts the same in the new shape."""
    if value in region:
        return True
    tensor = ir.convenience.get_const_tensor(value) if value is not None else None
    return tensor is not None and tensor.size == 1 and len(tensor.shape) <= rank


def _collapse(reshape: ir.Node, inner: list[ir.Node], exits: list[ir.Node]) -> None:
    """Feed the region from the first Reshape's input and its results to the Reshapes' users."""
    source = reshape.inputs[0]
    assert source is not None
    ir.convenience.replace_all_uses_with(reshape.outputs[0], source)
    for node in inner:
        node.outputs[0].shape = source.shape
    for node in exits:
        region_value = node.inputs[0]
        assert region_value is not None
        ir.convenience.replace_all_uses_with(node.outputs[0], region_value, replace_graph_outputs=True)


class FoldGatherElementsPass(ir.passes.InPlacePass):
    """Fold a ``GatherElements`` of constants (BERT-style position ids sliced from a buffer).

    onnxscript's folder evaluates it with onnx's reference implementation, which fails past
    32 choices on an axis (``np.choose``'s limit, and a fallback that reshapes wrongly);
    ``np.take_along_axis`` is the operator's definition.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            folded = _gathered(node) if _is_op(node, "GatherElements") else None
            if folded is not None and not node.outputs[0].is_graph_output():
                _replace_by_constant(model.graph, node, folded)
                modified = True
        return ir.passes.PassResult(model, modified)


def _gathered(node: ir.Node) -> np.ndarray | None:
    tensors = [ir.convenience.get_const_tensor(v) if v is not None else None for v in node.inputs]
    if len(tensors) != 2 or tensors[0] is None or tensors[1] is None:
        return None
    data, indices = tensors[0].numpy(), tensors[1].numpy()
    attr = node.attributes.get("axis")
    axis = attr.as_int() if attr is not None else 0
    if data.ndim != indices.ndim or not -data.ndim <= axis < data.ndim:
        return None
    size = data.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        return None  # out of range: the runtime's error to raise, not the folder's
    return np.take_along_axis(data, np.where(indices < 0, indices + size, indices), axis=axis)


def _replace_by_constant(graph: ir.Graph, node: ir.Node, array: np.ndarray) -> None:
    output = node.outputs[0]
    value = add_initializer(graph, f"{output.name}_folded", array)  # GatherElements keeps its data's type
    ir.convenience.replace_all_uses_with(output, value)
    graph.remove(node, safe=True)
