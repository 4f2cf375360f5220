"""What judges each output (portable/quantization/judging.py), and the default floor by kind: the rules on small
graphs whose answer is known, the floor on logits whose confidence bands are known (issue 45 item 4, issue 48
item 3)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from portable.errors import UsageError
from portable.quantization.accuracy import check_budgets, compare_outputs
from portable.quantization.judging import output_kinds, parse_judge, recorded_task
from portable.quantization.settings import DEFAULT_FLOOR, DEFAULT_GOAL

RNG = np.random.default_rng(0)


def _graph(last: str, width: int = 6) -> onnx.ModelProto:
    """x [batch, 4] -> a linear layer (MatMul + bias Add) -> ``last`` (an op on the linear output, or "none")."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="MatMul"),
             helper.make_node("Add", ["mm", "b"], ["lin"], name="Add")]
    out = "lin"
    if last != "none":
        nodes.append(helper.make_node(last, ["lin"], ["y"], name=last))
        out = "y"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", width])],
                              [numpy_helper.from_array(RNG.standard_normal((4, width)).astype(np.float32), "w"),
                               numpy_helper.from_array(np.zeros(width, np.float32), "b")])
    return helper.make_model(graph)


def _kind(proto: onnx.ModelProto, value: np.ndarray, **options):
    name = proto.graph.output[0].name
    return output_kinds(proto, {name: value}, {}, **options)[name]


def test_a_linear_head_is_logits_a_pooling_an_embedding_a_sigmoid_a_tensor():
    value = RNG.standard_normal((8, 6)).astype(np.float32)
    assert _kind(_graph("none"), value).kind == "logits"  # MatMul + bias Add: a classifier head
    assert _kind(_graph("Softmax"), value).kind == "logits"
    assert _kind(_graph("Tanh"), value).kind == "embedding"  # a pooler's Tanh: a vector
    assert _kind(_graph("Sigmoid"), value).kind == "tensor"  # independent probabilities
    unit = value / np.linalg.norm(value, axis=1, keepdims=True)
    normalized = _kind(_graph("none"), unit)  # F.normalize's rows are unit length, whatever made them
    assert normalized.kind == "embedding" and "unit length" in normalized.why


def test_the_manifests_task_the_name_and_judge_come_first(tmp_path):
    value = RNG.standard_normal((8, 6)).astype(np.float32)
    head = _graph("Tanh")
    assert _kind(head, value, task="text-classification").kind == "logits"
    assert _kind(_graph("none"), value, task="feature-extraction").kind == "embedding"
    assert _kind(head, value, overrides={"y": "tensor"}).why == "--judge y=tensor"
    head.graph.output[0].name, head.graph.node[-1].output[0] = "logits", "logits"
    assert _kind(head, value).kind == "logits" and "named 'logits'" in _kind(head, value).why
    model = tmp_path / "m.onnx"
    (tmp_path / "m.onnx.json").write_text(json.dumps({"task": "image-classification"}))
    assert recorded_task(model) == "image-classification" and recorded_task(tmp_path / "other.onnx") is None
    with pytest.raises(UsageError, match="OUTPUT=KIND"):
        parse_judge(["y=vector"])
    with pytest.raises(UsageError, match="not an output"):
        output_kinds(head, {"logits": value}, {}, overrides={"z": "tensor"})


def test_token_embeddings_are_judged_on_the_positions_the_mask_marks_real():
    states = RNG.standard_normal((4, 10, 8))
    mask = np.ones((4, 10), np.int64)
    mask[:, 5:] = 0
    noisy = states.copy()
    noisy[:, 5:] = RNG.standard_normal((4, 5, 8))  # padding positions: unrelated vectors, never read
    ln = helper.make_graph([helper.make_node("LayerNormalization", ["h", "s", "b"], ["out"], axis=-1)], "g",
                           [helper.make_tensor_value_info("h", TensorProto.FLOAT, ["batch", 10, 8])],
                           [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 10, 8])],
                           [numpy_helper.from_array(np.ones(8, np.float32), "s"),
                            numpy_helper.from_array(np.zeros(8, np.float32), "b")])
    kinds = output_kinds(helper.make_model(ln), {"out": states}, {"attention_mask": mask})
    assert kinds["out"].kind == "embedding" and kinds["out"].positions == "attention_mask"
    (row,) = compare_outputs(["out"], [states], [noisy], kinds, {"attention_mask": mask})
    assert row.cosine_mean == pytest.approx(1.0) and row.positions == "attention_mask" and row.top1_agreement is None
    (unmasked,) = compare_outputs(["out"], [states], [noisy])
    assert unmasked.cosine_mean < 0.7


def _logits(sure: int, unsure: int, classes: int = 10) -> np.ndarray:
    """``sure`` rows with one class far ahead (top-1 probability about 0.99), ``unsure`` rows nearly flat."""
    rows = RNG.standard_normal((sure + unsure, classes)) * 0.1
    rows[np.arange(sure), RNG.integers(0, classes, sure)] += 6.0
    return rows.astype(np.float32)


def _judged(expected: np.ndarray, actual: np.ndarray, floor=DEFAULT_FLOOR):
    (row,) = compare_outputs(["logits"], [expected], [actual], {"logits": output_kinds(
        _graph("none", expected.shape[1]), {"lin": expected}, {})["lin"]})
    return row, check_budgets(floor, [row])


def test_a_model_good_where_it_is_sure_is_not_refused_for_noise_where_it_cannot_classify():
    float_logits = _logits(40, 160)
    int8 = float_logits + 0.05 * RNG.standard_normal(float_logits.shape).astype(np.float32)
    row, checks = _judged(float_logits, int8)
    sure, unsure = row.bands
    assert (sure.samples, unsure.samples) == (40, 160) and sure.top1_agreement == 1.0
    assert unsure.top1_agreement < 0.8 and row.top1_agreement < 0.9  # the old floor's 90 % over all refused it
    assert [c.budget for c in checks] == ["min-top1-confident", "min-sqnr"] and all(c.passed for c in checks)
    assert unsure.kl_divergence > sure.kl_divergence > 0


def test_a_broken_model_is_still_refused():
    float_logits = _logits(40, 160)
    flipped = float_logits[:, ::-1].copy()  # argmax moved on every row: what a saturated layer does
    _, checks = _judged(float_logits, flipped)
    assert [c.passed for c in checks] == [False, False]
    _, checks = _judged(float_logits, float_logits + 1.0 * RNG.standard_normal(float_logits.shape).astype(np.float32))
    assert not all(c.passed for c in checks)  # noise as large as the unsure rows' logits


def test_logits_with_few_confident_samples_are_judged_by_sqnr_and_the_goal_asks_more():
    float_logits = _logits(3, 100)
    row, checks = _judged(float_logits, float_logits + 0.01 * RNG.standard_normal(float_logits.shape).astype(np.float32))
    assert [c.budget for c in checks] == ["min-sqnr"] and checks[0].limit == 20.0 and "only 3" in checks[0].why
    good = _logits(40, 160)
    _, floor = _judged(good, good + 0.2 * RNG.standard_normal(good.shape).astype(np.float32))
    _, goal = _judged(good, good + 0.2 * RNG.standard_normal(good.shape).astype(np.float32), DEFAULT_GOAL)
    assert all(c.passed for c in floor) and not all(c.passed for c in goal)  # 10 dB floor, 20 dB goal


def test_judge_on_the_command_line_judges_the_output_as_told(cli, cnn, tmp_path):
    """``--judge linear=tensor``: the CNN's logits judged as a tensor, by SQNR alone, and the report says so."""
    args = ("quantize", str(cnn), "-o", str(tmp_path / "q.onnx"), "--samples", "16", "--eval-samples", "16",
            "--search-limit", "0", "--no-latency", "--no-per-node", "--format", "json", "--force")
    told = json.loads(cli(*args, "--judge", "linear=tensor").stdout)
    assert told["accuracy"][0]["kind"] == "tensor" and told["accuracy"][0]["why"] == "--judge linear=tensor"
    assert [c["budget"] for c in told["budget_checks"]] == ["min-sqnr"]
    assert json.loads(cli(*args).stdout)["accuracy"][0]["kind"] == "logits"
