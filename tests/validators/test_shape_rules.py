"""PORT007/PORT009 decide by fixing the batch: batch-only computations are info, others errors."""

from __future__ import annotations

import onnx
from support import rule_fixtures

from portable.findings import Severity
from portable.policy import Policy
from portable.validators import validate


def _fix_batch(model: onnx.ModelProto, value: int) -> onnx.ModelProto:
    for vi in (*model.graph.input, *model.graph.output):
        dim = vi.type.tensor_type.shape.dim[0]
        dim.Clear()
        dim.dim_value = value
    return model


def test_batch_only_expand_is_info_with_dynamic_batch():
    report = validate(rule_fixtures.load("PORT007", "batch_only"), Policy(select=("PORT007",)))
    assert [(f.rule_id, f.severity, f.location.node) for f in report.findings] == [
        ("PORT007", Severity.INFO, "<unnamed Expand #3>")
    ]
    assert report.ok


def test_batch_only_expand_is_an_error_with_fixed_batch():
    model = _fix_batch(rule_fixtures.load("PORT007", "batch_only"), 2)
    report = validate(model, Policy(select=("PORT007",)))
    (finding,) = report.findings
    assert finding.severity == Severity.ERROR
    assert "folds to a constant" in finding.message
    assert report.exit_code == 1


def test_port009_names_the_first_node_and_counts_the_rest():
    report = validate(rule_fixtures.load("PORT009", "bad"), Policy(select=("PORT009",)))
    (finding,) = report.findings
    assert finding.location.node == "<unnamed Reshape #0>"
    assert "2 later value(s)" in finding.message  # z and y


def test_port009_reports_batch_expressions_as_static():
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, 4, 8] x) => (float[batch, 32] y) {
      s = Constant <value = int64[2] {-1, 8}> ()
      flat = Reshape(x, s)
      back = Constant <value = int64[2] {-1, 32}> ()
      y = Reshape(flat, back)
    }""")
    report = validate(model, Policy(select=("PORT009", "PORT007")))
    assert report.findings == ()


def test_source_is_the_innermost_user_frame():
    """A node made inside a submodule points at the submodule's line, not the caller's."""
    from portable.validators.graphs import source_of

    node = onnx.helper.make_node("Relu", ["x"], ["y"])
    trace = ('File "models/net.py", line 57, in forward\n    x = self.block(x)\n'
             'File "models/blocks.py", line 38, in forward\n    return torch.relu(self.fc(x))\n'
             'File "site-packages/torch/nn/modules/module.py", line 1775, in _call_impl\n    return forward_call(*args)\n')
    for key, value in (("pkg.torch.onnx.stack_trace", trace), ("pkg.torch.onnx.name_scopes", "['', 'block', 'relu']")):
        prop = node.metadata_props.add()
        prop.key, prop.value = key, value
    source = source_of(node)
    assert (source.file, source.line, source.module) == ("models/blocks.py", 38, "block")


def test_linear_dim_names_batch_expressions():
    from portable.validators.shapes import BATCH_VALUES, linear_dim

    assert BATCH_VALUES == (1, 2, 3)
    assert linear_dim((9, 9, 9)) == 9
    assert linear_dim((4, 8, 12)) == "4*batch"
    assert linear_dim((8, 11, 14)) == "3*batch+5"
    assert linear_dim((1, 2, 3)) == "batch"
    assert linear_dim((0, 1, 2)) == "batch-1"
    assert linear_dim((7, 5, 3)) is None  # shrinks as the batch grows: no batch expression
    assert linear_dim((8, 2, 3)) is None  # linear through 2 and 3 only (a squeeze at batch 1)
    assert linear_dim((None, 3, 4)) is None
    assert linear_dim((2, 3), batches=(2, 3)) == "batch"


def test_a_constant_of_undefined_type_is_a_finding_not_a_crash():
    """The fuzz corpus's case (a flipped byte in a Reshape's shape Constant): the shape analysis reads
    no value of an UNDEFINED tensor, so PORT007 runs and the checker (PORT011) names the tensor."""
    import onnx.parser

    from portable.validators import validate

    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, 4, 8] x) => (float[batch, 32] y) {
      flat = Constant <value = int64[2] {-1, 32}> ()
      y = Reshape (x, flat)
    }""")
    model.graph.node[0].attribute[0].t.data_type = onnx.TensorProto.UNDEFINED
    report = validate(model)
    assert report.error is None and "PORT011" in {f.rule_id for f in report.findings}
