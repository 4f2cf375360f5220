"""PORT003 known-op."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["KnownOp"]


class KnownOp(Rule):
    """Every default-domain op exists in the target opset's schema.

    *Why*: ``onnx.checker`` accepts ops it does not know in custom domains, and a
    misspelt or too-new op fails only when a runtime loads the model. This rule asks
    the schema registry: ``onnx.defs.has(op, 18, "")``.

    *Bad*: a node ``op_type: "Gelu"`` under opset 18 (``Gelu`` arrived in opset 20),
    or ``op_type: "MyCustomOp"`` in the default domain.

    *Fix*: export at the target opset so the exporter decomposes ops newer than it;
    replace unknown ops with standard ones.
    """

    id = "PORT003"
    name = "known-op"
    severity = Severity.ERROR
    message = "op '{op}' does not exist in ai.onnx opset {opset}"
    hint = "export at the target opset (newer ops are then decomposed) or replace the op"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        opset = ctx.policy.opset
        for scope, index, node in ctx.nodes():
            if node.domain in ("", "ai.onnx") and not onnx.defs.has(node.op_type, opset, ""):
                yield self.finding(ctx.location(scope, index, node), op=node.op_type, opset=opset)
