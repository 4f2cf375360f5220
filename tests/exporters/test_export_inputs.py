"""Issue 25 item 4: ``-i NAME=SHAPE[:dtype]`` binds by forward's parameter names, not by position; a name
that is not an input is exit 2 listing the real ones; a dtype left out is the example's."""

from __future__ import annotations

import onnx
import pytest

from portable.errors import UsageError
from portable.exporters.inputs import parse_input
from portable.exporters.spec_export import bind_inputs
from portable.spec import load_spec

SPEC = "fixtures/models/tokens.py:build"


def test_inputs_given_out_of_order_bind_by_name_with_the_examples_dtype(cli, tmp_path):
    out = tmp_path / "tokens.onnx"
    result = cli("export", SPEC, "-i", "attention_mask=1x12", "-i", "input_ids=1x12", "-o", str(out), "-q")
    assert result.exit_code == 0, result.output
    graph = onnx.load(out).graph
    inputs = {i.name: i.type.tensor_type.elem_type for i in graph.input}
    assert list(inputs) == ["input_ids", "attention_mask"]  # forward's order
    assert set(inputs.values()) == {onnx.TensorProto.INT64}  # not float32: the examples are int64
    [gather] = [n for n in graph.node if n.op_type == "Gather" and n.input[1] in inputs]
    assert gather.input[1] == "input_ids"  # the embedding is fed the token ids, not the mask


def test_a_name_that_is_not_an_input_is_exit_2_listing_the_real_names(cli, tmp_path):
    result = cli("export", SPEC, "-i", "input_idz=1x12", "-o", str(tmp_path / "m.onnx"))
    assert result.exit_code == 2, result.output
    assert "-i input_idz: not an input of TokenClassifier.forward (its inputs: input_ids, attention_mask)" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_binding_rules():
    loaded = load_spec(SPEC)
    module, examples = loaded.module, loaded.example_inputs
    bound = bind_inputs(module, [parse_input("attention_mask=1x12:int32"), parse_input("input_ids=1x12")], examples)
    assert [(s.name, s.dtype) for s in bound] == [("input_ids", "int64"), ("attention_mask", "int32")]  # given wins
    with pytest.raises(UsageError, match="attention_mask.*given twice|given twice"):
        bind_inputs(module, [parse_input("input_ids=1x12"), parse_input("input_ids=1x12")], examples)
    with pytest.raises(UsageError, match="input_ids not given, and forward has no default for it"):
        bind_inputs(module, [parse_input("attention_mask=1x12")], examples)
    no_examples = bind_inputs(module, [parse_input("input_ids=1x12"), parse_input("attention_mask=1x12")], None)
    assert [s.dtype for s in no_examples] == ["float32", "float32"]  # nothing to take a dtype from
