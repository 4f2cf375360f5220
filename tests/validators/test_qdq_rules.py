"""The QDQ profile (PORT030-PORT032) on what ONNX Runtime's quantizer really writes: its 8-bit QDQ
output is clean; its 16-bit paths (contrib Q/DQ, or a conversion to opset 21), a per-axis
activation and a computed scale are each caught, on an otherwise identical model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from portable.validators import validate

QDQ_RULES = {"PORT030", "PORT031", "PORT032"}


def _matmul_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"), helper.make_node("Add", ["m", "b"], ["y"], name="add")],
        "mlp", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


class _Reader:
    def __init__(self) -> None:
        self._batches = iter([{"x": np.random.default_rng(i).standard_normal((4, 8)).astype(np.float32)}
                              for i in range(4)])

    def get_next(self):
        return next(self._batches, None)


def _quantized(tmp_path: Path, **kwargs) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    source, out = tmp_path / "float.onnx", tmp_path / "int8.onnx"
    onnx.save(_matmul_model(), str(source))
    options = {"activation_type": QuantType.QUInt8, "weight_type": QuantType.QInt8, **kwargs}
    quantize_static(str(source), str(out), _Reader(), quant_format=QuantFormat.QDQ, **options)
    return onnx.load(str(out))


def _fired(model: onnx.ModelProto) -> set[str]:
    report = validate(model)
    assert report.error is None, report.error
    return {f.rule_id for f in report.findings}


def test_onnx_runtimes_8bit_qdq_output_is_clean(tmp_path):
    model = _quantized(tmp_path)
    assert {n.op_type for n in model.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
    assert _fired(model) == set()


def test_the_contrib_qdq_of_onnx_runtime_is_named(tmp_path):
    from onnxruntime.quantization import QuantType

    model = _quantized(tmp_path, activation_type=QuantType.QUInt16, extra_options={"UseQDQContribOps": True})
    report = validate(model)
    qdq = [f for f in report.findings if f.rule_id == "PORT030"]
    assert qdq and all("contrib Q/DQ" in f.message for f in qdq) and "PORT002" in {f.rule_id for f in report.findings}


def test_16bit_activations_at_opset_21_are_refused_as_such(tmp_path):
    from onnxruntime.quantization import QuantType

    model = _quantized(tmp_path, activation_type=QuantType.QUInt16)  # ORT converts the model to opset 21
    report = validate(model)
    messages = [f.message for f in report.findings if f.rule_id == "PORT030"]
    assert {"PORT001", "PORT030"} <= {f.rule_id for f in report.findings}
    assert any("uint16" in m for m in messages) and not any("int8 " in m.split(":")[0] for m in messages)


def test_a_per_axis_activation_is_caught(tmp_path):
    model = _quantized(tmp_path)
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "x")
    inits = {t.name: t for t in model.graph.initializer}
    for name in q.input[1:]:
        value = numpy_helper.to_array(inits[name])
        inits[name].CopyFrom(numpy_helper.from_array(np.repeat(value.reshape(1), 8), name))
    for node in model.graph.node:
        if node.input and node.input[1:] == q.input[1:]:
            node.attribute.append(helper.make_attribute("axis", 1))
    found = [f for f in validate(model).findings if f.rule_id in QDQ_RULES]
    assert {f.rule_id for f in found} == {"PORT032"} and any("'x' per-axis (8 scales)" in f.message for f in found)


def test_a_scale_computed_at_run_time_is_caught(tmp_path):
    model = _quantized(tmp_path)
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "x")
    model.graph.node.insert(0, helper.make_node("ReduceMax", ["x"], ["x_max"], keepdims=0, name="range"))
    q.input[1] = "x_max"
    found = {(f.rule_id, f.location.node) for f in validate(model).findings if f.rule_id in QDQ_RULES}
    assert found == {("PORT031", q.name)}


@pytest.mark.parametrize("rule", sorted(QDQ_RULES))
def test_a_float_model_has_nothing_for_the_qdq_rules(rule):
    from portable.policy import Policy

    assert validate(_matmul_model(), Policy(select=(rule,))).findings == ()


def test_a_scale_onnx_cannot_read_is_left_to_the_checker(tmp_path):
    model = _quantized(tmp_path)
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear")
    scale = next(t for t in model.graph.initializer if t.name == q.input[1])
    scale.data_type = onnx.TensorProto.UNDEFINED  # numpy_helper.to_array raises on it
    report = validate(model)
    assert report.error is None and "PORT011" in {f.rule_id for f in report.findings}
