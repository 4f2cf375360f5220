"""runners/constraints.py: the ranges a graph's consumers give its inputs, and make_feeds drawing in them."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from portable.runners.constraints import constraints_of
from portable.runners.inputs import InputSpec, make_feeds


def _model(nodes, inputs, initializers=()):
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", inputs, [out], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_each_consumer_gives_its_range_and_feeds_keep_it():
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [2, 7])
    div = helper.make_tensor_value_info("div", TensorProto.INT64, [3])
    scales = helper.make_tensor_value_info("scales", TensorProto.FLOAT, [4])
    table = numpy_helper.from_array(np.zeros((5, 3), np.float32), "table")
    nodes = [helper.make_node("Reshape", ["idx", "shape"], ["flat"]),
             helper.make_node("GatherElements", ["table", "flat"], ["g"], axis=0, name="ge"),
             helper.make_node("Mod", ["div", "div"], ["m"]),
             helper.make_node("Resize", ["x", "", "scales"], ["r"], name="rs")]
    found = constraints_of(_model(nodes, [idx, div, scales], [table]))
    assert [(c.low, c.high) for c in found["idx"]] == [(0, 5)]
    assert [(c.low, c.high) for c in found["div"]] == [(1, 10)]
    assert [(c.low, c.high, c.floats) for c in found["scales"]] == [(1, 2, True)]
    specs = [InputSpec("idx", "int64", (2, 7)), InputSpec("div", "int64", (3,)), InputSpec("scales", "float32", (4,))]
    feeds = make_feeds(specs, 1, constraints=found)
    assert feeds["idx"].min() >= 0 and feeds["idx"].max() < 5 and feeds["idx"].max() > 0
    assert (feeds["div"] != 0).all() and (feeds["scales"] >= 1).all() and (feeds["scales"] < 2).all()
    plain = make_feeds(specs, 1)
    assert plain["idx"].max() >= 5  # without the analysis, ids run past the 5 rows (the corpus' failure)


def test_an_unknown_dim_gives_no_constraint():
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [4])
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3])
    found = constraints_of(_model([helper.make_node("Gather", ["data", "idx"], ["y"])], [idx, data]))
    assert found == {}
