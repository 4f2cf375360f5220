"""torchlib's ``as_strided`` where it is a view of the whole tensor, found from the probes.

``F.adaptive_avg_pool2d(x, 1)`` decomposes (``run_decompositions``) into ``mean`` and an ``aten.as_strided`` of
its ``[batch, C, 1, 1]`` result with that result's own strides; torchlib writes every ``as_strided`` as
``Gather(Reshape(x, [-1]), indices)``, the indices computed from ``Shape(x)`` (``Range`` over the batch,
``Mul``, ``Unsqueeze``, ``Add``). That Gather is the identity: each element is read from where it already was.
It costs a pass over the tensor and, worse, a chain of batch computations that ONNX Runtime's NHWC layout
leaves on the CPU, so CUDA graphs refuse the session (ConvNeXt-T on an H200: docs/gpu/ortvc2).

:func:`identity_gathers` evaluates the indices at each probe batch (1, 2 and 3: the shape analysis every probed
pass reads) with ONNX's reference evaluator and finds the Gathers whose indices are ``arange`` in the input's own
shape at every batch; :class:`~portable.exporters.passes.IdentityGatherPass` then reads ``x`` in their place.
The indices are batch-only computations, judged at three batch values like the folding of
:class:`~portable.exporters.passes.FoldBatchShapesPass`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from portable.exporters.probe import Probe

__all__ = ["identity_gathers"]

_MAX_CONE = 64  # nodes: torchlib's as_strided indices take about ten per dimension


def identity_gathers(model: ir.Model, found: Sequence[Probe]) -> list[tuple[ir.Node, ir.Value]]:
    """Each main-graph Gather that is ``x`` itself, with that ``x``."""
    if not found or any(p.error is not None for p in found):
        return []
    opset = model.opset_imports.get("", 18)
    return [(node, x) for node in model.graph if (x := _flattened(node)) is not None
            and _is_arange(node, x, found, opset)]


def _flattened(node: ir.Node) -> ir.Value | None:
    """``x`` when ``node`` is ``Gather(Reshape(x, [-1]), indices)`` on axis 0 and not a graph output."""
    if node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
        return None
    axis = node.attributes.get("axis")
    data = node.inputs[0]
    reshape = data.producer() if data is not None else None
    if (axis is not None and axis.as_int() != 0) or reshape is None or reshape.op_type != "Reshape":
        return None
    target = reshape.inputs[1] if len(reshape.inputs) > 1 else None
    shape = ir.convenience.get_const_tensor(target) if target is not None else None
    if shape is None or shape.numpy().reshape(-1).tolist() != [-1] or node.outputs[0].is_graph_output():
        return None
    return reshape.inputs[0]


def _is_arange(gather: ir.Node, x: ir.Value, found: Sequence[Probe], opset: int) -> bool:
    cone = _cone(gather.inputs[1])
    if cone is None or x.name is None or x.dtype != gather.outputs[0].dtype:
        return False
    for probe in found:
        dims = _static(probe.dims.get(x.name))
        if dims is None:
            return False
        indices = _evaluate(cone, gather.inputs[1], probe, opset)
        size = int(np.prod(dims, dtype=np.int64))
        if indices is None or tuple(indices.shape) != dims or not np.array_equal(indices.ravel(), np.arange(size)):
            return False
    return True


def _static(dims: tuple[int | str | None, ...] | None) -> tuple[int, ...] | None:
    """The dims when every one is an integer."""
    if dims is None or not all(isinstance(d, int) for d in dims):
        return None
    return tuple(int(d) for d in dims if isinstance(d, int))


def _cone(value: ir.Value | None) -> list[ir.Node] | None:
    """The nodes that compute ``value`` from ``Shape`` nodes and constants alone, producers first; None when it
    reads any other data (a graph input's values, a weight-sized computation) or takes more than _MAX_CONE nodes."""
    order: list[ir.Node] = []
    seen: set[int] = set()

    def visit(v: ir.Value | None) -> bool:
        if v is None or v.const_value is not None:
            return True
        node = v.producer()
        if node is None or node.domain not in ("", "ai.onnx") or len(order) > _MAX_CONE:
            return False
        if id(node) not in seen:
            seen.add(id(node))
            if node.op_type != "Shape" and not all(visit(i) for i in node.inputs):
                return False
            order.append(node)
        return True

    return order if value is not None and visit(value) else None


def _evaluate(cone: list[ir.Node], target: ir.Value | None, probe: Probe, opset: int) -> np.ndarray | None:
    """``target`` at the probe's batch: each ``Shape`` as the probe's dims of its input, the rest as written."""
    import onnx
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    nodes, weights = [], {}
    for node in cone:
        if node.op_type == "Shape":
            shape = _shape_of(node, probe)
            if shape is None:
                return None
            nodes.append(helper.make_node("Constant", [], [str(node.outputs[0].name)],
                                          value=numpy_helper.from_array(shape)))
            continue
        nodes.append(ir.serde.serialize_node(node))
        for value in node.inputs:
            if value is not None and value.const_value is not None and value.name:
                weights[value.name] = numpy_helper.from_array(value.const_value.numpy(), value.name)
    assert target is not None and target.name is not None
    out = helper.make_tensor_value_info(target.name, onnx.TensorProto.UNDEFINED, None)
    model = helper.make_model(helper.make_graph(nodes, "indices", [], [out], list(weights.values())),
                              opset_imports=[helper.make_opsetid("", opset)])
    try:
        outputs: Any = ReferenceEvaluator(model).run(None, {})  # a list, for output names None
        return np.asarray(outputs[0])
    except Exception:  # noqa: BLE001 - an index computation the evaluator cannot run is left as it is
        return None


def _shape_of(node: ir.Node, probe: Probe) -> np.ndarray | None:
    """``Shape(x)`` (its ``start``/``end`` applied) from the probe's dims of ``x``, when every one is known."""
    source = node.inputs[0]
    dims = _static(probe.dims.get(source.name)) if source is not None and source.name else None
    if dims is None:
        return None
    start, end = node.attributes.get("start"), node.attributes.get("end")
    picked = list(dims)[start.as_int() if start is not None else 0:end.as_int() if end is not None else None]
    return np.array(picked, dtype=np.int64)
