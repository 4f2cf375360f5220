"""What the QDQ rules (PORT030-PORT032) share: the model's QuantizeLinear/DequantizeLinear nodes,
the element type of the integer tensor each one makes or reads, and its scale's constant values.

A Q/DQ node is matched by op type in any domain (``com.microsoft`` has both: ONNX Runtime's
contrib ops for 16- and 4-bit quantization), so that PORT030 can name the contrib ones as such.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from portable.validators.context import ModelContext
from portable.validators.graphs import GraphScope

__all__ = ["DEQUANTIZE", "EIGHT_BIT", "QUANTIZE", "QdqNode", "constant_array", "element_types", "qdq_nodes",
           "quantized_type", "scale_shape"]

QUANTIZE, DEQUANTIZE = "QuantizeLinear", "DequantizeLinear"
EIGHT_BIT = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.UINT8})
_DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass(frozen=True)
class QdqNode:
    """One Q or DQ node where it stands in the model."""

    scope: GraphScope
    index: int
    node: onnx.NodeProto

    @property
    def standard(self) -> bool:
        return self.node.domain in _DEFAULT_DOMAINS

    @property
    def quantize(self) -> bool:
        return self.node.op_type == QUANTIZE

    @property
    def label(self) -> str:
        domain = "" if self.standard else f"{self.node.domain}::"
        return f"{domain}{self.node.op_type} '{self.node.name or self.node.output[0]}'"


def qdq_nodes(ctx: ModelContext) -> Iterator[QdqNode]:
    """Every QuantizeLinear and DequantizeLinear, of any domain, in every graph of the model."""
    for scope, index, node in ctx.nodes():
        if node.op_type in (QUANTIZE, DEQUANTIZE):
            yield QdqNode(scope, index, node)


def element_types(ctx: ModelContext) -> dict[str, int]:
    """Value name -> element type, from what the file declares: inputs, outputs, value_info,
    initializers and ``Constant`` values (no inference is run)."""
    types: dict[str, int] = {}
    for scope in ctx.scopes:
        body = scope.body
        if isinstance(body, onnx.GraphProto):
            for value in (*body.input, *body.output, *body.value_info):
                if value.type.HasField("tensor_type"):
                    types[value.name] = value.type.tensor_type.elem_type
            types.update((t.name, t.data_type) for t in body.initializer)
        for node in body.node:
            if node.op_type == "Constant" and node.output:
                types.update((node.output[0], a.t.data_type) for a in node.attribute if a.name == "value")
    return types


def _attribute(node: onnx.NodeProto, name: str) -> onnx.AttributeProto | None:
    return next((a for a in node.attribute if a.name == name), None)


def quantized_type(qdq: QdqNode, types: dict[str, int]) -> int | None:
    """The element type of the integer side: a Q's output (its ``output_dtype``, else its zero
    point's type, else uint8, the spec's default), a DQ's input (else its zero point's type)."""
    node = qdq.node
    zero_point = node.input[2] if len(node.input) > 2 and node.input[2] else None
    if qdq.quantize:
        declared = _attribute(node, "output_dtype")
        if declared is not None and declared.i:
            return int(declared.i)
        found = types.get(node.output[0]) or (types.get(zero_point) if zero_point else None)
        return found or onnx.TensorProto.UINT8
    return types.get(node.input[0]) or (types.get(zero_point) if zero_point else None)


def constant_array(ctx: ModelContext, scope: GraphScope, name: str) -> np.ndarray | None:
    """The value of a small constant (an initializer held in the proto, or a ``Constant``); None
    for anything else (a computed value, a large weight a lean parse left in the file, or a tensor
    onnx cannot read: an UNDEFINED type or a payload that does not match its dims, which PORT011
    reports)."""
    try:
        return _constant_array(ctx, scope, name)
    except (ValueError, TypeError, KeyError, IndexError):
        return None


def _constant_array(ctx: ModelContext, scope: GraphScope, name: str) -> np.ndarray | None:
    body = scope.body
    if isinstance(body, onnx.GraphProto):
        for index, tensor in enumerate(body.initializer):
            if tensor.name == name:
                return None if ctx.stripped(scope, index) else numpy_helper.to_array(tensor)
    for node in body.node:
        if node.op_type == "Constant" and node.output and node.output[0] == name:
            value = _attribute(node, "value")
            return numpy_helper.to_array(value.t) if value is not None else None
    return None


def scale_shape(ctx: ModelContext, scope: GraphScope, name: str) -> tuple[int, ...] | None:
    """The dims of a scale: an initializer's, a ``Constant``'s, or declared in value_info."""
    body = scope.body
    if isinstance(body, onnx.GraphProto):
        for tensor in body.initializer:
            if tensor.name == name:
                return tuple(tensor.dims)
        for value in (*body.value_info, *body.input):
            if value.name == name and value.type.tensor_type.HasField("shape"):
                dims = value.type.tensor_type.shape.dim
                return tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
    for node in body.node:
        if node.op_type == "Constant" and node.output and node.output[0] == name:
            value = _attribute(node, "value")
            return tuple(value.t.dims) if value is not None else None
    return None
