"""PORT004 no-control-flow."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Finding, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["CONTROL_FLOW_OPS", "NoControlFlow"]

CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})


class NoControlFlow(Rule):
    """No dynamic control flow: ``If``, ``Loop``, ``Scan``, ``SequenceMap``.

    *Why*: compilers for NPUs and many GPU backends need one static dataflow graph;
    a branch or loop decided at run time either falls back to the CPU or fails to
    compile, and it hides which shapes flow through the model.

    *Bad*: ``torch.cond(x.sum() > 0, f, g, (x,))`` exports to ``If``; a Python loop
    over a data-dependent count exports to ``Loop``.

    *Fix*: make the branch static (decide it in Python from configuration, not from
    tensor values), compute both sides and select with ``torch.where``, or unroll
    fixed-count loops.
    """

    id = "PORT004"
    name = "no-control-flow"
    severity = Severity.ERROR
    message = "dynamic control flow op '{op}'"
    hint = "compute both branches and select with torch.where, or unroll the loop; decide branches from config, not tensors"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        for scope, index, node in ctx.nodes():
            if node.domain in ("", "ai.onnx") and node.op_type in CONTROL_FLOW_OPS:
                yield self.finding(ctx.location(scope, index, node), op=node.op_type)
