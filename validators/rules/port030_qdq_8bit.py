"""PORT030 qdq-8bit (the QDQ profile)."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Severity
from portable.policy import dtype_name
from portable.validators.context import ModelContext
from portable.validators.qdq import EIGHT_BIT, QdqNode, element_types, qdq_nodes, quantized_type
from portable.validators.rules.base import Rule

__all__ = ["Qdq8Bit"]

_BIAS = onnx.TensorProto.INT32  # DequantizeLinear of an int32 bias: standard since opset 10
_CONTRIB = ("ONNX Runtime's contrib Q/DQ (its 16- and 4-bit path, or UseQDQContribOps), which only ONNX Runtime "
            "runs")


class Qdq8Bit(Rule):
    """QuantizeLinear and DequantizeLinear are 8-bit (int8 or uint8) and in the default domain.

    Part of the QDQ profile (PORT030-PORT032): these rules are on by default and find nothing
    in a float model, which has no Q/DQ node. A DequantizeLinear of an int32 tensor (a
    quantized bias, as ONNX Runtime's quantizer writes it) is allowed.

    *Why*: at opset 18, ``QuantizeLinear``/``DequantizeLinear`` take int8 and uint8 (and the
    float8 types since opset 19); int16, uint16, int4 and uint4 need opset 21, and blocked
    quantization too. ONNX Runtime's quantizer writes its 16-bit Q/DQ in the ``com.microsoft``
    domain to get around this: NPU compilers (QNN, NNAPI, OpenVINO) and other runtimes either
    refuse those nodes or run them on the CPU.

    *Bad*: ``quantize_static(..., activation_type=QuantType.QUInt16)`` (Q/DQ become
    ``com.microsoft::QuantizeLinear``, or the model is converted to opset 21); a zero point of
    type int16 at opset 18.

    *Fix*: quantize to 8 bits (``portable quantize --activations uint8 --weights int8``); keep
    a layer that needs more range in float (``--exclude NODE``) instead of widening it.
    """

    id = "PORT030"
    name = "qdq-8bit"
    severity = Severity.ERROR
    message = "{what}"
    hint = "quantize to 8 bits (int8/uint8) with standard Q/DQ; keep a layer that needs more range in float (--exclude)"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        types = element_types(ctx)
        for qdq in qdq_nodes(ctx):
            what = self._problem(qdq, types)
            if what is not None:
                yield self.finding(ctx.location(qdq.scope, qdq.index, qdq.node), what=what)

    @staticmethod
    def _problem(qdq: QdqNode, types: dict[str, int]) -> str | None:
        if not qdq.standard:
            return f"{qdq.label} is {_CONTRIB}"
        elem = quantized_type(qdq, types)
        if elem is None or elem in EIGHT_BIT or (not qdq.quantize and elem == _BIAS):
            return None
        side = "quantizes to" if qdq.quantize else "dequantizes"
        return f"{qdq.label} {side} {dtype_name(elem)}: the portable profile holds int8/uint8 Q/DQ only (opset 18)"
