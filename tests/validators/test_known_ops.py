"""PORT003 on ops the schema registry still knows but marks deprecated."""

from __future__ import annotations

import onnx.parser
import pytest
from support import rule_fixtures

from portable.policy import Policy
from portable.validators import validate

GROUP_NORM = """<ir_version: 8, opset_import: ["" : 18]>
gn (float[1, 4, 2, 2] x, float[2] s, float[2] b) => (float[1, 4, 2, 2] y) {
  y = GroupNormalization <num_groups = 2> (x, s, b)
}"""


def _port003(model) -> list[tuple[str, str]]:
    report = validate(model, Policy(select=("PORT003",)))
    assert report.error is None, report.error
    return [(f.message, f.hint) for f in report.findings]


def test_deprecated_ops_are_named_with_their_replacement():
    found = _port003(rule_fixtures.load("PORT003", "deprecated"))
    assert [message for message, _ in found] == [
        "op 'Scatter' is deprecated in ai.onnx opset 18 (since opset 11): use ScatterElements",
        "op 'Upsample' is deprecated in ai.onnx opset 18 (since opset 10): use Resize",
    ]
    assert found[1][1].startswith("replace Upsample with Resize (")


@pytest.mark.skipif(not onnx.defs.get_schema("GroupNormalization", 18).deprecated,
                    reason="this onnx does not mark GroupNormalization-18 deprecated")
def test_group_normalization_18_is_deprecated():
    (message, hint), = _port003(onnx.parser.parse_model(GROUP_NORM))
    assert message == "op 'GroupNormalization' is deprecated in ai.onnx opset 18 (since opset 18): use a decomposition"
    assert "InstanceNormalization" in hint


def test_current_ops_pass():
    assert _port003(rule_fixtures.load("PORT003", "good")) == []
    assert _port003(rule_fixtures.load("PORT003", "bad")) == [
        ("op 'Gelu' does not exist in ai.onnx opset 18",
         "export at the target opset (newer ops are then decomposed) or replace the op")]
