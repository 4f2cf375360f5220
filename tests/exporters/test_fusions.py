"""RuntimeFusionPass and MergeSharedMatMulsPass (exporters/fusions.py): fusions that leave ORT's bits as they were."""

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


def _after(proto: onnx.ModelProto, *passes: type[ir.passes.InPlacePass]) -> onnx.ModelProto:
    """``proto`` through ``passes`` and then RemoveUnusedNodesPass, as portable_passes runs them
    (on inferred shapes: the exporter's are static by then)."""
    model = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(proto))
    for pass_ in passes:
        pass_()(model)
    ir.passes.common.RemoveUnusedNodesPass()(model)
    return ir.serde.serialize_model(model)


def _fused(proto: onnx.ModelProto) -> onnx.ModelProto:
    return _after(proto, RuntimeFusionPass)


def _outputs(proto: onnx.ModelProto, x: np.ndarray, optimized: bool) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


def _run(proto: onnx.ModelProto, x: np.ndarray, optimized: bool) -> np.ndarray:
    return _outputs(proto, x, optimized)[0]


def _same_bits_on_ort(before: onnx.ModelProto, after: onnx.ModelProto, x: np.ndarray) -> None:
    """ORT's outputs of both, with its graph optimizations on and off, equal bit for bit (and not degenerate)."""
    for optimized in (True, False):
        expected, got = _outputs(before, x, optimized), _outputs(after, x, optimized)
        assert all(np.abs(e).max() > 0.5 for e in expected)
        for e, g in zip(expected, got):
            np.testing.assert_array_equal(g, e)


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


def _attention_inputs(k: int = 256) -> onnx.ModelProto:
    """x[batch, 5, k] by q/k/v weights [k, 64], [k, 64], [k, 32], one more that is a graph output,
    each product then Relu'd (so the outputs are used inside the graph)."""
    from onnx import TensorProto, helper, numpy_helper

    widths = {"q": 64, "k": 64, "v": 32, "o": 16}
    weights = [numpy_helper.from_array(RNG.standard_normal((k, n)).astype(np.float32) / 16, f"w_{name}")
               for name, n in widths.items()]
    nodes = [helper.make_node("MatMul", ["x", f"w_{name}"], [name]) for name in widths]
    nodes += [helper.make_node("Relu", [name], [f"{name}_out"]) for name in ("q", "k", "v")]
    outputs = [helper.make_tensor_value_info(f"{n}_out", TensorProto.FLOAT, ["batch", 5, widths[n]]) for n in "qkv"]
    outputs.append(helper.make_tensor_value_info("o", TensorProto.FLOAT, ["batch", 5, 16]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5, k])],
                              outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _merged(proto: onnx.ModelProto) -> onnx.ModelProto:
    from portable.exporters.fusions import MergeSharedMatMulsPass

    return _after(proto, MergeSharedMatMulsPass)


def test_matmuls_of_one_input_become_one_and_a_split_with_the_same_bits_on_ort() -> None:
    proto = _attention_inputs()
    merged = _merged(proto)
    ops = [n.op_type for n in merged.graph.node]
    assert ops.count("MatMul") == 2 and ops.count("Split") == 1  # q, k, v merged; o (a graph output) stays
    assert {t.name for t in merged.graph.initializer} == {"w_q__w_k__w_v", "w_q__w_k__w_v__split", "w_o"}
    onnx.checker.check_model(merged, full_check=True)
    _same_bits_on_ort(proto, merged, RNG.standard_normal((3, 5, 256)).astype(np.float32))  # the same dot products


def test_a_lone_matmul_or_weights_of_different_inner_sizes_stay() -> None:
    from onnx import TensorProto, helper, numpy_helper

    weights = [numpy_helper.from_array(RNG.standard_normal((8, 4)).astype(np.float32), "a"),
               numpy_helper.from_array(RNG.standard_normal((4, 4)).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "a"], ["y"]), helper.make_node("MatMul", ["y", "b"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])], weights)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    assert [n.op_type for n in _merged(proto).graph.node] == ["MatMul", "MatMul"]


def _biased_attention(biased: str = "qkv") -> onnx.ModelProto:
    """Like _attention_inputs, with a bias Add after the projections in ``biased``."""
    from onnx import helper, numpy_helper

    proto = _attention_inputs()
    graph = proto.graph
    for node in graph.node:
        if node.op_type == "Relu" and node.input[0] in biased:
            name = node.input[0]
            width = next(t.dims[1] for t in graph.initializer if t.name == f"w_{name}")
            graph.initializer.append(numpy_helper.from_array(RNG.standard_normal(width).astype(np.float32), f"b_{name}"))
            graph.node.append(helper.make_node("Add", [name, f"b_{name}"], [f"{name}_biased"]))
            node.input[0] = f"{name}_biased"
    return _sorted(proto)


def _sorted(proto: onnx.ModelProto) -> onnx.ModelProto:
    model = ir.serde.deserialize_model(proto)
    model.graph.sort()
    return ir.serde.serialize_model(model)


def _fully_merged(proto: onnx.ModelProto) -> onnx.ModelProto:
    from portable.exporters.fusions import MergeSharedMatMulsPass, MergeSplitBiasesPass

    return _after(proto, MergeSharedMatMulsPass, MergeSplitBiasesPass)


def test_the_biases_of_split_parts_are_added_once_before_the_split_with_the_same_bits() -> None:
    proto = _biased_attention()
    merged = _fully_merged(proto)
    ops = [n.op_type for n in merged.graph.node]
    assert ops.count("Add") == 1 and ops.count("Split") == 1 and ops.count("MatMul") == 2
    onnx.checker.check_model(merged, full_check=True)
    _same_bits_on_ort(proto, merged, RNG.standard_normal((2, 5, 256)).astype(np.float32))


def test_a_split_part_without_its_own_bias_keeps_every_add_where_it_was() -> None:
    merged = _fully_merged(_biased_attention("qk"))  # v has no bias: the Adds of q and k stay after the Split
    ops = [n.op_type for n in merged.graph.node]
    assert ops.count("Add") == 2 and ops.count("Split") == 1
    split = next(n for n in merged.graph.node if n.op_type == "Split")
    assert [n.op_type for n in merged.graph.node if set(n.input) & set(split.output)].count("Add") == 2


def test_a_weight_also_used_elsewhere_is_not_merged_so_the_file_does_not_grow() -> None:
    from onnx import helper

    proto = _attention_inputs()
    proto.graph.node.append(helper.make_node("Transpose", ["w_q"], ["w_q_t"]))  # w_q tied to another use
    proto.graph.output.append(helper.make_tensor_value_info("w_q_t", onnx.TensorProto.FLOAT, [64, 256]))
    merged = _merged(proto)
    assert {t.name for t in merged.graph.initializer} == {"w_q", "w_k__w_v", "w_k__w_v__split", "w_o"}


def _gelu_mlp_proto(tmp_path) -> onnx.ModelProto:  # type: ignore[no-untyped-def]
    """A Linear -> exact GELU -> Linear block, exported by PyTorch's own exporter (torchlib writes the GELU as
    ``x * (0.5 * (erf(x / √2) + 1))``), not yet through portable's passes."""
    import torch

    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 16)).eval()
    program = torch.onnx.export(block, (torch.randn(2, 16),), dynamo=True, opset_version=18, verbose=False)
    program.save(str(tmp_path / "gelu.onnx"))
    return onnx.load(str(tmp_path / "gelu.onnx"))


def _ort_optimized_ops(proto: onnx.ModelProto, tmp_path) -> list[str]:  # type: ignore[no-untyped-def]
    """The ops ONNX Runtime runs after its own graph optimizations (its optimized model, written out)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "ort-optimized.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(str(tmp_path / "ort-optimized.onnx")).graph.node]


def test_the_exact_gelu_is_written_in_the_order_ort_fuses_with_the_same_numbers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from onnx.reference import ReferenceEvaluator

    exported = _gelu_mlp_proto(tmp_path)
    assert "Gelu" not in _ort_optimized_ops(exported, tmp_path)  # as PyTorch writes it, ORT runs five kernels
    fused = _fused(exported)
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("Erf") == 1 and ops.count("Mul") == 2 and all(n.domain in ("", "ai.onnx") for n in fused.graph.node)
    last = fused.graph.node[[n.op_type for n in fused.graph.node].index("Erf") + 2 :][:2]
    assert [n.op_type for n in last] == ["Mul", "Mul"]
    assert "Gelu" in _ort_optimized_ops(fused, tmp_path)  # ORT's GeluFusion now takes it: one kernel
    name = exported.graph.input[0].name
    x = (RNG.standard_normal((64, 16)) * 3).astype(np.float32)
    before = ReferenceEvaluator(exported).run(None, {name: x})[0]
    after = ReferenceEvaluator(fused).run(None, {name: x})[0]
    np.testing.assert_array_equal(after, before)  # the file's own arithmetic: bit for bit (halving is exact)
    assert float(np.std(before)) > 0.05


def test_the_rewritten_gelu_keeps_the_batch_symbol_on_every_new_value(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Each value of the GELU the export writes is declared with the input's shape, ``batch`` included. Left to
    shape inference, a larger graph (zoo's hf_bert) got a fresh symbol there (``unk__17``), and coreml and
    nnapi called those nodes unfixed even with the batch fixed (coreml 145/171 nodes instead of 161)."""
    from portable.exporters.spec_export import export_spec

    out = tmp_path / "mlp.onnx"
    (tmp_path / "mlp.py").write_text(
        "import torch\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    block = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))\n"
        "    return block.eval(), (torch.randn(2, 8, 16),)\n")
    export_spec(f"{tmp_path / 'mlp.py'}:build", out, verify=False)
    proto = onnx.load(str(out))  # as written: what a reader has without inferring
    shapes = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in [*proto.graph.value_info, *proto.graph.output]}
    ops = [n.op_type for n in proto.graph.node]
    gelu = proto.graph.node[ops.index("Div"):ops.index("Div") + 5]
    assert [n.op_type for n in gelu] == ["Div", "Erf", "Add", "Mul", "Mul"]
    assert {o: shapes.get(o) for n in gelu for o in n.output} == {o: ["batch", 8, 64] for n in gelu for o in n.output}


def test_a_gelu_like_chain_with_other_constants_is_left_alone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from onnx import numpy_helper

    exported = _gelu_mlp_proto(tmp_path)
    for tensor in exported.graph.initializer:
        value = numpy_helper.to_array(tensor)
        if value.size == 1 and float(value.reshape(-1)[0]) == 0.5:
            tensor.CopyFrom(numpy_helper.from_array(np.array(0.25, dtype=value.dtype), tensor.name))
    fused = _fused(exported)
    erf = [n.op_type for n in fused.graph.node].index("Erf")
    assert [n.op_type for n in fused.graph.node][erf + 1 : erf + 4] == [n.op_type for n in exported.graph.node][
        [n.op_type for n in exported.graph.node].index("Erf") + 1 : [n.op_type for n in exported.graph.node].index("Erf") + 4]
    assert "Gelu" not in _ort_optimized_ops(fused, tmp_path)
