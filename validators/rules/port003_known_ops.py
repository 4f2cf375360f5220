"""PORT003 known-op."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["DEPRECATED_REPLACEMENTS", "KnownOp"]

# What to use instead of an op the schema marks deprecated (``OpSchema.deprecated``):
# ``onnx.defs.has`` still answers True for them, but runtimes have no kernel.
# op -> (replacement, how to replace it)
DEPRECATED_REPLACEMENTS: dict[str, tuple[str, str]] = {
    "Scatter": ("ScatterElements", "same inputs and attributes"),
    "Upsample": ("Resize", "Upsample's scales become Resize's third input, roi left empty"),
    "GroupNormalization": ("a decomposition", "Reshape, InstanceNormalization, Mul and Add at opset 18; "
                           "GroupNormalization-21 takes per-channel scale and bias"),
}


class KnownOp(Rule):
    """Every default-domain op exists in the target opset's schema and is not deprecated there.

    *Why*: ``onnx.checker`` accepts ops it does not know in custom domains, and a
    misspelt or too-new op fails only when a runtime loads the model. This rule asks
    the schema registry: ``onnx.defs.has(op, 18, "")``, and rejects ops whose schema at
    that opset is marked deprecated (``Scatter``, ``Upsample``, ``GroupNormalization``-18):
    the registry still knows them, runtimes do not.

    *Bad*: a node ``op_type: "Gelu"`` under opset 18 (``Gelu`` arrived in opset 20),
    ``op_type: "MyCustomOp"`` in the default domain, or ``Upsample`` (removed in opset 10).

    *Fix*: export at the target opset so the exporter decomposes ops newer than it;
    replace unknown ops with standard ones and deprecated ones with what the message names
    (``Scatter`` -> ``ScatterElements``, ``Upsample`` -> ``Resize``).
    """

    id = "PORT003"
    name = "known-op"
    severity = Severity.ERROR
    message = "op '{op}' {status}"
    hint = "export at the target opset (newer ops are then decomposed) or replace the op"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        opset = ctx.policy.opset
        for scope, index, node in ctx.nodes():
            if node.domain not in ("", "ai.onnx"):
                continue
            if not onnx.defs.has(node.op_type, opset, ""):
                yield self.finding(ctx.location(scope, index, node), op=node.op_type,
                                   status=f"does not exist in ai.onnx opset {opset}")
            elif onnx.defs.get_schema(node.op_type, opset, "").deprecated:
                yield self._deprecated(ctx.location(scope, index, node), node.op_type, opset)

    def _deprecated(self, loc: Location, op: str, opset: int) -> Finding:
        since = onnx.defs.get_schema(op, opset, "").since_version
        instead, how = DEPRECATED_REPLACEMENTS.get(op, ("the op its documentation names", "see onnx.defs"))
        status = f"is deprecated in ai.onnx opset {opset} (since opset {since}): use {instead}"
        return self.finding(loc, hint=f"replace {op} with {instead} ({how})", op=op, status=status)
