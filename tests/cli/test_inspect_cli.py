"""`portable inspect`: what a file holds (I/O, op counts with subgraphs, initializer bytes without
opening external data or copying lean payloads) and the verdict of the same parse."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from support import rule_fixtures, save

from portable.report import op_change
from portable.validators.summary import inspect


def _model(weights: int = 70_000) -> onnx.ModelProto:
    """x[batch, N] + w (float32, ``weights`` elements: a lean payload), Relu, then Gather of 3 columns."""
    w = numpy_helper.from_array(np.arange(weights, dtype=np.float32), "w")
    ids = numpy_helper.from_array(np.array([0, 1, 2], dtype=np.int64), "ids")
    nodes = [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Gather", ["r", "ids"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", weights])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])], [w, ids])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="maker")
    model.producer_version = "1.2"
    return model


def test_summary_of_a_lean_parse(tmp_path):
    path = save(_model(), tmp_path / "m.onnx")
    summary = inspect(path)
    assert [s.to_dict() for s in summary.inputs] == [{"name": "x", "dtype": "float32", "shape": ["batch", 70_000]}]
    assert summary.outputs[0].shape == ("batch", 3)
    assert summary.initializers == 2 and summary.initializer_bytes == 70_000 * 4 + 3 * 8
    assert dict(summary.ops) == {"Add": 1, "Relu": 1, "Gather": 1} and summary.nodes == 3
    assert summary.producer == "maker 1.2" and dict(summary.opsets) == {"ai.onnx": 18}
    assert summary.verdict() == "portable: yes"


def test_subgraph_ops_counted_and_the_verdict_names_the_rules(cli, tmp_path):
    path = save(rule_fixtures.load("PORT004", "bad"), tmp_path / "if.onnx")
    result = cli("inspect", str(path))
    assert result.exit_code == 0
    assert f"portable: no (PORT004 x1); see `portable validate {path}`" in result.output
    ops = json.loads(cli("inspect", str(path), "--format", "json").output)["ops"]
    branch_ops = {n.op_type for a in onnx.load(path).graph.node for g in a.attribute if g.type == g.GRAPH
                  for n in g.g.node}
    assert branch_ops and branch_ops <= set(ops)


def test_external_data_counted_not_opened(cli, tmp_path):
    model = _model(weights=8)
    onnx.save(model, tmp_path / "ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.data", size_threshold=0)
    (tmp_path / "ext.data").unlink()  # counted from dims and type: the data file is never read
    data = json.loads(cli("inspect", str(tmp_path / "ext.onnx"), "--format", "json").output)
    assert data["initializers"] == {"count": 2, "bytes": 8 * 4 + 3 * 8}
    assert data["exit_code"] == 0 and data["portable"]["ok"] is False and data["portable"]["rules"] == ["PORT010"]


def test_unreadable_file_exits_3(cli, tmp_path):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    result = cli("inspect", str(empty))
    assert result.exit_code == 3 and str(empty) in result.output


def test_op_change_line():
    change = op_change({"Identity": 12, "Conv": 4, "Constant": 3}, {"Conv": 4, "Cast": 1})
    assert change.line() == "nodes 19 -> 5 (Identity -12, Constant -3, Cast +1)"
    assert op_change({"Conv": 2}, {"Conv": 2}).line() == "nodes 2 -> 2 (no op changed)"


def test_a_file_that_cannot_be_judged_exits_3_as_validate_does(cli, tmp_path):
    model = rule_fixtures.load("PORT004", "good")
    model.graph.node[0].name = "badX"
    path = tmp_path / "corrupt.onnx"  # a name that is not UTF-8 text: validation's "corrupt file"
    path.write_bytes(model.SerializeToString().replace(b"badX", b"bad\xff"))
    validated = cli("validate", str(path))
    result = cli("inspect", str(path), "--format", "json")
    assert validated.exit_code == 3 == result.exit_code
    assert json.loads(result.stdout)["exit_code"] == 3
