"""PORT013 allowed-dtypes."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Location, Severity
from portable.policy import dtype_name
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["AllowedDtypes"]


class AllowedDtypes(Rule):
    """Element types are in the policy's list (float32, float16, bfloat16, int64, int32,
    int8, uint8, bool by default).

    Checked on graph inputs, outputs and value_info, initializers, tensor attributes
    (``Constant``, ``ConstantOfShape``) and ``Cast`` targets.

    *Why*: float64 is slow or missing on GPUs and NPUs; strings and complex numbers
    are unsupported by most accelerators.

    *Bad*: a ``float64`` input because a NumPy array was used as an example input;
    ``Cast(to=DOUBLE)`` from ``x.double()``.

    *Fix*: ``model.float()`` and float32 example inputs; keep strings out of the graph.
    """

    id = "PORT013"
    name = "allowed-dtypes"
    severity = Severity.WARNING
    message = "{what} has element type {dtype}, outside the policy's list"
    hint = "convert to float32 (model.float(), float32 example inputs) or allow the type in the policy"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        allowed = set(ctx.policy.allowed_dtypes)
        for loc, what, elem in self._typed(ctx):
            name = dtype_name(elem)
            if elem != onnx.TensorProto.UNDEFINED and name not in allowed:
                yield self.finding(loc, what=what, dtype=name)

    def _typed(self, ctx: ModelContext) -> Iterator[tuple[Location, str, int]]:
        seen: set[str] = set()
        for scope in ctx.scopes:
            body = scope.body
            if isinstance(body, onnx.GraphProto):
                for value in (*body.input, *body.output, *body.value_info):
                    if value.type.HasField("tensor_type") and value.name not in seen:
                        seen.add(value.name)
                        yield Location(graph=scope.path, value=value.name), f"value '{value.name}'", value.type.tensor_type.elem_type
                for tensor in body.initializer:
                    if tensor.name not in seen:
                        seen.add(tensor.name)
                        yield Location(graph=scope.path, value=tensor.name), f"initializer '{tensor.name}'", tensor.data_type
            for index, node in enumerate(body.node):
                yield from self._node_types(ctx, scope, index, node)

    @staticmethod
    def _node_types(ctx, scope, index, node) -> Iterator[tuple[Location, str, int]]:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield ctx.location(scope, index, node), f"attribute '{attr.name}' of {node.op_type}", attr.t.data_type
            elif node.op_type == "Cast" and attr.name == "to":
                yield ctx.location(scope, index, node), "Cast target", attr.i
