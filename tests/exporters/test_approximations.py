"""The approximate-gelu rewrite (issue 32: ``fix --approximate-gelu``): each exact GELU order becomes the tanh form,
as PyTorch's ``approximate='tanh'`` computes it, and nothing else; and the float64 references its proof is judged by
(portable/repair/float64.py) compute the same tanh form from the original graph, independently of the rewrite."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from portable.exporters.approximations import MAX_GELU_GAP, ApproximateGeluPass, erf_nodes
from portable.repair.float64 import approximated, float64_runner, gelu_erfs

GRID = np.linspace(-8.0, 8.0, 4001, dtype=np.float32)  # through the widest gap (|x| ≈ 2.70) and both tails


def _tanh_gelu64(x: np.ndarray) -> np.ndarray:
    """The tanh form in float64, its constants written out (not the module's)."""
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _exact_gelu64(x: np.ndarray, root2: float = math.sqrt(2.0)) -> np.ndarray:
    return np.array([0.5 * v * (1.0 + math.erf(v / root2)) for v in x.astype(np.float64)])


def _gelu_graph(order: str, lone_erf: bool = False) -> onnx.ModelProto:
    """y = GELU(x) in one of the written orders (over [N, len(GRID)]), and optionally z = Erf(x) beside it."""
    consts = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
              (("root2", math.sqrt(2.0)), ("one", 1.0), ("half", 0.5))]
    nodes = [helper.make_node("Div", ["x", "root2"], ["u"]), helper.make_node("Erf", ["u"], ["e"], name="gelu_erf"),
             helper.make_node("Add", ["e", "one"], ["p"])]
    nodes += {"torch": [helper.make_node("Mul", ["half", "p"], ["h"]), helper.make_node("Mul", ["x", "h"], ["y"])],
              "ort": [helper.make_node("Mul", ["x", "p"], ["h"]), helper.make_node("Mul", ["h", "half"], ["y"])],
              "half-first": [helper.make_node("Mul", ["x", "half"], ["h"]), helper.make_node("Mul", ["h", "p"], ["y"])]}[order]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", GRID.size])]
    if lone_erf:
        nodes.append(helper.make_node("Erf", ["x"], ["z"], name="lone_erf"))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", GRID.size]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", GRID.size])
    graph = helper.make_graph(nodes, "gelu", [x], outputs, consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model: onnx.ModelProto | ir.Model) -> list[np.ndarray]:
    proto = ir.to_proto(model) if isinstance(model, ir.Model) else model
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the file's nodes as written
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": GRID[None, :]})


def _approximate(proto: onnx.ModelProto) -> ir.Model:
    model = ir.from_proto(proto)
    assert ApproximateGeluPass()(model).modified
    return model


def test_the_gap_bound_holds_and_is_tight() -> None:
    x = np.linspace(-10.0, 10.0, 200001)
    gap = np.abs(_exact_gelu64(x) - _tanh_gelu64(x))
    assert gap.max() <= MAX_GELU_GAP and gap.max() > 0.95 * MAX_GELU_GAP
    assert abs(abs(x[gap.argmax()]) - 2.70) < 0.01


@pytest.mark.parametrize("order", ["torch", "ort", "half-first"])
def test_each_order_becomes_the_tanh_form(order: str) -> None:
    original = _gelu_graph(order)
    model = _approximate(original)
    assert not erf_nodes(model) and {n.op_type for n in model.graph} == {"Mul", "Add", "Tanh"}
    got = _run(model)[0][0].astype(np.float64)
    np.testing.assert_allclose(got, _tanh_gelu64(GRID), rtol=0, atol=1e-6)  # fp32 rounding of the tanh form
    exact = _run(original)[0][0].astype(np.float64)
    assert 0.9 * MAX_GELU_GAP < np.abs(got - exact).max() <= MAX_GELU_GAP + 1e-6  # it is the approximation


def test_matches_pytorch_tanh_gelu() -> None:
    got = _run(_approximate(_gelu_graph("torch")))[0][0]
    want = torch.nn.functional.gelu(torch.from_numpy(GRID), approximate="tanh").numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


def test_a_lone_erf_stays() -> None:
    model = _approximate(_gelu_graph("ort", lone_erf=True))
    assert [n.name for n in erf_nodes(model)] == ["lone_erf"]
    np.testing.assert_array_equal(_run(model)[1], _run(_gelu_graph("ort", lone_erf=True))[1])


def test_wrong_constants_are_not_matched() -> None:
    proto = _gelu_graph("torch")
    proto.graph.initializer[2].CopyFrom(numpy_helper.from_array(np.array(0.6, np.float32), "half"))  # not a GELU
    assert not ApproximateGeluPass()(ir.from_proto(proto)).modified


def test_the_float64_references_compute_both_forms() -> None:
    """From the original graph: the exact GELU in float64, and the tanh form substituted in terms of u = x/√2."""
    model = ir.from_proto(_gelu_graph("ort", lone_erf=True))
    positions = gelu_erfs(model)
    assert positions == [0]  # the GELU's Erf, not the lone one
    exact, approximate = approximated(model, positions)
    wide = {"x": GRID[None, :].astype(np.float64)}
    got_exact, _ = float64_runner(exact)
    got_approx, _ = float64_runner(approximate)
    (y, z), (ya, za) = got_exact.run(None, wide), got_approx.run(None, wide)
    assert y.dtype == np.float64 and ya.dtype == np.float64
    root2 = float(np.float32(math.sqrt(2.0)))  # the graph's constant, √2 rounded to float32
    np.testing.assert_allclose(y[0], _exact_gelu64(GRID, root2), rtol=0, atol=1e-14)
    # in u = x / root2: the float32 √2 puts the substituted form within 1e-8 of the tanh form in x (fp32 rounds
    # each op by 6e-8), and 1e-4 away from the exact GELU
    np.testing.assert_allclose(ya[0], _tanh_gelu64(GRID), rtol=0, atol=1e-7)
    assert np.abs(ya[0] - y[0]).max() > 0.9 * MAX_GELU_GAP
    np.testing.assert_array_equal(z, za)  # the lone Erf is exact in both
    np.testing.assert_allclose(z[0], [math.erf(v) for v in GRID.astype(np.float64)], rtol=0, atol=1e-15)
