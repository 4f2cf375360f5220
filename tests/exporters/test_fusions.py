"""RuntimeFusionPass: the fusions ONNX Runtime makes at load, made in the file (exporters/fusions.py)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from portable.exporters.passes import RuntimeFusionPass

RNG = np.random.default_rng(0)
C = 8


def _graph(factor_shape: tuple[int, ...], *, bias: bool = True, second_use: bool = False) -> onnx.ModelProto:
    """x -> Conv(w[, b]) -> Mul(g) -> y, with g of ``factor_shape`` (and the Conv output also an output)."""
    from onnx import TensorProto, helper, numpy_helper

    weights = [numpy_helper.from_array(RNG.standard_normal((C, 4, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(RNG.standard_normal(factor_shape).astype(np.float32), "g")]
    conv_inputs = ["x", "w"]
    if bias:
        weights.append(numpy_helper.from_array(RNG.standard_normal(C).astype(np.float32), "b"))
        conv_inputs.append("b")
    nodes = [helper.make_node("Conv", conv_inputs, ["c"], pads=[1, 1, 1, 1]), helper.make_node("Mul", ["c", "g"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", C, 6, 6])]
    if second_use:
        outputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, ["batch", C, 6, 6]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6, 6])],
                              outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _fused(proto: onnx.ModelProto) -> onnx.ModelProto:
    model = ir.serde.deserialize_model(proto)
    RuntimeFusionPass()(model)
    return ir.serde.serialize_model(model)


def _run(proto: onnx.ModelProto, x: np.ndarray, optimized: bool) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize(("factor_shape", "bias"), [((1, C, 1, 1), True), ((C, 1, 1), True), ((1, C, 1, 1), False)])
def test_a_per_channel_mul_goes_into_the_conv_and_ort_gives_the_same_bits(factor_shape, bias) -> None:
    proto = _graph(factor_shape, bias=bias)
    fused = _fused(proto)
    assert [n.op_type for n in fused.graph.node] == ["Conv"]
    assert {t.name for t in fused.graph.initializer} == ({"w_scaled", "b_scaled"} if bias else {"w_scaled"})
    x = RNG.standard_normal((3, 4, 6, 6)).astype(np.float32)
    unfused = _run(proto, x, optimized=True)
    assert np.abs(unfused).max() > 0.5
    # ORT fuses the unfused file at load from the same float32 products: the same bits
    np.testing.assert_array_equal(_run(fused, x, optimized=True), unfused)
    # unoptimized, the two round differently, and only in the last bits
    np.testing.assert_allclose(_run(fused, x, optimized=False), _run(proto, x, optimized=False), rtol=1e-5, atol=1e-5)


CASES = {"spatial factor": lambda: _graph((1, C, 6, 6)), "conv output used twice": lambda: _graph((1, C, 1, 1),
         second_use=True), "channel count mismatch": lambda: _graph((1, 2, 1, 1)),
         "one factor for all (ORT leaves it to the Mul)": lambda: _graph((1,))}


@pytest.mark.parametrize("case", sorted(CASES))
def test_what_is_not_one_factor_per_channel_of_a_conv_used_once_stays(case: str) -> None:
    assert [n.op_type for n in _fused(CASES[case]()).graph.node] == ["Conv", "Mul"]
