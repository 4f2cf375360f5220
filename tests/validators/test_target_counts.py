"""What a target's line counts (issue 48, items 6 and 7): the nodes of its partition estimate and the nodes of
its tables' verdicts are the same nodes (a Constant ONNX Runtime folds at load is in neither), and a target that
takes under half the nodes says first that the model does not run there as it is, and is a warning."""

from __future__ import annotations

import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from support import save

from portable.policy import Policy
from portable.validators import validate


def _constants_min_relu(batch: int | str = 2) -> helper.ModelProto:
    """x -> Min(x, c1) -> Add(., c2) -> Relu, c1 and c2 Constant nodes: CoreML has no Min."""
    const = [helper.make_node("Constant", [], [f"c{i}"], name=f"const{i}",
                              value=numpy_helper.from_array(np.full((3,), i, np.float32), f"v{i}")) for i in (1, 2)]
    nodes = [*const, helper.make_node("Min", ["x", "c1"], ["m"], name="min"),
             helper.make_node("Add", ["m", "c2"], ["a"], name="add"), helper.make_node("Relu", ["a"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def test_the_tables_counts_and_the_node_count_are_the_same_nodes(tmp_path):
    """Issue 48.6: "qnn: 616/672 nodes ... by its tables: 912 supported" counted Constant nodes in one figure only."""
    path = save(_constants_min_relu(), tmp_path / "constants.onnx")
    for summary in validate(path, Policy(targets=("coreml", "qnn", "ort-cpu", "openvino"))).targets:
        counts = dict(summary.counts)
        assert sum(counts.values()) == summary.nodes, (summary.name, counts, summary.nodes)
    (coreml,) = validate(path, Policy(targets=("coreml",))).targets
    assert coreml.nodes == 3 and dict(coreml.counts)["unknown"] == 1  # Min; the two Constants are not nodes there
    assert coreml.line().endswith("by its tables: 2 supported, 0 partial, 0 unsupported, 1 unknown")


def test_a_target_that_takes_under_half_the_nodes_says_so_first_and_warns(cli, tmp_path):
    """Issue 48.7: NNAPI and CoreML need fixed sizes; on a dynamic-batch file they take nothing."""
    path = str(save(_constants_min_relu("batch"), tmp_path / "dynamic.onnx"))
    result = cli("validate", "--target", "nnapi,coreml", "--format", "json", path)
    report = json.loads(result.output)["reports"][0]
    for target in report["targets"]:
        assert target["supported"] * 2 < target["nodes"], target
        assert target["line"].startswith(f"{target['name']}: does not run there as it is: 0/3 nodes"), target["line"]
    warned = [f for f in report["findings"] if f["rule"] == "PORT203"]
    assert {f["severity"] for f in warned} == {"warning"} and len(warned) == 2
    assert all("does not run there as it is" in f["message"] for f in warned)
    assert cli("validate", "--target", "nnapi,coreml", "--strict", path).exit_code == 1
    fixed = str(save(_constants_min_relu(1), tmp_path / "fixed.onnx"))  # nnapi takes all 3 there: no such words
    (nnapi,) = validate(fixed, Policy(targets=("nnapi",))).targets
    assert nnapi.supported == 3 and "does not run there" not in nnapi.line()
