"""What the graph looks like with the batch fixed to a number.

Shape computations that only carry the batch (``Shape`` -> ``Gather``/``Slice`` ->
``Concat`` -> ``Reshape``) cannot be folded while the batch is a symbol. A probe
clones the model, fixes the batch (2, then 3), and lets ONNX shape inference and
onnxscript's constant folder resolve everything they can. Comparing two probes
tells which dims and shape inputs are static, and which vary with the batch only.
Large initializers become inputs of the clone, so no weight bytes are copied.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx_ir as ir

# One definition of the batch values, the folding size limit and the batch expressions,
# shared with the validators' analysis (PORT007/PORT009).
from portable.validators.shapes import BATCH_VALUES, SMALL_TENSOR, linear_dim

__all__ = ["BATCH_VALUES", "Dims", "Probe", "linear_dim", "probe", "probes"]


Dims = tuple[int | None, ...]


@dataclass(frozen=True)
class Probe:
    """Shapes of values and constant inputs of nodes (by node name) with the batch fixed to ``batch``."""

    batch: int | None
    shapes: dict[str | None, Dims] = field(default_factory=dict)
    inputs: dict[tuple[str | None, int], np.ndarray] = field(default_factory=dict)


def probes(model: ir.Model, symbol: str | None) -> tuple[Probe, ...]:
    """Two probes (batch 2 and 3) for a dynamic batch; one for a static model."""
    if symbol is None:
        return (probe(model, None, None),)
    return tuple(probe(model, symbol, b) for b in BATCH_VALUES)


def probe(model: ir.Model, symbol: str | None, batch: int | None) -> Probe:
    proto = ir.to_proto(_skeleton(model, symbol, batch))
    inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    folded = ir.from_proto(inferred)
    from onnxscript.optimizer import fold_constants

    fold_constants(folded, input_size_limit=SMALL_TENSOR)
    shapes = {v.name: _dims(v.type.tensor_type.shape) for v in (*inferred.graph.value_info, *inferred.graph.output)
              if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}
    shapes.update({v.name: tuple(d if isinstance(d, int) else None for d in v.shape)
                   for v in _values(folded.graph) if v.shape is not None and v.name})
    inputs = {(node.name, i): value.const_value.numpy()
              for node in folded.graph for i, value in enumerate(node.inputs)
              if value is not None and value.const_value is not None and value.const_value.size <= 64}
    return Probe(batch, shapes, inputs)


def _dims(shape: onnx.TensorShapeProto) -> Dims:
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in shape.dim)


def _values(graph: ir.Graph):
    yield from graph.inputs
    for node in graph:
        yield from node.outputs


def _skeleton(model: ir.Model, symbol: str | None, batch: int | None) -> ir.Model:
    """A clone with the batch fixed and large initializers turned into graph inputs."""
    clone = model.clone()
    graph = clone.graph
    for name, value in list(graph.initializers.items()):
        tensor = value.const_value
        if tensor is not None and tensor.size > SMALL_TENSOR:
            graph.initializers.pop(name)
            value.shape = value.shape or ir.Shape(tensor.shape.numpy())
            value.dtype = value.dtype or tensor.dtype
            value.const_value = None
            graph.inputs.append(value)
    for node in graph:
        node.metadata_props.clear()
    if batch is not None:
        for value in (*graph.inputs, *graph.outputs):
            if value.shape is not None and value.shape.rank() and str(value.shape[0]) == symbol:
                value.shape = ir.Shape([batch, *value.shape[1:]])
    return clone
