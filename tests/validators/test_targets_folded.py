"""Constant nodes on the targets ONNX Runtime hosts: ONNX Runtime turns each into an initializer when it
loads the graph (``Graph::Graph`` in ``onnxruntime/core/graph/graph.cc``), before any provider sees it,
so no kernel table lists Constant and no provider is asked for one; onnx2tf (``litert``) lowers it to a
constant tensor before it dispatches the rest. The profiles say so as data (``folded``): such a node is
not judged and is not a node of the partition estimate. The runtimes that read Constant as an op
(OpenVINO's frontend, tract) keep judging it from their own tables."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import save

from portable.policy import Policy
from portable.validators import validate
from portable.validators.targets import TARGETS, load_profile

ORT_HOSTED = [name for name in TARGETS if load_profile(name).runtime == "onnxruntime"]


def _constant_then(op: str, *, tail: str | None = None) -> helper.ModelProto:
    """x (2x3 float) -> ``op``(x, c) with c a Constant node, then ``tail``(.) when given."""
    value = numpy_helper.from_array(np.ones((2, 3), np.float32), "value")
    nodes = [helper.make_node("Constant", [], ["c"], value=value, name="const"),
             helper.make_node(op, ["x", "c"], ["t" if tail else "y"], name=op.lower())]
    if tail:
        nodes.append(helper.make_node(tail, ["t"], ["y"], name=tail.lower()))
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def test_the_targets_onnx_runtime_hosts_fold_constant_and_the_others_do_not():
    assert {"ort-cpu", "ort-cuda", "directml", "webnn", "qnn", "nnapi", "coreml", "tensorrt"} <= set(ORT_HOSTED)
    for name in (*ORT_HOSTED, "litert"):
        profile = load_profile(name)
        assert profile.folded == ("*:Constant",), name
        assert profile.folds("", "Constant") and not profile.folds("", "Identity"), name
    for name in ("openvino", "tract"):  # Constant is an op of their tables
        assert load_profile(name).folded == () and load_profile(name).entry("", "Constant") is not None, name


def test_a_constant_node_is_no_error_on_any_onnx_runtime_target(cli, tmp_path):
    path = str(save(_constant_then("Add"), tmp_path / "const_add.onnx"))
    result = cli("validate", "--target", ",".join(ORT_HOSTED), "--format", "json", path)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["reports"][0]
    assert [f for f in report["findings"] if f["rule"] in ("PORT201", "PORT203")] == []
    for target in report["targets"]:  # the Constant is an initializer there: one node, the Add
        assert (target["name"], target["nodes"], target["supported"], target["fallback"]) == \
               (target["name"], 1, 1, {}), target
        assert target["loads"] or target["falls_back"]


def test_the_text_lines_count_the_nodes_onnx_runtime_partitions(cli, tmp_path):
    path = str(save(_constant_then("Add"), tmp_path / "const_add.onnx"))
    result = cli("validate", "--target", "ort-cpu,webnn,ort-cuda", path)
    assert result.exit_code == 0, result.output
    assert "  target   ort-cpu: 1/1 nodes, loads" in result.output
    assert "  target   webnn: 1/1 nodes, loads" in result.output
    assert "  target   ort-cuda: 1/1 nodes, 1 partition, nothing falls back" in result.output
    assert "Constant" not in result.output


def test_a_folded_constant_is_not_a_partition_of_its_own(tmp_path):
    """CoreML has no Min: Constant -> Min -> Relu is one partition (the Relu) with Min on the CPU. Were the
    Constant a supported node, it would close a partition of its own before the Min."""
    path = save(_constant_then("Min", tail="Relu"), tmp_path / "const_min.onnx")
    (coreml,) = validate(path, Policy(targets=("coreml",))).targets
    assert (coreml.nodes, coreml.supported, coreml.partitions, dict(coreml.fallback)) == (2, 1, 1, {"Min": 1})


def test_a_constant_is_still_judged_where_the_runtime_reads_it_as_an_op(tmp_path):
    """OpenVINO and tract read Constant as an op of their tables: it is a node there, and supported."""
    path = save(_constant_then("Add"), tmp_path / "const_add.onnx")
    for summary in validate(path, Policy(targets=("openvino", "tract"))).targets:
        assert (summary.nodes, summary.supported, summary.loads) == (2, 2, True), summary


def test_onnx_runtime_itself_assigns_the_constant_to_no_provider(cli, tmp_path):
    """The live answer of ONNX Runtime agrees: one node, on the CPU provider."""
    pytest.importorskip("onnxruntime")
    path = str(save(_constant_then("Add"), tmp_path / "const_add.onnx"))
    result = cli("validate", "--target", "ort-cpu", "--live", path)
    assert result.exit_code == 0, result.output
    assert "ort-cpu: 1/1 nodes, loads; live (onnxruntime " in result.output
    assert "): loads, 1 node on CPUExecutionProvider" in result.output
