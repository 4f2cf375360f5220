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


def _attention(mask_name: str, ids_name: str = "ids", mask_type: int = TensorProto.INT64):
    """Scores from token ids, a padding mask on the attention path (sdpa's boolean Where), and the ids compared
    with the pad id on the way too (as models that build their own mask do)."""
    ids = helper.make_tensor_value_info(ids_name, TensorProto.INT64, ["batch", 6])
    mask = helper.make_tensor_value_info(mask_name, mask_type, ["batch", 6])
    table = numpy_helper.from_array(np.ones((40, 6), np.float32), "table")
    pad = numpy_helper.from_array(np.array(0, np.int64), "pad")
    low = numpy_helper.from_array(np.array(-1e4, np.float32), "low")
    nodes = [helper.make_node("Gather", ["table", ids_name], ["scores"], name="embed"),
             helper.make_node("Cast", [mask_name], ["keep"], to=TensorProto.BOOL),
             helper.make_node("Equal", [ids_name, "pad"], ["is_pad"]),
             helper.make_node("Not", ["is_pad"], ["not_pad"]),
             helper.make_node("And", ["keep", "not_pad"], ["both"]),
             helper.make_node("Where", ["both", "scores", "low"], ["masked"], name="mask_scores"),
             helper.make_node("Softmax", ["masked"], ["y"], axis=-1, name="attn")]
    return _model(nodes, [ids, mask], [table, pad, low])


def test_a_padding_mask_is_found_by_its_path_to_the_softmax_and_drawn_as_real_padding():
    from portable.runners.constraints import MASK_DRAW, describe
    from portable.runners.inputs import draws

    found = constraints_of(_attention("keep_these"))
    assert [c.mask for c in found["keep_these"]] == [True]
    assert describe(found)["keep_these"] == [f"{MASK_DRAW}: it feeds Where 'mask_scores' on the attention path "
                                             "(to Softmax 'attn')"]
    assert [(c.low, c.high, c.mask) for c in found["ids"]] == [(0, 40, False)]  # ids index first, never a mask
    specs = [InputSpec("ids", "int64", ("batch", 6)), InputSpec("keep_these", "int64", ("batch", 6))]
    for batch in (1, 5):
        mask = make_feeds(specs, batch, seed=3, constraints=found, observed={"keep_these": (0, 8)})["keep_these"]
        kept = mask.sum(axis=1)
        assert (mask == (np.arange(6) < kept[:, None])).all() and (kept >= 1).all() and (kept < 6).all()
    # precedence: a range the user gives, then the graph's analysis, then the example's own range
    assert draws(specs, constraints=found, int_ranges={"keep_these": (1, 2)})["keep_these"].ints == (1, 2)
    assert draws(specs, constraints=found, observed={"ids": (0, 8)})["ids"].ints == (0, 40)
    assert draws(specs, observed={"ids": (0, 8)})["ids"].ints == (0, 8)


def test_a_mask_by_name_or_none_at_all():
    named = constraints_of(_attention("attention_mask", mask_type=TensorProto.FLOAT))
    assert [c.why for c in named["attention_mask"]] == ["transformers' name 'attention_mask'"]
    # a float input on the attention path is no mask by its path alone (an additive bias, a temperature...)
    assert "bias" not in constraints_of(_attention("bias", mask_type=TensorProto.FLOAT))
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [6])
    plain = _model([helper.make_node("Cast", ["x"], ["f"], to=TensorProto.FLOAT),
                    helper.make_node("Softmax", ["f"], ["y"])], [x])
    assert constraints_of(plain) == {}  # reaches a Softmax, but through no Where or Mul
