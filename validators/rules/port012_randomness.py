"""PORT012 no-randomness."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Finding, Severity
from portable.validators.context import RANDOM_OPS, ModelContext
from portable.validators.rules.base import Rule

__all__ = ["NoRandomness"]


class NoRandomness(Rule):
    """No random-number ops: ``RandomNormal``, ``RandomUniform``, their ``...Like`` forms,
    ``Bernoulli``, ``Multinomial``.

    *Why*: an inference graph should be deterministic; random ops usually mean a
    training-mode layer (dropout) was exported, and runtimes seed them differently.

    *Bad*: exporting a model in ``train()`` mode with ``nn.Dropout``; ``torch.randn_like(x)``
    in ``forward``.

    *Fix*: call ``model.eval()`` before export; pass noise in as an input.
    """

    id = "PORT012"
    name = "no-randomness"
    severity = Severity.ERROR
    message = "random op '{op}' makes the model non-deterministic"
    hint = "export in eval() mode; pass random values as inputs instead"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        for scope, index, node in ctx.nodes():
            if node.domain in ("", "ai.onnx") and node.op_type in RANDOM_OPS:
                yield self.finding(ctx.location(scope, index, node), op=node.op_type)
