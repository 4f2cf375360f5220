"""``portable fix`` on graphs built like the files of other projects that broke it (issue 26): each
test is one file's shape, small; each failed on the code before the issue."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from portable.errors import ExitCode
from portable.repair import FixFailed, fix


def _save(model: onnx.ModelProto, folder: Path, name: str = "in.onnx") -> Path:
    path = folder / name
    onnx.save(model, path)
    return path


def _model(nodes, inputs, outputs, initializers=(), opset=18) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def test_an_unsorted_graph_is_sorted_and_said_so(tmp_path):
    """burn-onnx ``non_topological_order.onnx``: Add listed before the Abs that feeds it (onnx-ir's clone crashed)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Add", ["a", "x"], ["y"], name="add"), helper.make_node("Abs", ["x"], ["a"], name="abs")]
    result = fix(_save(_model(nodes, [x], [y]), tmp_path), tmp_path / "out.onnx")
    report = {r.name: r for r in result.remedies}["topological-order"]
    assert report.status == "applied" and "topological order" in report.detail
    assert result.ok and result.proof is not None and result.proof.ok
    assert [n.op_type for n in onnx.load(tmp_path / "out.onnx").graph.node] == ["Abs", "Add"]


def test_a_negative_dim_is_unknown_and_proved_at_a_size(tmp_path):
    """tract's quantized test cases declare dim_value -1: the proof drew negative shapes (ValueError)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    x.type.tensor_type.shape.dim[1].dim_value = -1
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    result = fix(_save(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y]), tmp_path), tmp_path / "o.onnx")
    assert result.proof is not None and result.proof.ok, result.proof
    assert result.proof.dims == {"x:1": 2}


def test_token_ids_into_an_embedding_are_drawn_within_its_rows(tmp_path):
    """An int64 input reaching a Gather of 3 rows (through a Cast): seeded ids in [0, 10) were out of bounds."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT32, ["batch", 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6, 4])
    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "table")
    nodes = [helper.make_node("Cast", ["ids"], ["ids64"], to=TensorProto.INT64),
             helper.make_node("Gather", ["table", "ids64"], ["y"], name="embed")]
    result = fix(_save(_model(nodes, [ids], [y], [table]), tmp_path), tmp_path / "o.onnx")
    assert result.proof is not None and result.proof.ok, result.proof.message
    assert result.proof.constraints == {"ids": ["[0, 3): indices of Gather 'embed' into axis 0 of size 3"]}
    assert result.to_dict()["proof"]["constraints"] == result.proof.constraints


def test_an_integer_mod_divisor_is_never_zero(tmp_path):
    a = helper.make_tensor_value_info("a", TensorProto.INT64, [4])
    b = helper.make_tensor_value_info("b", TensorProto.INT64, [4])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [4])
    result = fix(_save(_model([helper.make_node("Mod", ["a", "b"], ["y"])], [a, b], [y]), tmp_path), tmp_path / "o.onnx")
    assert result.proof is not None and result.proof.ok, result.proof.message
    assert list(result.proof.constraints) == ["b"]


def test_dropout_in_training_mode_is_a_finding_of_the_model_naming_the_op(tmp_path):
    """burn-onnx ``dropout.onnx``: the original differs run to run; exit 1 naming the Dropout, not exit 3."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    consts = [numpy_helper.from_array(np.array(0.5, np.float32), "ratio"), numpy_helper.from_array(np.array(True), "train")]
    nodes = [helper.make_node("Dropout", ["x", "ratio", "train"], ["y"], name="drop")]
    with pytest.raises(FixFailed) as info:
        fix(_save(_model(nodes, [x], [y], consts), tmp_path), tmp_path / "o.onnx")
    assert info.value.exit_code == ExitCode.FINDINGS
    assert "Dropout 'drop'" in str(info.value) and "random" in str(info.value)
    assert info.value.result.proof is not None and not info.value.result.proof.unavailable
    assert not (tmp_path / "o.onnx").exists()


def test_the_batch_symbol_has_one_size_in_every_input(tmp_path):
    """GPT-2 ``past.onnx``: ``batch_size`` at dim 1 of the cache was proved at 2 while dim 0 of the ids was 1."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch_size", 4])
    past = helper.make_tensor_value_info("past", TensorProto.FLOAT, [4, "batch_size"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch_size", 4])
    nodes = [helper.make_node("Transpose", ["past"], ["t"], perm=[1, 0]), helper.make_node("Add", ["x", "t"], ["y"])]
    result = fix(_save(_model(nodes, [x, past], [y]), tmp_path), tmp_path / "o.onnx")
    assert result.proof is not None and result.proof.ok, result.proof.message
    assert "batch_size" not in result.proof.dims


def test_an_unnamed_dim_is_fixed_by_input_and_axis(tmp_path):
    """17 corpus files have a ``?`` dim, which ``--dim NAME=SIZE`` could not name."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None])
    result = fix(_save(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y]), tmp_path), tmp_path / "o.onnx",
                 dims={"x:1": 4, "y:1": 4})
    assert {r.name: r.status for r in result.remedies}["dims"] == "applied"
    fixed = onnx.load(tmp_path / "o.onnx").graph
    assert [d.dim_value for d in fixed.input[0].type.tensor_type.shape.dim] == [1, 4]
    assert result.ok and result.proof is not None and result.proof.dims["x:1"] == 4


def test_json_errors_come_as_a_json_object(cli, tmp_path):
    """``--format json`` printed nothing on exit 2 and on an unreadable file."""
    import json

    done = cli("fix", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "o.onnx"), "--format", "json")
    assert done.exit_code == 3
    report = json.loads(done.stdout)
    assert report["exit_code"] == 3 and report["error"]["type"] == "InputError" and not report["written"]


def test_the_opset_conversion_keeps_each_nodes_source_line(tmp_path):
    """Issue 25 item 7: onnx.version_converter drops node metadata_props (BERT 113 -> 0)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("ReduceSum", ["r", "axes"], ["s"], keepdims=1, name="sum"),  # an adapter rewrites it
             helper.make_node("Sub", ["r", "s"], ["y"], name="sub")]
    for index, node in enumerate(nodes):
        node.metadata_props.add(key="pkg.torch.onnx.stack_trace", value=f"model.py:{10 + index}")
    result = fix(_save(_model(nodes, [x], [y], [axes], opset=13), tmp_path), tmp_path / "o.onnx", opset=20)
    assert {r.name: r.status for r in result.remedies}["opset"] == "applied"
    fixed = onnx.load(tmp_path / "o.onnx").graph
    lines = {n.name: {p.key: p.value for p in n.metadata_props}.get("pkg.torch.onnx.stack_trace") for n in fixed.node}
    assert lines == {"relu": "model.py:10", "sum": "model.py:11", "sub": "model.py:12"}, lines


def test_a_model_with_no_ai_onnx_import_gets_a_clear_refusal(tmp_path):
    """The converter said "invalid version (must be between 1 and 28)"."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Mystery", ["x"], ["y"], domain="com.example")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("com.example", 1)], ir_version=9)
    result = fix(_save(model, tmp_path), tmp_path / "o.onnx", verify=False)
    opset = {r.name: r for r in result.remedies}["opset"]
    assert opset.status == "refused" and "imports no ai.onnx opset" in opset.detail, opset
    assert "invalid version" not in opset.detail


def test_a_static_batch_is_reported_as_the_batch_used_and_dynamic_asked_is_explained(cli, tmp_path):
    """Issue 25 item 7: "holds at batch 1" for a file whose batch is 2; ``--batch dynamic`` ignored silently."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    source = _save(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y]), tmp_path)
    done = cli("fix", str(source), "-o", str(tmp_path / "o.onnx"), "--batch", "dynamic")
    assert done.exit_code == 0, done.output
    assert "holds at batch 2" in done.stdout
    assert "--batch dynamic changed nothing" in done.stderr
    quiet = cli("fix", str(source), "-o", str(tmp_path / "p.onnx"))
    assert "--batch dynamic" not in quiet.stderr


def test_a_change_in_an_output_with_nans_is_not_called_random(tmp_path, monkeypatch):
    """onnx-mlir ``opset_11.onnx``: the random-op check compared outputs whose shared NaNs were zeroed to a
    rerun with its NaNs, so a remedy that changed results (Hardmax 11 -> 18) was misreported as "random ops"."""
    import onnx_ir as ir

    from portable.repair import REMEDIES, Remedy
    from portable.repair import run as fix_run

    class _Shift(ir.passes.InPlacePass):
        def call(self, model):
            for value in model.graph.initializers.values():
                value.const_value = ir.tensor(value.const_value.numpy() + np.float32(1), name=value.name)
            return ir.passes.PassResult(model, modified=True)

    monkeypatch.setattr(fix_run, "REMEDIES", (*REMEDIES, Remedy("shift", lambda p, m: _Shift())))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    bias = numpy_helper.from_array(np.zeros(16, np.float32), "bias")
    nodes = [helper.make_node("Log", ["x"], ["l"]), helper.make_node("Add", ["l", "bias"], ["y"])]  # NaN where x < 0
    result = fix(_save(_model(nodes, [x], [y], [bias]), tmp_path), tmp_path / "o.onnx")
    shift = {r.name: r for r in result.remedies}["shift"]
    assert shift.status == "refused" and shift.detail.startswith("changes what the model computes"), shift
    assert result.proof is not None and result.proof.ok and result.proof.random is None


def _time_conv(dim0: int) -> onnx.ModelProto:
    """tract's ``qtdnn`` shape: dim 0 of the one input (declared ``dim0``) is a time axis a VALID convolution
    of kernel 3 runs over: at 1 step the original itself cannot run, at 3 it can."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    x.type.tensor_type.shape.dim[0].dim_value = dim0
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])
    y.type.tensor_type.shape.dim[0].dim_value = dim0
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(5, 4, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Unsqueeze", ["x", "zero"], ["x3"]), helper.make_node("Transpose", ["x3"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("Conv", ["xt", "w"], ["c"], kernel_shape=[3], auto_pad="VALID"),
             helper.make_node("Transpose", ["c"], ["ct"], perm=[0, 2, 1]), helper.make_node("Squeeze", ["ct", "zero"], ["y"])]
    zero = numpy_helper.from_array(np.array([0], dtype=np.int64), "zero")
    return _model(nodes, [x], [y], [w, zero])


def test_a_batch_the_original_cannot_run_is_said_not_proven_and_a_negative_dim_0_is_the_batch(tmp_path):
    """tract ``qtdnn_10x5_101_i32_biases``: dim 0 declared -1 was read as static (proved at batch 1 only,
    where the original's convolution refuses one step: "the proof cannot run"), and shape arithmetic on -1
    wrote an output dim of -3."""
    result = fix(_save(_time_conv(-1), tmp_path), tmp_path / "o.onnx")
    remedies = {r.name: r for r in result.remedies}
    assert remedies["negative-dims"].status == "applied" and "input 'x' [-1, 4]" in remedies["negative-dims"].detail
    assert "input 'x' dim 0 (unnamed" in remedies["batch"].detail
    proof = result.proof
    assert proof is not None and proof.ok and proof.batches == (3,) and proof.unavailable is None
    assert set(proof.skipped) == {1} and "cannot run the original at batch 1" in proof.skipped[1]
    assert "not proven where the original itself cannot run" in proof.message
    assert result.to_dict()["proof"]["skipped"] == {"1": proof.skipped[1]}
    shapes = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in onnx.load(tmp_path / "o.onnx").graph.output]
    assert shapes == [["batch-2", 5]]  # a time axis, honestly not a batch: PORT008 stays
    assert {f.rule_id for f in result.remaining} == {"PORT008"}


def test_a_proof_with_no_batch_the_original_runs_cannot_run(tmp_path):
    """The same graph with dim 0 fixed at 1: the original runs at no batch, so there is nothing to prove on."""
    with pytest.raises(FixFailed) as caught:
        fix(_save(_time_conv(1), tmp_path), tmp_path / "o.onnx")
    proof = caught.value.result.proof
    assert proof is not None and not proof.ok and proof.unavailable and "batch 1" in proof.unavailable
    assert caught.value.exit_code == ExitCode.ERROR and not (tmp_path / "o.onnx").exists()


def test_scatter_elements_indices_are_drawn_within_the_data(tmp_path):
    """burn-onnx ``scatter_elements_max.onnx``: int64 indices into a 3x3 data drawn in [0, 10) broke the proof."""
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 3])
    idx = helper.make_tensor_value_info("indices", TensorProto.INT64, [2, 3])
    upd = helper.make_tensor_value_info("updates", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])
    node = helper.make_node("ScatterElements", ["data", "indices", "updates"], ["y"], name="scatter", reduction="max")
    result = fix(_save(_model([node], [data, idx, upd], [y]), tmp_path), tmp_path / "o.onnx")
    assert result.proof is not None and result.proof.ok, result.proof.message
    assert result.proof.constraints == {"indices": ["[0, 3): indices of ScatterElements 'scatter' into axis 0 of size 3"]}


def test_a_custom_op_no_runtime_here_has_is_a_finding_exit_1_not_an_error(cli, tmp_path):
    """onnxruntime-extensions' test models (``ai.onnx.contrib::NegPos``...): ONNX Runtime cannot load the original,
    so no proof can run, because of the op PORT002 names: a finding of the model (exit 1), not "cannot run" (3)."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("out0", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("NegPos", ["X"], ["out0"], domain="ai.onnx.contrib", name="np")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.contrib", 1)])
    path = _save(model, tmp_path)
    with pytest.raises(FixFailed) as caught:
        fix(path, tmp_path / "o.onnx")
    assert caught.value.exit_code == ExitCode.FINDINGS and caught.value.result.unrunnable_ops == ("ai.onnx.contrib::NegPos",)
    assert "no kernel for here (ai.onnx.contrib::NegPos: PORT002" in str(caught.value) and "--inputs" not in str(caught.value)
    result = cli("fix", str(path), "-o", str(tmp_path / "o.onnx"))
    assert result.exit_code == 1 and not (tmp_path / "o.onnx").exists()
    assert "nothing written (no proof held" in result.stdout and "--strict" not in result.stdout
    # an op ONNX Runtime loads and whose run fails on the seeded inputs (the GQA decoders of onnxruntime-genai)
    # is not this case: the proof cannot run for want of consistent inputs, exit 3 as before
    from dataclasses import replace

    ran = replace(caught.value.result.proof, unavailable="ONNX Runtime cannot run the original at batch 1: NegPos: bad input")
    other = replace(caught.value.result, proof=ran)
    assert other.unrunnable_ops == () and other.exit_code == ExitCode.ERROR


def test_bernoulli_probabilities_are_drawn_in_0_1_and_the_model_is_named_random(tmp_path):
    """burn-onnx ``opset_compliance/opset_22.onnx``: normal draws fed to a Bernoulli's probabilities ("p < 0, p > 1")
    kept the proof from running (exit 3); drawn in [0, 1) it runs, and the model is random: a finding, exit 1."""
    p = helper.make_tensor_value_info("p", TensorProto.FLOAT, [64, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])
    model = _model([helper.make_node("Bernoulli", ["p"], ["y"], name="coin")], [p], [y], opset=22)
    with pytest.raises(FixFailed) as caught:
        fix(_save(model, tmp_path), tmp_path / "o.onnx")
    proof = caught.value.result.proof
    assert proof is not None and proof.random and "Bernoulli 'coin'" in proof.random and proof.unavailable is None
    assert proof.constraints == {"p": ["[0, 1): probabilities of Bernoulli 'coin'"]}
    assert caught.value.exit_code == ExitCode.FINDINGS


def test_a_dim_0_the_original_runs_at_one_size_only_is_not_a_batch_exit_1(cli, tmp_path):
    """``x[N, 4]`` reshaped to a constant ``[1, 4]``: the original runs at batch 1 only. Proven there, the
    fixed file would declare a dynamic batch that fails at 3: not ``ok``, exit 1, and the text says why."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    shape = numpy_helper.from_array(np.array([1, 4], dtype=np.int64), "shape")
    path = _save(_model([helper.make_node("Reshape", ["x", "shape"], ["y"])], [x], [y], [shape]), tmp_path)
    result = fix(path, tmp_path / "o.onnx")
    assert result.proof is not None and result.proof.ok and result.proof.batches == (1,) and set(result.proof.skipped) == {3}
    assert not result.ok and result.exit_code == ExitCode.FINDINGS and not result.remaining
    text = cli("fix", str(path), "-o", str(tmp_path / "c.onnx"), "--force")
    assert text.exit_code == 1 and "dim 0 is not a free batch: the original itself does not run at batch 3" in text.stdout


def test_an_op_ort_lacks_beside_a_custom_op_it_has_is_not_blamed_on_the_custom_op(tmp_path):
    """``Tan`` in float64 (no ONNX Runtime CPU kernel) feeding ``com.microsoft::Gelu`` (which it has): the load
    fails for Tan, so the proof cannot run (exit 3); PORT002's Gelu is not named as the cause."""
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 3])
    nodes = [helper.make_node("Tan", ["x"], ["t"]), helper.make_node("Gelu", ["t"], ["y"], domain="com.microsoft")]
    graph = helper.make_graph(nodes, "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(FixFailed) as caught:
        fix(_save(model, tmp_path), tmp_path / "o.onnx")
    assert "Tan" in (caught.value.result.proof.unavailable or "")
    assert caught.value.result.unrunnable_ops == () and caught.value.exit_code == ExitCode.ERROR
