"""PORT002 default-domain-only."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["DefaultDomainOnly"]


class DefaultDomainOnly(Rule):
    """Only the policy's domains (``ai.onnx``) appear, and no model-local function is left.

    *Why*: custom domains (``com.microsoft``, ``pkg.onnxscript.torch_lib``, your own)
    run only where their kernels are registered; a local function must be expanded
    by every runtime, and some refuse. A portable model uses standard ops only.

    *Bad*: ``opset_import { domain: "com.microsoft" }``, a node ``com.microsoft::FusedGemm``,
    or ``functions { name: "Gelu_1" ... }``.

    *Fix*: inline functions and avoid contrib ops: ``onnx_ir.passes.common.InlinePass``
    or ``onnxscript.optimizer.optimize(model)``; export without ORT-specific fusions.
    """

    id = "PORT002"
    name = "default-domain-only"
    severity = Severity.ERROR
    message = "{what}"
    hint = "inline local functions and replace custom-domain ops with ai.onnx ops"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        allowed = set(ctx.policy.allowed_domains) | ({"ai.onnx"} if "" in ctx.policy.allowed_domains else set())
        for entry in ctx.proto.opset_import:
            if entry.domain not in allowed:
                yield self.finding(what=f"opset import of domain '{entry.domain}' (version {entry.version})")
        for function in ctx.proto.functions:
            yield self.finding(
                Location(graph=f"function:{function.domain}.{function.name}"),
                what=f"model-local function '{function.domain}.{function.name}' is left in the model",
            )
        for scope, index, node in ctx.nodes():
            if node.domain not in allowed and not scope.is_function:
                yield self.finding(ctx.location(scope, index, node),
                                   what=f"node uses op '{node.op_type}' of domain '{node.domain}'")
