"""Before IR 4 every initializer is listed in ``graph.input`` and is still a constant.

onnxruntime lets a graph input override an initializer of the same name only from IR 4
(``Graph::CanOverrideInitializer`` is ``ir_version >= 4``); before it, the listing was
mandatory and meant nothing. Models from that era (ONNX's own ``light_*`` zoo models) must
not get PORT006/PORT007 errors for their weights.
"""

from __future__ import annotations

import onnx.parser
from support import rule_fixtures

from portable.findings import Severity
from portable.policy import Policy
from portable.validators import validate
from portable.validators.context import INITIALIZERS_OVERRIDABLE_FROM_IR, ModelContext

TOPK = """<ir_version: {ir}, opset_import: ["" : 18]>
topk (float[1, 8] x, int64[1] k) => (float[1, 3] v, int64[1, 3] i) <int64[1] k = {{3}}> {{
  v, i = TopK <axis = 1> (x, k)
}}"""


def _errors(model, rule: str) -> list[str]:
    report = validate(model, Policy(select=(rule,)))
    assert report.error is None, report.error
    return [f.message for f in report.findings if f.severity == Severity.ERROR]


def _at_ir(model: onnx.ModelProto, ir: int) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.ir_version = ir
    return copy


def test_ir3_initializers_listed_as_inputs_are_constants():
    model = rule_fixtures.load("PORT007", "ir3_initializers")
    assert model.ir_version < INITIALIZERS_OVERRIDABLE_FROM_IR
    assert {"shape", "bias"} <= ModelContext(model, "m", Policy()).constants
    assert _errors(model, "PORT007") == []


def test_from_ir4_an_initializer_listed_as_input_is_overridable():
    model = _at_ir(rule_fixtures.load("PORT007", "ir3_initializers"), INITIALIZERS_OVERRIDABLE_FROM_IR)
    assert "shape" not in ModelContext(model, "m", Policy()).constants
    assert ["Reshape input 1 ('shape')" in m for m in _errors(model, "PORT007")] == [True]


def test_topk_k_initializer_follows_the_ir_version():
    assert _errors(onnx.parser.parse_model(TOPK.format(ir=3)), "PORT006") == []
    assert len(_errors(onnx.parser.parse_model(TOPK.format(ir=4)), "PORT006")) == 1
