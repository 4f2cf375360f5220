"""Per target, the nodes counted by their tables' verdict as winml-cli's analyze counts them: supported,
partial (listed with a restriction stated in words, which portable does not check: PORT204),
unsupported (listed, but not this version or element type, or as not supported) and unknown (the table
does not name the op); in text, JSON and SARIF; and the ``--fail-on partial|unsupported`` gate."""

from __future__ import annotations

import json

from onnx import TensorProto, helper
from support import save


def _model(erf_type: int = TensorProto.FLOAT) -> helper.ModelProto:
    """Conv (nnapi lists it with "Only 2D Conv is supported.") -> Relu -> Cast -> Erf on ``erf_type``."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 1, 1, 1], [1.0, -2.0])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["t"], to=erf_type, name="cast"),
             helper.make_node("Erf", ["t"], ["y"], name="erf")]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info("y", erf_type, [1, 2, 4, 4])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def _targets(cli, path, *args):
    result = cli("validate", "--target", "nnapi,ort-cpu", "--format", "json", *args, str(path))
    report = json.loads(result.output)["reports"][0]
    return result, {t["name"]: t for t in report["targets"]}, report


def test_each_node_is_counted_once_by_its_verdict(cli, tmp_path):
    _, targets, _ = _targets(cli, save(_model(), tmp_path / "m.onnx"))
    # nnapi: Conv's restriction is stated, not checked; its table does not name Erf
    assert targets["nnapi"]["verdicts"] == {"supported": 2, "partial": 1, "unsupported": 0, "unknown": 1}
    assert targets["ort-cpu"]["verdicts"] == {"supported": 4, "partial": 0, "unsupported": 0, "unknown": 0}
    assert "by its tables: 2 supported, 1 partial, 0 unsupported, 1 unknown" in targets["nnapi"]["line"]
    assert "by its tables" not in targets["ort-cpu"]["line"]  # all plainly supported: the head says so


def test_a_listed_op_on_a_type_its_kernels_lack_is_unsupported_not_unknown(cli, tmp_path):
    _, targets, _ = _targets(cli, save(_model(TensorProto.INT32), tmp_path / "m.onnx"))
    assert targets["ort-cpu"]["verdicts"] == {"supported": 3, "partial": 0, "unsupported": 1, "unknown": 0}


def test_fail_on_unsupported_fails_on_an_unknown_op_and_passes_without_one(cli, tmp_path):
    path = save(_model(), tmp_path / "m.onnx")
    result, _, report = _targets(cli, path, "--fail-on", "unsupported")
    assert result.exit_code == 1 and report["exit_code"] == 1
    gates = [f["message"] for f in report["findings"] if f["rule"] == "PORT203" and f["severity"] == "error"]
    assert len(gates) == 1 and "--fail-on unsupported: 1 node (1 unknown)" in gates[0]
    result = cli("validate", "--target", "ort-cpu", "--fail-on", "unsupported", str(path))
    assert result.exit_code == 0, result.output


def test_fail_on_partial_also_fails_on_a_stated_restriction(cli, tmp_path):
    path = save(_model(), tmp_path / "m.onnx")
    result, _, report = _targets(cli, path, "--fail-on", "partial")
    assert result.exit_code == 1
    gate = next(f["message"] for f in report["findings"] if f["rule"] == "PORT203" and f["severity"] == "error")
    assert "--fail-on partial: 2 nodes (1 partial, 1 unknown)" in gate


def test_fail_on_needs_a_target_and_a_known_kind(cli, tmp_path):
    path = save(_model(), tmp_path / "m.onnx")
    result = cli("validate", "--fail-on", "unsupported", str(path))
    assert result.exit_code == 2 and "apply to targets" in result.output
    assert cli("validate", "--target", "nnapi", "--fail-on", "all", str(path)).exit_code == 2


def test_sarif_carries_the_counts(cli, tmp_path):
    result = cli("validate", "--target", "nnapi", "--format", "sarif", str(save(_model(), tmp_path / "m.onnx")))
    (target,) = json.loads(result.output)["runs"][0]["artifacts"][0]["properties"]["targets"]
    assert target["verdicts"]["unknown"] == 1 and target["verdicts"]["partial"] == 1
