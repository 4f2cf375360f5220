"""A corpus not written here: the ONNX backend node tests (about 1,900 models), generated at test time."""

from __future__ import annotations

import warnings

import onnx
import pytest

from portable.policy import Policy
from portable.validators import validate
from portable.validators.graphs import iter_scopes
from portable.validators.rules.port004_control_flow import CONTROL_FLOW_OPS


@pytest.fixture(scope="module")
def corpus():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    assert len(cases) > 1500
    return cases


def _has_control_flow(model: onnx.ModelProto) -> bool:
    return any(node.op_type in CONTROL_FLOW_OPS and node.domain in ("", "ai.onnx")
               for scope in iter_scopes(model) for node in scope.body.node)


def _default_opset(model: onnx.ModelProto) -> int | None:
    return next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), None)


def test_backend_corpus(corpus):
    policy = Policy()
    flow = opset = 0
    for case in corpus:
        report = validate(case.model, policy, name=case.name)
        assert report.error is None, f"{case.name}: {report.error}"
        rules = {f.rule_id for f in report.findings}
        if _has_control_flow(case.model):
            flow += 1
            assert "PORT004" in rules, case.name
        if _default_opset(case.model) != 18:
            opset += 1
            assert "PORT001" in rules, case.name
    assert flow > 30 and opset > 1000  # the corpus really holds both kinds
