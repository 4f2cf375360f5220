"""The ``int32-indices`` remedy (issue 21, item 5): constant int64 indices to int32 where every value fits,
opt-in through a target whose table wants int32 (``fix --target nnapi``), proven by ONNX Runtime."""

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

INT64_MAX = np.iinfo(np.int64).max


def _model(indices: list[int], path: Path) -> Path:
    """x[batch, 6, 4] -> Gather(axis 1, indices) -> Slice(axis 2, 1:INT64_MAX) -> Reshape(batch, -1)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", len(indices) * 3])
    inits = [numpy_helper.from_array(np.array(indices, np.int64), "idx"),
             numpy_helper.from_array(np.array([1], np.int64), "starts"),
             numpy_helper.from_array(np.array([INT64_MAX], np.int64), "ends"),
             numpy_helper.from_array(np.array([2], np.int64), "axes"),
             numpy_helper.from_array(np.array([0, -1], np.int64), "shape")]
    nodes = [helper.make_node("Gather", ["x", "idx"], ["g"], axis=1, name="gather"),
             helper.make_node("Slice", ["g", "starts", "ends", "axes"], ["s"], name="slice"),
             helper.make_node("Reshape", ["s", "shape"], ["y"], name="reshape")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 18)])
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


def test_the_remedy_is_opt_in(tmp_path: Path) -> None:
    source = _model([5, 0, 2], tmp_path / "in.onnx")
    result = fix(source, tmp_path / "out.onnx")
    assert {r.name: r.status for r in result.remedies}["int32-indices"] == "skipped"
    assert _types(tmp_path / "out.onnx")["gather"] == TensorProto.INT64
    other = fix(source, tmp_path / "out2.onnx", policy=Policy(targets=("tensorrt",)), force=True)
    assert {r.name: r.status for r in other.remedies}["int32-indices"] == "skipped"


def test_indices_beyond_int32_are_refused(tmp_path: Path) -> None:
    model = ir.load(str(_model([5, 0, 2], tmp_path / "in.onnx")))
    model.graph.initializers["idx"].const_value = ir.tensor(np.array([2**40, 0, 2], np.int64), name="idx")
    with pytest.raises(RemedyRefused, match="do not fit in int32: 'idx'"):
        Int32IndicesPass()(model)


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
