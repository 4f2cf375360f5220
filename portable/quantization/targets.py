"""Quantization defaults per target, as data: what each runtime wants of an 8-bit QDQ model.

``portable quantize --target NAME`` starts from these; a flag the user gives wins. Each entry
says where its values come from (``source``). The names are ``portable validate --target``'s
profile names (one vocabulary for every command, docs/cli.md); ``cpu``, the old name of
``ort-cpu``, still works for one release, with a deprecation line from the CLI.
Target *profiles* (op support per runtime) are another matter and live with the validators;
this table is only what the quantizer must choose.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from portable.errors import UsageError

__all__ = ["DEFAULT_TARGET", "DEPRECATED", "TARGETS", "TargetDefaults", "target_defaults"]

DEFAULT_TARGET = "ort-cpu"
DEPRECATED = {"cpu": "ort-cpu"}  # old name -> the validate profile's name


@dataclass(frozen=True)
class TargetDefaults:
    """8-bit types and granularity for one target, and ONNX Runtime ``extra_options`` it needs."""

    name: str
    description: str
    activations: str  # "uint8" | "int8"
    weights: str  # "uint8" | "int8"
    per_channel: bool  # weights per output channel (activations are always per-tensor)
    activation_symmetric: bool
    weight_symmetric: bool
    source: str
    extra: Mapping[str, Any] = field(default_factory=dict)
    # float between int8 layers is fine: a transformer's element-wise ops may stay float (scope "linear",
    # portable.quantization.settings); an NPU that wants an integer graph end to end says False
    float_between_layers: bool = False
    # op types whose weights the target takes per-tensor only, even where the others' are per-channel
    per_tensor_ops: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "activations": self.activations,
                "weights": self.weights, "per_channel": self.per_channel, "per_tensor_ops": list(self.per_tensor_ops),
                "float_between_layers": self.float_between_layers,
                "activation_symmetric": self.activation_symmetric, "weight_symmetric": self.weight_symmetric,
                "extra_options": dict(self.extra), "source": self.source}


TARGETS: dict[str, TargetDefaults] = {t.name: t for t in (
    TargetDefaults(
        "ort-cpu", "ONNX Runtime CPU (x86 with VNNI, ARM)", "uint8", "int8", True, False, True,
        "onnxruntime/quantization/quantize.py, quantize_static's docstring 'Choosing parameters for CPU "
        "inference' (onnxruntime 1.32): QUInt8 activations, QInt8 weights, reduce_range off with VNNI. It says "
        "per_channel=False 'gives the best throughput on CPU'; portable takes per-channel weights, which ONNX "
        "Runtime's CPU kernels run, because per-tensor weights break trained convnets (EfficientNet-Lite0 on "
        "real photographs: 4.5 dB SQNR per-tensor, 14.3 dB per-channel; docs/quantize.md). Float between "
        "layers: its CPU kernels fuse DequantizeLinear -> MatMul with a float output (MatMulIntegerToFloat)",
        float_between_layers=True),
    TargetDefaults(
        "qnn", "Qualcomm QNN HTP (ONNX Runtime's QNN EP)", "uint8", "int8", True, False, True,
        "onnxruntime/quantization/execution_providers/qnn/quant_config.py, get_qnn_qdq_config (onnxruntime "
        "1.32): QUInt8 activations, extra option MinimumRealRange=0.0001, and its per_channel option: 'Conv: "
        "input[1] on axis 0', ConvTranspose on axis 1, with MatMul weights kept per-tensor ('QNN does not "
        "support per-channel MatMul', _process_matmul) and weights symmetric when signed; ONNX Runtime's QNN HTP "
        "tests run that (ConvU8S8S32_PerChannel: 'in0: u8, in1 (weight): s8, in2 (bias): s32, out: u8'). Its defaults are "
        "per-tensor QUInt8 weights; portable takes per-channel QInt8 ones where QNN does, because per-tensor "
        "weights break trained convnets (EfficientNet-Lite0 on real photographs at the defaults: 12.9 dB and "
        "74.2 % per-tensor uint8, 22.1 dB and 95.4 % per-channel; docs/quantize.md). The QNN EP page "
        "'Generating a quantized model' (onnxruntime.ai/docs/execution-providers/QNN-ExecutionProvider.html)",
        {"MinimumRealRange": 0.0001}, per_tensor_ops=("MatMul",)),
    TargetDefaults(
        "nnapi", "Android NNAPI (ONNX Runtime's NNAPI EP)", "uint8", "uint8", False, False, False,
        "microsoft/onnxruntime onnxruntime/core/providers/nnapi/nnapi_builtin/builders/impl/"
        "quantizelinear_op_builder.cc @ 3ae6b750 (QuantizeLinear gives TENSOR_QUANT8_ASYMM, uint8) and "
        "op_builder_helpers.cc IsQuantizedIOSupported ('We only support u8 for most of the inputs and all "
        "outputs', int8 only for Conv/MatMul weights with zero points of 0); quantize_static's "
        "'extra.Sigmoid.nnapi' option", {"extra.Sigmoid.nnapi": True}),
    TargetDefaults(
        "openvino", "OpenVINO CPU/NPU (NNCF's defaults)", "int8", "int8", True, True, True,
        "openvinotoolkit/nncf nncf/common/hardware/configs/cpu.json @ 033300cb (weights q8_w_sym: int8 "
        "symmetric -128..127, per-channel; activations q8_a: per-tensor) and the POT/NNCF 'performance' "
        "preset, the default: 'symmetric quantization of weights and activations' "
        "(docs.openvino.ai, DefaultQuantization parameters); for transformers NNCF's ModelType.TRANSFORMER leaves "
        "element-wise ops and LayerNorm float", float_between_layers=True),
    TargetDefaults(
        "tensorrt", "TensorRT (ONNX Runtime's TensorRT EP)", "int8", "int8", True, True, True,
        "onnxruntime/quantization/quantize.py, quantize_static's docstring (onnxruntime 1.32): 'use "
        "symmetric QuantType.QInt8 for both activations and weights when targeting GPU/TRT'; TensorRT's "
        "explicit quantization takes per-channel weight scales and runs the ops between Q/DQ pairs in float",
        float_between_layers=True),
)}


def target_defaults(name: str | None) -> TargetDefaults:
    """The defaults of ``name`` (``None``: the CPU's); a usage error for an unknown name."""
    key = (name or DEFAULT_TARGET).lower()
    key = DEPRECATED.get(key, key)
    if key not in TARGETS:
        close = difflib.get_close_matches(key, list(TARGETS), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(f"--target {name!r}: unknown target; {hint}known: {', '.join(TARGETS)}")
    return TARGETS[key]
