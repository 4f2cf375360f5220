"""``portable validate --target``: the target rules, the per-target line, the gates, the policy key,
the live answers, and nothing of it when no target is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from onnx import TensorProto, helper
from support import save

from portable.errors import ConfigError
from portable.policy import Policy, policy_from_mapping
from portable.validators import validate


def _one_op(op: str, elem: int, shape: list, out_shape: list | None = None, name: str = "m"):
    x = helper.make_tensor_value_info("x", elem, shape)
    y = helper.make_tensor_value_info("y", elem if op != "Det" else elem, out_shape or shape)
    model = helper.make_model(helper.make_graph([helper.make_node(op, ["x"], ["y"], name=op.lower())], name, [x], [y]),
                              opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


@pytest.fixture
def gelu(fixture_file) -> str:
    """Relu -> Erf -> Relu: QNN has no Erf, so two partitions and Erf on the CPU."""
    return str(fixture_file("PORT201", "bad"))


def test_a_target_line_per_target_and_warnings_for_the_fallback(cli, gelu):
    result = cli("validate", "--target", "qnn,ort-cpu", gelu)
    assert result.exit_code == 0, result.output  # a fallback is a warning
    assert "  target   ort-cpu: 3/3 nodes, loads" in result.output
    assert "  target   qnn: 2/3 nodes, 2 partitions, fallback: Erf x1" in result.output
    assert "PORT201 [target-op-support] main, node '<unnamed Erf #1>' (Erf): qnn: Erf is not in qnn's table; " \
           "it falls back to CPUExecutionProvider" in result.output
    assert "fix: exact GELU exports Erf: nn.GELU(approximate='tanh')" in result.output


@pytest.mark.parametrize(("gate", "code"), [(("--no-fallback",), 1), (("--max-partitions", "1"), 1),
                                            (("--max-partitions", "2"), 0), ((), 0)])
def test_the_gates_fail_the_run(cli, gelu, gate, code):
    result = cli("validate", "--target", "qnn", *gate, gelu)
    assert result.exit_code == code, result.output
    assert ("gate failed" in result.output) == (code == 1)


def test_a_clean_model_passes_the_gates_on_every_target(cli, fixture_file):
    result = cli("validate", "--target", "all", "--no-fallback", "--max-partitions", "1", str(fixture_file("PORT201", "good")))
    assert result.exit_code == 0, result.output
    assert result.output.count("  target   ") == 13 and "fallback:" not in result.output


def test_a_node_the_cpu_provider_lacks_stops_the_load(cli, tmp_path):
    """ort-cpu has no fallback: Erf on float64 (its kernel is float only) is an error, and ONNX Runtime
    itself, asked live, refuses the session at the same node."""
    path = str(save(_one_op("Erf", TensorProto.DOUBLE, [2, 3]), tmp_path / "erf64.onnx"))
    result = cli("validate", "--target", "ort-cpu", "--live", "--format", "json", path)
    assert result.exit_code == 1
    report = json.loads(result.output)["reports"][0]
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert [f["rule"] for f in errors] == ["PORT201"] and "input 0 'x' is float64" in errors[0]["message"]
    assert "does not load there (no fallback)" in errors[0]["message"]
    (target,) = report["targets"]
    assert (target["loads"], target["falls_back"], target["fallback"]) == (False, False, {"Erf": 1})
    assert target["live"]["verdict"].startswith("does not load:") and "Erf(13)" in target["live"]["verdict"]


def test_live_ort_agrees_on_a_model_that_loads(cli, tmp_path):
    path = str(save(_one_op("Erf", TensorProto.FLOAT, [2, 3]), tmp_path / "erf.onnx"))
    result = cli("validate", "--target", "ort-cpu", "--live", path)
    assert result.exit_code == 0
    assert "ort-cpu: 1/1 nodes, loads; live (onnxruntime " in result.output
    assert "): loads, 1 node on CPUExecutionProvider" in result.output


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_live_runtimes_confirm_the_profiles_verdict(tmp_path, runtime):
    """Det has no OpenVINO translator and no tract builder: both profiles say so, and both runtimes agree."""
    pytest.importorskip(runtime)
    bad = save(_one_op("Det", TensorProto.FLOAT, [2, 3, 3], [2]), tmp_path / "det.onnx")
    good = save(_one_op("Relu", TensorProto.FLOAT, [2, 3]), tmp_path / "relu.onnx")
    policy = Policy(targets=(runtime,), targets_live=True)
    (refused,) = validate(bad, policy).targets
    (taken,) = validate(good, policy).targets
    assert not refused.loads and dict(refused.fallback) == {"Det": 1}
    assert "Det" in dict(refused.live)["verdict"] and dict(refused.live)["verdict"].startswith(("read_model fails", "does not load"))
    assert taken.loads and dict(taken.live)["verdict"].startswith(("read_model ok", "loads"))


def test_a_runtime_not_installed_is_a_cell_not_an_error(monkeypatch, tmp_path):
    from portable.validators.targets import live

    monkeypatch.setattr(live, "installed_version", lambda package: None)
    (summary,) = validate(save(_one_op("Relu", TensorProto.FLOAT, [2, 3]), tmp_path / "r.onnx"),
                          Policy(targets=("openvino",), targets_live=True)).targets
    assert dict(summary.live) == {"runtime": "openvino", "verdict": "not installed"}
    assert summary.line().endswith("; live (openvino): not installed")


def test_nnapi_needs_fixed_sizes(cli, fixture_file):
    result = cli("validate", "--target", "nnapi", str(fixture_file("PORT203", "bad")))
    assert ("nnapi: does not run there as it is: 0/2 nodes, 0 partitions, fallback: Relu x1, Tanh x1; "
            "with a fixed batch: 2/2 nodes, 1 partition") \
        in result.output
    assert "fix: this target needs fixed sizes: export with a fixed batch" in result.output


def test_unknown_target_is_a_usage_error_naming_the_known_ones(cli, gelu):
    result = cli("validate", "--target", "qnn,npu9000", gelu)
    assert result.exit_code == 2
    assert "unknown target(s) npu9000" in result.output and "ort-cpu, ort-cuda, tensorrt" in result.output


@pytest.mark.parametrize("args", [("--no-fallback",), ("--max-partitions", "3"), ("--live",), ("--select", "PORT201")])
def test_target_options_without_a_target_are_usage_errors(cli, gelu, args):
    result = cli("validate", *args, gelu)
    assert result.exit_code == 2 and "--target" in result.output


def test_the_policy_names_targets_and_gates(cli, gelu, tmp_path):
    config = tmp_path / "portable.toml"
    config.write_text('targets = ["qnn"]\nno-fallback = true\n')
    result = cli("validate", "--config", str(config), gelu)
    assert result.exit_code == 1 and "qnn: 2/3 nodes" in result.output
    assert policy_from_mapping({"targets": ["all"]}).targets == ("ort-cpu", "ort-cuda", "tensorrt", "openvino", "qnn",
                                                                "nnapi", "coreml", "tract", "directml", "webnn", "webgpu",
                                                                "migraphx", "litert")
    with pytest.raises(ConfigError, match="unknown target"):
        policy_from_mapping({"targets": ["qnn", "tpu"]})
    with pytest.raises(ConfigError, match="positive integer"):
        policy_from_mapping({"max-partitions": 0})


def test_json_carries_the_targets_and_matches_the_schema(cli, gelu):
    import jsonschema

    schema = json.loads((Path(__file__).parents[2] / "portable" / "schemas" / "report.schema.json").read_text())
    data = json.loads(cli("validate", "--target", "qnn,tract", "--format", "json", gelu).output)
    jsonschema.validate(data, schema)
    qnn, tract = data["reports"][0]["targets"]
    assert qnn["line"] == ("qnn: 2/3 nodes, 2 partitions, fallback: Erf x1; "
                           "by its tables: 2 supported, 0 partial, 0 unsupported, 1 unknown")
    assert (qnn["supported"], qnn["partitions"], qnn["fallback"], qnn["unsupported"]) == (2, 2, {"Erf": 1}, {"Erf": 1})
    assert qnn["sources"] == ["onnxruntime/onnxruntime-qnn@cee6c0d91e58"]
    assert tract["loads"] and tract["partitions"] == 1
    data["reports"][0]["targets"][0]["partitions"] = -1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_without_a_target_nothing_changes(cli, gelu):
    plain = cli("validate", "--format", "json", gelu).output
    report = json.loads(plain)["reports"][0]
    assert "targets" not in report and not any(r.startswith("PORT2") for r in report["rules"])
    assert "  target   " not in cli("validate", gelu).output


def test_sarif_junit_and_github_carry_the_target_line(cli, gelu):
    line = "qnn: 2/3 nodes, 2 partitions, fallback: Erf x1; by its tables: 2 supported, 0 partial, 0 unsupported, 1 unknown"
    sarif = json.loads(cli("validate", "--target", "qnn", "--format", "sarif", gelu).output)
    assert sarif["runs"][0]["artifacts"][0]["properties"]["targets"][0]["line"] == line
    assert f"<system-out>{line}</system-out>" in cli("validate", "--target", "qnn", "--format", "junit", gelu).output
    assert f",title=target qnn::{gelu}: {line}" in cli("validate", "--target", "qnn", "--format", "github", gelu).output


def test_validate_help_names_every_target() -> None:
    """The help lists the names by hand (portable/ imports no validators at module level): it must keep up."""
    from click.testing import CliRunner

    from portable.cli import cli
    from portable.validators.targets import TARGETS

    text = " ".join(CliRunner().invoke(cli, ["validate", "--help"], terminal_width=400).output.split())
    missing = [t for t in TARGETS if t not in text]
    assert not missing, f"validate --help does not name {missing}"
