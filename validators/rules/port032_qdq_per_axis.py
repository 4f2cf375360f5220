"""PORT032 qdq-per-axis-weights (the QDQ profile)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from portable.findings import Finding, Severity
from portable.validators.context import ModelContext
from portable.validators.qdq import QdqNode, qdq_nodes, scale_shape
from portable.validators.rules.base import Rule

__all__ = ["QdqPerAxisWeights"]


class QdqPerAxisWeights(Rule):
    """Per-axis (per-channel) quantization only on weights; activations per-tensor; no blocks.

    A Q/DQ is per-axis when its scale has more than one element. Its float side must then
    be a constant: the DequantizeLinear of a quantized weight, or the QuantizeLinear of a
    float weight (a Q/DQ pair on a weight). Part of the QDQ profile (PORT030-PORT032), on
    by default (a float model has no Q/DQ node).

    *Why*: integer accelerators quantize activations with one scale per tensor (QNN HTP
    and NNAPI take per-channel parameters for convolution and matmul weights only; NNCF's
    CPU profile gives activations ``pertensor`` granularity); a per-axis activation is left
    on the CPU or refused. Blocked quantization (``block_size``) needs opset 21.

    *Bad*: ``QuantizeLinear(x, scale[C], zp[C], axis=1)`` on a feature map;
    ``DequantizeLinear(w, s, zp, block_size=32)``.

    *Fix*: quantize activations per-tensor (``portable quantize`` always does); use
    ``--per-channel`` for weights only.
    """

    id = "PORT032"
    name = "qdq-per-axis-weights"
    severity = Severity.ERROR
    message = "{what}"
    hint = "quantize activations per-tensor and weights per-channel at most (portable quantize --per-channel)"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        for qdq in qdq_nodes(ctx):
            what = self._problem(ctx, qdq)
            if what is not None:
                yield self.finding(ctx.location(qdq.scope, qdq.index, qdq.node), what=what)

    @staticmethod
    def _problem(ctx: ModelContext, qdq: QdqNode) -> str | None:
        block = next((a.i for a in qdq.node.attribute if a.name == "block_size"), 0)
        if block:
            return f"{qdq.label} quantizes in blocks of {block} (blocked quantization needs opset 21)"
        inputs = list(qdq.node.input)
        shape = scale_shape(ctx, qdq.scope, inputs[1]) if len(inputs) > 1 and inputs[1] else None
        if shape is None or math.prod(shape) <= 1 or inputs[0] in ctx.constants:
            return None
        return (f"{qdq.label} quantizes the activation '{inputs[0]}' per-axis ({math.prod(shape)} scales): "
                "activations take one scale per tensor")
