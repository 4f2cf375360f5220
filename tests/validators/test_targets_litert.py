"""The LiteRT profile (onnx2tf's flatbuffer_direct converter): its three parsers on small files in their
upstream formats, its pinned sources, and what a model meets there: no fallback (a node the dispatch
registry lacks fails the conversion: an error), the converter's element types (no bfloat16: an error),
Constant lowered to a constant tensor (not judged), and the README's constraints stated on the node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import save

from portable.validators.targets import TARGETS, load_profile, parsers
from portable.validators.targets import generate as gen

REGISTRY = '''
_CUSTOM_OP_CANDIDATES = {
    "Hidden": "not a dispatch entry",
}

_DISPATCH_REGISTRY: Dict[str, DispatchEntry] = {
    "Widen": DispatchEntry(
        onnx_op="Widen",
        validation=ValidationSpec(min_inputs=1, max_inputs=1, extra={"Nested": DispatchEntry(onnx_op="x")}),
    ),
    "Pick": DispatchEntry(onnx_op="Pick", tflite_ops=["GATHER"]),
}

_AFTER = {
    "Later": DispatchEntry(onnx_op="Later"),
}
'''

README = """## `flatbuffer_direct` execution path

|ONNX OP|TFLite OP|Key constraints (flatbuffer_direct)|
|:-|:-|:-|
|Widen|ADD|-|
|Pick|GATHER|`axis` must be constant|

|ONNX OP|Default policy|When enabled|
|:-|:-|:-|
|Later|explicit_error|CUSTOM|
"""

TYPES = """_ONNX_TYPE_TO_TFLITE_DTYPE = {
    onnx.TensorProto.FLOAT: "FLOAT32",
    onnx.TensorProto.DOUBLE: "FLOAT64",
    onnx.TensorProto.INT64: "INT64",
    onnx.TensorProto.BOOL: "BOOL",
}
"""


def test_the_registry_gives_its_top_level_entries_by_op_type():
    assert sorted(parsers.onnx2tf_registry(REGISTRY).ops) == ["*:Pick", "*:Widen"]
    with pytest.raises(ValueError, match="_DISPATCH_REGISTRY"):
        parsers.onnx2tf_registry("nothing here")


def test_the_readme_gives_each_ops_key_constraints():
    assert parsers.onnx2tf_constraints(README) == {"Widen": "", "Pick": "`axis` must be constant"}
    with pytest.raises(ValueError, match="Key constraints"):
        parsers.onnx2tf_constraints("|OP|Status|\n|:-|:-:|\n|Abs|ok|\n")


def test_the_type_map_gives_the_element_types():
    assert parsers.onnx2tf_element_types(TYPES) == ("float32", "float64", "int64", "bool")
    with pytest.raises(ValueError):
        parsers.onnx2tf_element_types("")


def test_the_profile_carries_its_pinned_sources_and_no_fallback():
    profile = load_profile("litert")
    pins = (gen.ONNX2TF_REGISTRY, gen.ONNX2TF_README, gen.ONNX2TF_TYPES)
    assert "litert" in TARGETS and gen.SPECS["litert"].pins == pins
    assert [(s.repository, s.path, s.commit, s.blob) for s in profile.sources] == \
           [(p.repository, p.path, p.commit, p.blob) for p in pins]
    assert profile.fallback is None and profile.folded == ("*:Constant",) and len(profile.ops) == 192
    assert "bfloat16" not in (profile.element_types or ()) and "float32" in (profile.element_types or ())


def _model(nodes: list, elem: int, tmp_path: Path, name: str) -> str:
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", elem, [2, 3])],
                              [helper.make_tensor_value_info("y", elem, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return str(save(model, tmp_path / f"{name}.onnx"))


def test_an_op_the_registry_lacks_stops_the_conversion(cli, tmp_path):
    scan_body = helper.make_graph([helper.make_node("Identity", ["s"], ["s2"])], "body",
                                  [helper.make_tensor_value_info("s", TensorProto.FLOAT, [3])],
                                  [helper.make_tensor_value_info("s2", TensorProto.FLOAT, [3])])
    scan = helper.make_node("Scan", ["x"], ["y"], name="scan", body=scan_body, num_scan_inputs=0)
    result = cli("validate", "--target", "litert", "--select", "PORT201,PORT203", _model([scan], TensorProto.FLOAT, tmp_path, "scan"))
    assert result.exit_code == 1, result.output
    assert "error   PORT201" in result.output
    assert "litert: Scan is not in litert's table; the model does not load there (no fallback)" in result.output
    assert "  target   litert: 0/1 nodes, does not load: Scan x1" in result.output


def test_bfloat16_stops_the_conversion_and_a_constant_is_lowered(cli, tmp_path):
    relu = helper.make_node("Relu", ["x"], ["y"], name="relu")
    bf16 = cli("validate", "--target", "litert", "--select", "PORT201", _model([relu], TensorProto.BFLOAT16, tmp_path, "bf16"))
    assert bf16.exit_code == 1 and "litert: input 0 'x' is bfloat16; litert takes " in bf16.output
    assert "fix: cast to float32 in the PyTorch model" in bf16.output
    value = numpy_helper.from_array(np.ones((2, 3), np.float32), "value")
    nodes = [helper.make_node("Constant", [], ["c"], value=value, name="const"), helper.make_node("Add", ["x", "c"], ["y"])]
    add = cli("validate", "--target", "litert", _model(nodes, TensorProto.FLOAT, tmp_path, "const_add"))
    assert add.exit_code == 0, add.output
    assert "  target   litert: 1/1 nodes, loads" in add.output


def test_a_readme_constraint_is_stated_on_the_node_it_restricts(cli, tmp_path):
    pads = helper.make_tensor("pads", TensorProto.INT64, [4], [0, 1, 0, 1])
    graph = helper.make_graph([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="edge")], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])], initializer=[pads])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    result = cli("validate", "--target", "litert", "--select", "PORT204", str(save(model, tmp_path / "pad.onnx")))
    assert "PORT204 [target-restrictions] main, node 'pad' (Pad): litert: 1 Pad node; its table states: " \
           "`mode` in `{constant,reflect}`" in result.output
