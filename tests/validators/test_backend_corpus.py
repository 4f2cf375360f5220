"""Corpora not written here: the ONNX backend node tests (about 1,900 models, generated at test
time) and the model files the onnx wheel carries in ``onnx/backend/test/data`` (the zoo models of
``light/`` that ``real/`` points at, ``simple/``, ``pytorch-converted/``, ``pytorch-operator/``)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

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


# -- the model files of onnx/backend/test/data ---------------------------------------------------

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
# Exact rule sets (default policy) of named models, each checked by hand against the model.
EXPECTED = {
    "light/light_resnet50.onnx": {"PORT001"},  # opset 9; its IR-3 weights are constants (no PORT007)
    "light/light_densenet121.onnx": {"PORT001"},  # was 836 false PORT007 errors
    "light/light_shufflenet.onnx": {"PORT001"},
    "pytorch-converted/test_Conv2d/model.onnx": {"PORT001"},
    "pytorch-operator/test_operator_add_broadcast/model.onnx": {"PORT001", "PORT013"},  # float64 values
    # Expand's shape is a graph input, so its output has no static shape
    "simple/test_expand_shape_model1/model.onnx": {"PORT001", "PORT007", "PORT009"},
    # ai.onnx.preview.training: ONNX infers no shape for Gradient; PORT002 names that node, so the unknown
    # shapes after it are one info finding under it (issue 26), not a second error
    "simple/test_gradient_of_add/model.onnx": {"PORT001", "PORT002"},
    "simple/test_sequence_model1/model.onnx": {"PORT001", "PORT005", "PORT008", "PORT009"},
    # strings; StringNormalizer's output length depends on the strings (stop words)
    "simple/test_strnorm_model_monday_empty_output/model.onnx": {"PORT001", "PORT009", "PORT013"},
}
# With --ort as well: onnxruntime has no kernel for these old-opset nodes, which only PORT014 says.
EXPECTED_ORT = {
    "pytorch-converted/test_AvgPool1d/model.onnx": ({"PORT001", "PORT014"}, "AveragePool(1)"),
    "pytorch-operator/test_operator_add_broadcast/model.onnx": ({"PORT001", "PORT013", "PORT014"}, "Add(6)"),
    "pytorch-converted/test_Conv2d/model.onnx": ({"PORT001"}, None),
}


def _validate(cli, *args: str) -> tuple[int, dict[str, dict]]:
    result = cli("validate", "--format", "json", *args, str(DATA))
    reports = json.loads(result.output)["reports"]
    return result.exit_code, {str(Path(r["path"]).relative_to(DATA)): r for r in reports}


def _rules(report: dict) -> set[str]:
    return {f["rule"] for f in report["findings"] if f["severity"] != "info"}


@pytest.fixture(scope="module")
def serial(cli) -> dict[str, dict]:
    code, reports = _validate(cli, "--jobs", "1")
    assert code == 1
    assert len(reports) >= 140, f"the onnx wheel carries {len(reports)} models under {DATA}"
    return reports


def test_data_models_are_all_read_and_judged(serial):
    for name, report in serial.items():
        assert report["error"] is None, f"{name}: {report['error']}"
        assert report["exit_code"] == 1 and "PORT001" in _rules(report), name  # none is at opset 18


def test_no_port007_on_ir3_initializers(serial):
    old = [name for name, r in serial.items() if r["model"]["ir_version"] < 4]
    assert len(old) > 100  # light/, pytorch-converted/ and pytorch-operator/ are IR 3
    assert [name for name in old if "PORT007" in _rules(serial[name])] == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_named_models_fire_exactly(serial, name):
    assert _rules(serial[name]) == EXPECTED[name]


def test_jobs_2_equals_serial(cli, serial):
    code, parallel = _validate(cli, "--jobs", "2")
    assert code == 1
    assert parallel == serial


def test_ort_check_catches_missing_kernels_quietly(cli, capfd):
    code, reports = _validate(cli, "--ort")
    assert code == 1
    assert capfd.readouterr().err == ""  # onnxruntime's own logger stays quiet
    for name, (rules, kernel) in EXPECTED_ORT.items():
        assert _rules(reports[name]) == rules, name
        port014 = [f["message"] for f in reports[name]["findings"] if f["rule"] == "PORT014"]
        assert all(f"Could not find an implementation for {kernel}" in m for m in port014), name
    missing = [n for n, r in reports.items() if any("Could not find an implementation" in f["message"]
                                                     for f in r["findings"] if f["rule"] == "PORT014")]
    assert len(missing) >= 30  # the old-opset models ORT cannot load, which only --ort reports
