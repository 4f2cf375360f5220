"""The shape analysis on graphs like real ones: batch-sized masks, permute + pool, batch 1, chains, spectral ops."""

from __future__ import annotations

import logging

import onnx
import pytest
from support import rule_fixtures

from portable.policy import Policy
from portable.validators import shapes, validate

SHAPE_RULES = Policy(select=("PORT007", "PORT008", "PORT009"))


def _found(rule: str, kind: str, policy: Policy = SHAPE_RULES) -> list[tuple[str, str, str | None, str]]:
    report = validate(rule_fixtures.load(rule, kind), policy)
    assert report.error is None, report.error
    return sorted((f.rule_id, f.severity.value, f.location.node, f.message) for f in report.findings)


BATCH_ONLY = " from the batch size only (allowed with a dynamic batch)"


def test_batch_sized_range_mask_is_batch_only():
    """transformers 5 builds masks from torch.arange over the batch: Range -> Unsqueeze -> Expand -> Less -> Where."""
    assert _found("PORT009", "range_mask") == [
        ("PORT007", "info", "<unnamed Expand #8>", "Expand input 1 ('full') is computed at run time" + BATCH_ONLY),
        ("PORT007", "info", "<unnamed Range #5>", "Range input 1 ('b') is computed at run time" + BATCH_ONLY),
    ]


def test_permute_then_global_average_pool_is_batch_only():
    """torch's decomposition of AdaptiveAvgPool2d after a permute (ConvNeXt, Swin), frozen from torch.onnx."""
    assert _found("PORT009", "permute_pool") == [
        ("PORT007", "info", "node_Range_14", "Range input 1 ('sym_size_int_1') is computed at run time" + BATCH_ONLY),
    ]


def test_squeeze_without_axes_changes_rank_at_batch_one():
    ((rule, severity, node, message),) = _found("PORT009", "squeeze_batch")
    assert (rule, severity, node) == ("PORT009", "error", "<unnamed Squeeze #0>")
    assert message == ("output 's' changes rank with the batch size ([8] at batch 1; [2, 8] at batch 2; "
                       "[3, 8] at batch 3), shape [8]; 1 later value(s) are not static either")


def test_two_resizes_in_a_row_need_rounds_of_infer_and_fold():
    assert _found("PORT007", "resize_chain") == [
        ("PORT007", "info", "<unnamed Resize #11>", "Resize input 3 ('size0') is computed at run time" + BATCH_ONLY),
        ("PORT007", "info", "<unnamed Resize #20>", "Resize input 3 ('size1') is computed at run time" + BATCH_ONLY),
    ]
    runs = shapes.analyse(rule_fixtures.load("PORT007", "resize_chain"), ("batch",))
    assert [(r.batch, r.rounds, r.dims["y"]) for r in runs] == [(b, 3, (b, 3, 30, 30)) for b in (1, 2, 3)]


def test_one_round_is_not_enough_for_the_resize_chain(monkeypatch):
    """The bad case the fixed point exists for: stopping after one round leaves the second Resize unknown."""
    monkeypatch.setattr(shapes, "MAX_ROUNDS", 1)
    found = _found("PORT007", "resize_chain")
    assert [(r, s, n) for r, s, n, _ in found] == [
        ("PORT007", "error", "<unnamed Resize #20>"), ("PORT007", "info", "<unnamed Resize #11>"),
        ("PORT009", "error", "<unnamed Resize #11>"),
    ]


@pytest.mark.parametrize("kind,node,value", [("stft", "<unnamed STFT #1>", "step"), ("dft", "<unnamed DFT #0>", "length"),
                                             ("affine_grid", "<unnamed AffineGrid #0>", "size")])
def test_spectral_and_grid_sizes_from_inputs_are_flagged(kind, node, value):
    found = [f for f in _found("PORT007", kind, Policy(select=("PORT007",)))]
    op = node.split()[1]  # "<unnamed STFT #1>": the op
    assert found == [("PORT007", "error", node,
                      f"{op} input 1 ('{value}') is a graph input, so the caller decides the output shape")]


def test_spectral_sizes_as_constants_are_clean():
    model = rule_fixtures.load("PORT007", "stft")
    step = model.graph.input.pop()  # make the frame step a constant: 8
    model.graph.initializer.append(onnx.helper.make_tensor(step.name, onnx.TensorProto.INT64, [], [8]))
    report = validate(model, SHAPE_RULES)
    assert report.findings == ()


def test_initializer_that_is_also_an_input_is_named_so():
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, 4, 8] x, int64[2] target) => (float[batch, 32] y) <int64[2] target = {-1, 32}> {
      y = Reshape(x, target)
    }""")
    (finding,) = validate(model, Policy(select=("PORT007",))).findings
    assert finding.message == ("Reshape input 1 ('target') is an initializer that the caller may override "
                               "(it is also a graph input), so the caller decides the output shape")


def test_port009_leaves_dynamic_graph_outputs_to_port008():
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, seq] x) => (float[batch, seq] y) {
      h = Relu(x)
      y = Relu(h)
    }""")
    found = sorted((f.rule_id, f.location.value) for f in validate(model, SHAPE_RULES).findings)
    assert found == [("PORT008", "x"), ("PORT008", "y"), ("PORT009", "h")]


def test_port009_still_judges_a_static_output_that_does_not_resolve():
    found = _found("PORT007", "stft", Policy(select=("PORT009",)))
    assert found == [("PORT009", "error", "<unnamed STFT #1>", "output 'y' has unknown rank, shape ?")]


def test_folder_warnings_go_to_debug_not_stderr(capfd, caplog):
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, 64] x) => (float[batch, 64] y) {
      c = Constant <value = float[1] {1}> ()
      s1 = Constant <value = int64[1] {1}> ()
      s2 = Constant <value = int64[1] {64}> ()
      s = Concat <axis = 0> (s1, s2)
      r = Reshape(c, s)
      y = Add(x, r)
    }""")
    with caplog.at_level(logging.DEBUG, logger="portable.validators.shapes"):
        shapes.analyse(model, ("batch",))
    assert any("Evaluation failed" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)
    out, err = capfd.readouterr()
    assert out == err == ""


def test_large_initializers_stay_out_of_the_copy():
    weight = onnx.helper.make_tensor("w", onnx.TensorProto.FLOAT, [128, 128], [0.0] * 128 * 128)
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, 128] x) => (float[batch, 128] y) { y = MatMul(x, w) }""")
    model.graph.initializer.append(weight)
    copy = shapes.skeleton(model, ("batch",), 2)
    assert not copy.graph.initializer and [v.name for v in copy.graph.input] == ["x", "w"]
    assert [r.dims["y"] for r in shapes.analyse(model, ("batch",))] == [(1, 128), (2, 128), (3, 128)]


def test_error_says_at_which_batch_inference_failed():
    failed = shapes.ShapeAnalysis(runs=(shapes.FixedBatch(batch=1, error="boom"), shapes.FixedBatch(batch=2)),
                                  candidates=())
    assert failed.error == "boom (batch fixed to 1)"
    assert not failed.runs[0].is_constant("<unnamed Reshape #0>", 1)
    assert shapes.ShapeAnalysis(runs=(shapes.FixedBatch(batch=None, error="boom"),), candidates=()).error == "boom"


@pytest.mark.parametrize(("rule", "kind"), [("PORT009", "good"), ("PORT009", "squeeze_batch"), ("PORT008", "good")])
def test_inference_alone_gives_what_folding_gives_when_nothing_is_left_to_fold(monkeypatch, rule, kind):
    """Models whose shapes ONNX inference resolves alone skip the folder (start-up: no onnx-ir, no
    onnxscript); the result must be the one the fold-to-a-fixed-point path gives."""
    model = rule_fixtures.load(rule, kind)
    quick = shapes.analyse(model, ("batch",))
    monkeypatch.setattr(shapes, "_static_by_inference", lambda _model, _batch: None)
    full = shapes.analyse(model, ("batch",))
    outputs = [o for node in model.graph.node for o in node.output]
    assert [[q.dims.get(o) for o in outputs] for q in quick] == [[f.dims.get(o) for o in outputs] for f in full]
    assert [q.error for q in quick] == [f.error for f in full] == [None, None, None]


def test_a_shape_input_left_to_compute_takes_the_folding_path():
    """A Reshape whose target is computed (Concat of constants) is not resolved by inference alone."""
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, 64] x) => (float[batch, 64] y) {
      a = Constant <value = int64[1] {-1}> ()
      b = Constant <value = int64[1] {64}> ()
      s = Concat <axis = 0> (a, b)
      y = Reshape(x, s)
    }""")
    assert shapes._static_by_inference(shapes.skeleton(model, ("batch",), 2), 2) is None
    assert all(run.rounds >= 1 and run.is_constant("<unnamed Reshape #3>", 1) for run in shapes.analyse(model, ("batch",)))


def test_port009_does_not_judge_an_output_nothing_reads():
    """Old Dropouts have an optional mask output that ONNX infers no shape for; unused, it carries no
    shape into the graph (light_bvlc_alexnet's r19). Read by a node, it is judged."""
    def model(body: str) -> onnx.ModelProto:
        proto = onnx.parser.parse_model(f"""<ir_version: 8, opset_import: ["" : 18, "x" : 1]>
        g (float[2, 8] x) => (float[2, 8] y) {{
          r = Relu(x)
          m = x.Mask(x)
          {body}
        }}""")
        return proto

    rule = Policy(select=("PORT009",))
    assert validate(model("y = Relu(r)"), rule).findings == ()
    assert [f.location.value for f in validate(model("y = Mul(r, m)"), rule).findings] == ["m"]
