"""New initializers for the exporter's passes: one way to turn an array into a graph constant."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

__all__ = ["add_initializer"]


def add_initializer(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    """Register ``array`` as an initializer named ``name`` (``name_1``, ``name_2``... when the name is
    taken, e.g. by a weight two groups share), typed and shaped from the array."""
    base, count = name, 0
    while name in graph.initializers:
        count += 1
        name = f"{base}_{count}"
    value = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
                     const_value=ir.tensor(array, name=name))
    graph.register_initializer(value)
    return value
