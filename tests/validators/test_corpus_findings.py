"""``portable validate`` findings that were wrong on other projects' files (issue 26), each from a small
graph built like the file; each failed on the code before the issue."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from portable.findings import Severity
from portable.validators import validate


def _save(tmp_path: Path, nodes, inputs, outputs, initializers=(), opsets=(("", 18),)) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=10)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return path


def _by_rule(path: Path) -> dict[str, list]:
    found: dict[str, list] = {}
    for f in validate(path).findings:
        found.setdefault(f.rule_id, []).append(f)
    return found


def test_group_normalization_21_gets_its_shape_from_its_body(tmp_path):
    """burn-onnx ``group_norm.onnx``: onnx infers no shape for GroupNormalization-21: a false PORT009."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 2, 3])
    weights = [numpy_helper.from_array(np.ones(6, np.float32), "scale"),
               numpy_helper.from_array(np.zeros(6, np.float32), "bias")]
    relu = helper.make_node("Relu", ["g"], ["y"])
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["g"], num_groups=3, name="gn")
    found = _by_rule(_save(tmp_path, [node, relu], [x], [y], weights, opsets=(("", 21),)))
    assert "PORT009" not in found, found.get("PORT009")
    assert "PORT001" in found  # opset 21: the model is still not portable, for the right reason


def test_dropout_with_a_constant_true_training_mode_is_random(tmp_path):
    """burn-onnx ``dropout.onnx``: only PORT001 was reported."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    consts = [numpy_helper.from_array(np.array(0.5, np.float32), "ratio"), numpy_helper.from_array(np.array(True), "t")]
    node = helper.make_node("Dropout", ["x", "ratio", "t"], ["y"], name="drop")
    found = _by_rule(_save(tmp_path, [node], [x], [y], consts))
    assert [f.location.describe() for f in found["PORT012"]] == ["main, node 'drop' (Dropout)"]


def test_dropout_in_inference_mode_is_not_random(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    consts = [numpy_helper.from_array(np.array(0.5, np.float32), "ratio"), numpy_helper.from_array(np.array(False), "t")]
    node = helper.make_node("Dropout", ["x", "ratio", "t"], ["y"], name="drop")
    assert "PORT012" not in _by_rule(_save(tmp_path, [node], [x], [y], consts))


def test_an_unknown_shape_from_a_custom_op_is_info_under_that_node(tmp_path):
    """Values below a custom-domain op (PORT002's error) were a PORT009 error too."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    nodes = [helper.make_node("Mystery", ["x"], ["m"], domain="com.example", name="custom"),
             helper.make_node("Relu", ["m"], ["r"]), helper.make_node("Abs", ["r"], ["y"])]
    found = _by_rule(_save(tmp_path, nodes, [x], [y], opsets=(("", 18), ("com.example", 1))))
    assert "PORT002" in found
    assert [(f.severity, f.location.describe()) for f in found["PORT009"]] == [
        (Severity.INFO, "main, node 'custom' (com.example::Mystery), value 'm'")]


def test_port009_keeps_the_batch_symbol_in_the_shape(tmp_path):
    """``[1, seq_len]`` was printed for ``[batch_size, seq_len]`` (the analysis fixes the batch to 1, 2, 3)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch_size", "seq_len"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch_size", "seq_len"])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Abs", ["r"], ["y"])]
    messages = [f.message for f in _by_rule(_save(tmp_path, nodes, [x], [y])).get("PORT009", [])]
    assert messages and "shape [batch_size, seq_len]" in messages[0], messages


def test_unnamed_nodes_are_labelled_as_unnamed_by_path_and_index_never_by_an_invented_name():
    """Issue 26: nested unnamed Ifs were all "If_1", names the file does not have. Each is now
    ``<unnamed If #i>`` under its scope path; a named node keeps its name."""
    from portable.policy import Policy

    def branch(depth: int) -> onnx.GraphProto:
        out = helper.make_tensor_value_info("o", TensorProto.FLOAT, [1])
        if depth == 0:
            return helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], f"leaf{depth}", [], [out])
        inner = helper.make_node("If", ["c"], ["o"], then_branch=branch(depth - 1), else_branch=branch(depth - 1))
        return helper.make_graph([helper.make_node("Identity", ["x"], ["x2"]), inner], f"g{depth}", [], [out])

    top = helper.make_node("If", ["c"], ["y"], then_branch=branch(1), else_branch=branch(1))
    named = helper.make_node("Relu", ["y"], ["z"], name="If_1")  # a real name that the old stand-in would repeat
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["x1"]), top, named], "m",
                              [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])])
    report = validate(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), Policy())
    located = {(f.location.graph, f.location.node) for f in report.findings if f.rule_id == "PORT004"}
    assert ("main", "<unnamed If #1>") in located
    assert ("main/<unnamed If #1>.then_branch", "<unnamed If #1>") in located
    assert ("main/<unnamed If #1>.else_branch", "<unnamed If #1>") in located
    assert all(node != "If_1" for _, node in located)
