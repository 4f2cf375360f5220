"""The ``int32-indices`` remedy (issue 21, item 5; issue 32, item 2): int64 indices to int32 where every value
provably fits, opt-in through a target whose sources want int32 (``fix --target nnapi``, ``--target webnn``),
proven by ONNX Runtime and checked bit for bit here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

from portable.exporters.remedies import Int32IndicesPass, RemedyRefused
from portable.policy import Policy
from portable.repair import fix
from portable.repair.remedies import INT32_TARGETS, TableLine, int32_targets, says

INT64_MAX = np.iinfo(np.int64).max


def _model(indices: list[int], path: Path, steps: int | None = None) -> Path:
    """x[batch, 6, 4] -> Gather(axis 1, indices) -> Slice(axis 2, 1:INT64_MAX[:steps]) -> Reshape(batch, -1)."""
    width = 3 if steps is None else 1
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", len(indices) * width])
    inits = [numpy_helper.from_array(np.array(indices, np.int64), "idx"),
             numpy_helper.from_array(np.array([1], np.int64), "starts"),
             numpy_helper.from_array(np.array([INT64_MAX], np.int64), "ends"),
             numpy_helper.from_array(np.array([2], np.int64), "axes"),
             numpy_helper.from_array(np.array([0, -1], np.int64), "shape")]
    slice_inputs = ["g", "starts", "ends", "axes"]
    if steps is not None:
        inits.append(numpy_helper.from_array(np.array([steps], np.int64), "steps"))
        slice_inputs.append("steps")
    nodes = [helper.make_node("Gather", ["x", "idx"], ["g"], axis=1, name="gather"),
             helper.make_node("Slice", slice_inputs, ["s"], name="slice"),
             helper.make_node("Reshape", ["s", "shape"], ["y"], name="reshape")]
    return _save(helper.make_graph(nodes, "g", [x], [y], inits), path)


def _webnn_model(path: Path) -> Path:
    """What WebNN's users meet (microsoft/onnxruntime#29756: int64 Cast and Reshape): int32 ids cast up to int64
    and reshaped for a Gather, beside a Gather of constant int64 indices.

    ids[2] (int32) -> Cast(int64) -> Reshape([1, 2]) -> Gather(x, axis 1) -> Flatten ┐
    x[batch, 6, 4] -> Gather(axis 1, [5, 0, 2]) -> Flatten ────────────────────────────┴ Concat -> y[batch, 20]
    """
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 4])
    ids = helper.make_tensor_value_info("ids", TensorProto.INT32, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 20])
    inits = [numpy_helper.from_array(np.array([5, 0, 2], np.int64), "idx"),
             numpy_helper.from_array(np.array([1, 2], np.int64), "pair")]
    nodes = [helper.make_node("Cast", ["ids"], ["ids64"], to=TensorProto.INT64, name="widen"),
             helper.make_node("Reshape", ["ids64", "pair"], ["ids2"], name="reshape"),
             helper.make_node("Gather", ["x", "ids2"], ["g1"], axis=1, name="by_ids"),
             helper.make_node("Flatten", ["g1"], ["f1"], axis=1, name="flat1"),
             helper.make_node("Gather", ["x", "idx"], ["g2"], axis=1, name="by_constant"),
             helper.make_node("Flatten", ["g2"], ["f2"], axis=1, name="flat2"),
             helper.make_node("Concat", ["f1", "f2"], ["y"], axis=1, name="concat")]
    return _save(helper.make_graph(nodes, "g", [x, ids], [y], inits), path)


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def _types(path: Path) -> dict[str, int]:
    model = onnx.load(str(path))
    found = {n.op_type: n for n in model.graph.node}
    types = {i.name: i.data_type for i in model.graph.initializer}
    return {"gather": types[found["Gather"].input[1]], "slice_ends": types[found["Slice"].input[2]],
            "reshape": types[found["Reshape"].input[1]]}


def _int64_values(path: Path) -> list[str]:
    """Every int64 tensor of the model (initializers and computed values), by name."""
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)), strict_mode=True)
    typed = [*model.graph.value_info, *model.graph.input, *model.graph.output]
    return sorted({i.name for i in model.graph.initializer if i.data_type == TensorProto.INT64}
                  | {v.name for v in typed if v.type.tensor_type.elem_type == TensorProto.INT64})


def _same_outputs(original: Path, fixed: Path, feeds: dict[str, np.ndarray]) -> None:
    """ONNX Runtime's outputs of both models on the same inputs, equal bit for bit."""
    import onnxruntime as ort

    def run(path: Path) -> list[np.ndarray]:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return session.run(None, feeds)

    first, second = run(original), run(fixed)
    assert len(first) == len(second)
    for a, b in zip(first, second):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def _x(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).standard_normal((batch, 6, 4)).astype(np.float32)


def _remedy(result) -> object:
    return next(r for r in result.remedies if r.name == "int32-indices")


# -- nnapi --------------------------------------------------------------------------------------------------

def test_fix_for_nnapi_turns_indices_to_int32_and_proves_it(tmp_path: Path) -> None:
    source = _model([5, 0, 2], tmp_path / "in.onnx")
    out = tmp_path / "out.onnx"
    result = fix(source, out, policy=Policy(targets=("nnapi",)))
    statuses = {r.name: r.status for r in result.remedies}
    assert statuses["int32-indices"] == "applied", result.remedies
    assert result.proof is not None and result.proof.ok and result.written
    assert all(o["passed"] and o["elements"] > 0 for c in result.proof.comparisons for o in c["outputs"])
    assert _types(out) == {"gather": TensorProto.INT32, "slice_ends": TensorProto.INT32,
                           "reshape": TensorProto.INT64}  # Reshape's shape is int64 in the schema: it stays
    ends = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(out)).graph.initializer}
    assert np.iinfo(np.int32).max in {int(v) for a in ends.values() for v in a.ravel()}  # INT64_MAX clamped
    for batch in (1, 3):
        _same_outputs(source, out, {"x": _x(batch)})


def test_the_remedy_is_opt_in(tmp_path: Path) -> None:
    source = _model([5, 0, 2], tmp_path / "in.onnx")
    result = fix(source, tmp_path / "out.onnx")
    assert {r.name: r.status for r in result.remedies}["int32-indices"] == "skipped"
    assert _types(tmp_path / "out.onnx")["gather"] == TensorProto.INT64
    for index, target in enumerate(("tensorrt", "webgpu")):  # webgpu: no entry (its Gather takes int64 indices)
        other = fix(source, tmp_path / f"out{index}.onnx", policy=Policy(targets=(target,)), force=True)
        assert {r.name: r.status for r in other.remedies}["int32-indices"] == "skipped", target


def test_a_slice_with_a_computed_index_input_stays_int64(tmp_path: Path) -> None:
    model = ir.load(str(_model([5, 0, 2], tmp_path / "in.onnx")))
    slice_node = next(n for n in model.graph if n.op_type == "Slice")
    shape = ir.node("Shape", [model.graph.inputs[0]], attributes={"start": 2, "end": 3})  # int64, computed
    model.graph.insert_before(slice_node, shape)
    slice_node.replace_input_with(2, shape.outputs[0])
    result = Int32IndicesPass()(model)
    assert result.modified  # the Gather's indices still converted
    assert {n.op_type: n.inputs[1].dtype for n in result.model.graph if n.op_type in ("Gather", "Slice")} == {
        "Gather": ir.DataType.INT32, "Slice": ir.DataType.INT64}


def test_fix_cli_target_nnapi_reports_the_remedy(cli, tmp_path: Path) -> None:
    import json

    source = _model([1, 3], tmp_path / "in.onnx")
    result = cli("fix", str(source), "-o", str(tmp_path / "out.onnx"), "--target", "nnapi", "--format", "json")
    data = json.loads(result.stdout)
    assert {r["name"]: r["status"] for r in data["remedies"]}["int32-indices"] == "applied"
    assert _types(tmp_path / "out.onnx")["gather"] == TensorProto.INT32
    assert cli("fix", str(source), "-o", str(tmp_path / "x.onnx"), "--target", "bogus").exit_code == 2


# -- webnn: int64 Cast and Reshape -------------------------------------------------------------------------

def test_fix_for_webnn_leaves_no_int64_but_the_reshape_shape(tmp_path: Path) -> None:
    """Before issue 32 the remedy skipped webnn: the Cast to int64, the int64 Reshape and both Gathers' int64
    indices all stayed."""
    source = _webnn_model(tmp_path / "in.onnx")
    out = tmp_path / "out.onnx"
    assert _int64_values(source) == ["ids2", "ids64", "idx", "pair"]
    result = fix(source, out, policy=Policy(targets=("webnn",)))
    remedy = _remedy(result)
    assert remedy.status == "applied", result.remedies
    assert remedy.detail == "int64 -> int32 for webnn: 'idx' (Gather 'by_constant'), Cast 'widen' from int32 removed (Gather 'by_ids')"
    assert result.ok and result.exit_code == 0 and not result.remaining
    nodes = onnx.load(str(out)).graph.node
    shapes = {n.input[1] for n in nodes if n.op_type == "Reshape"}  # int64 in ONNX's schema; WebNN reads them itself
    assert "pair" in shapes and set(_int64_values(out)) == shapes  # the optimizer made the Flattens Reshapes too
    assert "Cast" not in [n.op_type for n in nodes]  # int32 -> int64 -> int32 indices: the Cast went
    assert result.partitions["webnn"] == {"before": 1, "after": 1, "before_batch_fixed": None, "after_batch_fixed": None}


def test_fix_for_webnn_is_exact(tmp_path: Path) -> None:
    source = _webnn_model(tmp_path / "in.onnx")
    out = tmp_path / "out.onnx"
    result = fix(source, out, policy=Policy(targets=("webnn",)))
    assert result.proof is not None and result.proof.ok and result.proof.max_abs_diff == 0.0
    for batch in (1, 3):
        for ids in ([0, 5], [3, 3], [-1, -6]):  # negative indices count from the end, in int32 as in int64
            _same_outputs(source, out, {"x": _x(batch), "ids": np.array(ids, np.int32)})


def test_a_cast_from_a_narrow_type_casts_to_int32_and_one_from_float_stays(tmp_path: Path) -> None:
    model = ir.load(str(_webnn_model(tmp_path / "in.onnx")))
    model.graph.inputs[1].dtype = ir.DataType.UINT8  # uint8 ids: every value an int32 value
    scores = ir.Value(name="scores", shape=ir.Shape([3]), type=ir.TensorType(ir.DataType.FLOAT))
    model.graph.inputs.append(scores)
    by_constant = next(n for n in model.graph if n.name == "by_constant")
    from_float = ir.node("Cast", [scores], attributes={"to": ir.DataType.INT64}, name="from_float")
    model.graph.insert_before(by_constant, from_float)
    by_constant.replace_input_with(1, from_float.outputs[0])  # float -> int64: a value may pass int32's range
    original = tmp_path / "uint8.onnx"
    ir.save(model, str(original))
    result = Int32IndicesPass()(model)
    casts = {n.name: (n.attributes["to"].as_int(), n.outputs[0].dtype) for n in result.model.graph if n.op_type == "Cast"}
    assert casts == {"widen": (ir.DataType.INT32, ir.DataType.INT32), "from_float": (ir.DataType.INT64, None)}  # untouched
    reshape = next(n for n in result.model.graph if n.op_type == "Reshape")
    assert (reshape.outputs[0].dtype, reshape.inputs[1].dtype) == (ir.DataType.INT32, ir.DataType.INT64)
    assert Int32IndicesPass.narrowed(result.model) == []  # done: nothing left to narrow
    fixed = tmp_path / "narrowed.onnx"
    ir.save(result.model, str(fixed))
    onnx.checker.check_model(onnx.load(str(fixed)), full_check=True)
    for batch in (1, 3):
        _same_outputs(original, fixed, {"x": _x(batch), "ids": np.array([5, 1], np.uint8),
                                        "scores": np.array([2.7, -1.2, 0.0], np.float32)})


def test_a_cast_whose_values_also_feed_arithmetic_stays(tmp_path: Path) -> None:
    model = ir.load(str(_webnn_model(tmp_path / "in.onnx")))
    widen = next(n for n in model.graph if n.name == "widen")
    concat = next(n for n in model.graph if n.op_type == "Concat")
    added = ir.node("Add", [widen.outputs[0], widen.outputs[0]], name="twice")  # int64 arithmetic: not an index
    model.graph.insert_before(concat, added)
    model.graph.outputs.append(added.outputs[0])
    Int32IndicesPass()(model)
    assert widen.attributes["to"].as_int() == ir.DataType.INT64 and widen.outputs[0].dtype is None  # untouched


# -- a value that does not fit: left, and named ------------------------------------------------------------

def test_an_index_beyond_int32_is_left_and_named(tmp_path: Path) -> None:
    source = _model([5, 0, 2], tmp_path / "in.onnx", steps=2**40)  # a Slice step beyond int32: one element
    out = tmp_path / "out.onnx"
    result = fix(source, out, policy=Policy(targets=("webnn",)))
    remedy = _remedy(result)
    assert remedy.status == "applied"
    assert remedy.detail == ("int64 -> int32 for webnn: 'idx' (Gather 'gather'); "
                             "left 'steps' (used by Slice 'slice'): a value does not fit int32")
    types = {i.name: i.data_type for i in onnx.load(str(out)).graph.initializer}
    slice_node = next(n for n in onnx.load(str(out)).graph.node if n.op_type == "Slice")
    assert {types[name] for name in slice_node.input[1:]} == {TensorProto.INT64}  # the whole Slice stays int64
    assert _types(out)["gather"] == TensorProto.INT32
    assert result.proof is not None and result.proof.ok
    for batch in (1, 3):
        _same_outputs(source, out, {"x": _x(batch)})


def test_nothing_else_to_convert_refuses_naming_the_value(tmp_path: Path) -> None:
    model = ir.load(str(_model([5, 0, 2], tmp_path / "in.onnx", steps=2**40)))
    model.graph.initializers["idx"].const_value = ir.tensor(np.array([2**40, 0, 2], np.int64), name="idx")
    assert Int32IndicesPass.unfit(model) == ["'idx' (used by Gather 'gather')", "'steps' (used by Slice 'slice')"]
    with pytest.raises(RemedyRefused, match="do not fit in int32: 'idx' .*, 'steps' "):
        Int32IndicesPass()(model)


# -- which targets: each entry's words are its profile's ------------------------------------------------------

def test_the_targets_and_their_words() -> None:
    assert int32_targets(["ort-cpu", "webgpu", "webnn", "coreml", "nnapi"]) == ["webnn", "nnapi"]
    assert not says("webnn", TableLine("lacks", "types: int64 is fine", ""))  # other words: the entry is off
    assert not says("nnapi", TableLine("ai.onnx:Gather", "Input indices may be int64.", ""))


@pytest.mark.parametrize("target", sorted(INT32_TARGETS))
def test_each_quoted_line_is_its_profiles_words(target: str) -> None:
    assert says(target, INT32_TARGETS[target]), f"{target}'s profile no longer says {INT32_TARGETS[target].words!r}"
