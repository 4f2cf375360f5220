"""PORT006 no-data-dependent-shapes."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Finding, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["NoDataDependentShapes"]

# Ops whose output shape always depends on the values of their inputs.
ALWAYS = frozenset({"NonZero", "Unique", "Compress", "NonMaxSuppression", "StringSplit"})
# Ops whose output shape depends on an input's value: (op type, input index, input role).
WHEN_NOT_CONSTANT = {
    "TopK": (1, "K"),
    "HannWindow": (0, "size"),
    "HammingWindow": (0, "size"),
    "BlackmanWindow": (0, "size"),
    "MelWeightMatrix": (0, "num_mel_bins"),
}


class NoDataDependentShapes(Rule):
    """No op whose output shape depends on tensor values.

    *Why*: a static graph lets a compiler plan memory and kernels ahead of time.
    ``NonZero``, ``Unique``, ``Compress`` and ``NonMaxSuppression`` return as many
    elements as the data says; ``TopK`` with a computed ``K`` does the same.

    *Bad*: ``x[x > 0]`` (``NonZero`` + ``GatherND``), ``torch.unique(x)``,
    ``torch.topk(x, k=int(n.item()))``.

    *Fix*: keep shapes fixed: ``torch.where(mask, x, 0)`` instead of boolean
    indexing, a constant ``k``, a fixed maximum count with padding and a mask.
    """

    id = "PORT006"
    name = "no-data-dependent-shapes"
    severity = Severity.ERROR
    message = "{what}"
    hint = "keep output shapes fixed: use masks (torch.where) and constant sizes instead of value-dependent ones"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        consts = ctx.constants
        for scope, index, node in ctx.nodes():
            if node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type in ALWAYS:
                yield self.finding(ctx.location(scope, index, node),
                                   what=f"'{node.op_type}' has an output shape that depends on input values")
            elif node.op_type in WHEN_NOT_CONSTANT:
                i, role = WHEN_NOT_CONSTANT[node.op_type]
                if i < len(node.input) and node.input[i] and node.input[i] not in consts:
                    yield self.finding(ctx.location(scope, index, node, node.input[i]),
                                       what=f"'{node.op_type}' input {role} is not a constant, so its output shape depends on data")
