"""PORT031 qdq-constant-params (the QDQ profile)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from portable.findings import Finding, Severity
from portable.validators.context import ModelContext
from portable.validators.qdq import QdqNode, constant_array, qdq_nodes
from portable.validators.rules.base import Rule

__all__ = ["QdqConstantParams"]


class QdqConstantParams(Rule):
    """Every Q/DQ's scale and zero point are constants, and its scales are finite and positive.

    Part of the QDQ profile (PORT030-PORT032), on by default (a float model has no Q/DQ node).

    *Why*: an integer accelerator bakes the quantization parameters into the compiled graph:
    ONNX Runtime's NNAPI table says "All quantization scales and zero points should be
    constant" for QuantizeLinear, DequantizeLinear and every QLinear op
    (``onnxruntime/tools/mobile_helpers/nnapi_supported_ops.md``), and QNN, CoreML and
    OpenVINO read them when the graph is built. A scale computed at run time (a dynamic
    quantization's ``DynamicQuantizeLinear`` + ``Mul``) leaves the node on the CPU or fails the
    compile; a zero, negative or NaN scale makes every value it quantizes wrong.

    *Bad*: ``QuantizeLinear(x, Mul(ReduceMax(x), c), zp)``; a graph input as the scale; a
    scale of 0 left by a calibration that saw an all-zero tensor.

    *Fix*: quantize statically (``portable quantize``, calibrated ranges become constants);
    calibrate on data that reaches every layer.
    """

    id = "PORT031"
    name = "qdq-constant-params"
    severity = Severity.ERROR
    message = "{what}"
    hint = "quantize statically so scales and zero points are constants (portable quantize); calibrate on real data"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        for qdq in qdq_nodes(ctx):
            for what in self._problems(ctx, qdq):
                yield self.finding(ctx.location(qdq.scope, qdq.index, qdq.node), what=what)

    @staticmethod
    def _problems(ctx: ModelContext, qdq: QdqNode) -> Iterator[str]:
        inputs = list(qdq.node.input) + ["", ""]
        for role, name in (("scale", inputs[1]), ("zero point", inputs[2])):
            if name and name not in ctx.constants:
                yield f"{qdq.label}: its {role} '{name}' is computed at run time, not a constant"
        scale = constant_array(ctx, qdq.scope, inputs[1]) if inputs[1] else None
        if scale is not None and scale.size and not bool(np.all(np.isfinite(scale) & (scale > 0))):
            yield f"{qdq.label}: its scale '{inputs[1]}' holds a zero, negative or non-finite value"
