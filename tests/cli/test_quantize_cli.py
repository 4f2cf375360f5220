"""``portable quantize`` through the cli fixture: exit codes, one-line errors that write nothing, and a
JSON report whose exit code is the process's."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from referencing import Registry, Resource
from support import ROOT, fix_fixtures

QUICK = ("--samples", "16", "--eval-samples", "16", "--no-latency", "--no-per-node")
SCHEMAS = ROOT / "portable" / "schemas"


def _check_schema(data: dict) -> None:
    resources = [(s["$id"], Resource.from_contents(s)) for s in
                 (json.loads((SCHEMAS / n).read_text()) for n in ("report.schema.json", "quantize.schema.json"))]
    schema = json.loads((SCHEMAS / "quantize.schema.json").read_text())
    jsonschema.Draft202012Validator(schema, registry=Registry().with_resources(resources)).validate(data)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from portable.exporters.spec_export import export_spec

    path = tmp_path_factory.mktemp("quantize-cli") / "cnn.onnx"
    export_spec(str(ROOT / "fixtures" / "models" / "cnn.py") + ":build", path)
    return path


def _nothing_written(out: Path) -> bool:
    return not out.exists() and not out.with_name(out.name + ".json").exists() and \
        not list(out.parent.glob(f".{out.name}*"))


def _one_line_usage_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("portable: error: "), result.stderr
    return lines[0]


def test_a_portable_model_is_quantized_and_the_report_names_what_was_written(cli, cnn, tmp_path):
    out = tmp_path / "cnn.int8.onnx"
    result = cli("quantize", str(cnn), "-o", str(out), *QUICK, "-q")
    assert result.exit_code == 0 and result.stderr == "" and result.stdout == "" and out.is_file()
    result = cli("quantize", str(cnn), "-o", str(out), *QUICK, "--force", "--target", "qnn")
    assert result.exit_code == 0, result.output
    assert "target qnn" in result.stdout and "uint8 (target qnn)" in result.stdout
    assert "weights int8 (target qnn) per-channel (target qnn)" in result.stdout
    assert "not your data's distribution" in result.stdout and f"wrote {out}" in result.stdout


def test_a_non_portable_model_is_refused_with_portable_fix_as_the_hint(cli, tmp_path):
    source, out = fix_fixtures.write("opset13", tmp_path), tmp_path / "out.onnx"
    line = _one_line_usage_error(cli("quantize", str(source), "-o", str(out), *QUICK))
    assert "not portable" in line and "PORT001" in line and "portable fix" in line
    assert _nothing_written(out)


@pytest.mark.parametrize(("arrays", "expected"), [
    ({"pixels": np.zeros((4, 3, 32, 32), np.float32)}, "keys must be the input names ['x']: missing ['x'], unknown "
                                                       "['pixels']"),
    ({"x": np.zeros((4, 3, 16, 16), np.float32)}, "samples of shape 4x3x16x16, the model takes Nx3x32x32"),
    ({"x": np.zeros((0, 3, 32, 32), np.float32)}, "at least 1"),
    ({"x": np.zeros((4, 3, 32, 32), np.int64) > 0}, "dtype bool, the model takes float32"),
    ({}, "holds no arrays"),
])
def test_samples_that_do_not_fit_the_inputs_are_a_one_line_usage_error(cli, cnn, tmp_path, arrays, expected):
    data, out = tmp_path / "cal.npz", tmp_path / "out.onnx"
    np.savez(data, **arrays)
    line = _one_line_usage_error(cli("quantize", str(cnn), "-o", str(out), "--calibration", str(data), "--no-latency"))
    assert expected in line and str(data) in line
    assert _nothing_written(out)


def test_calibration_and_samples_exclude_each_other(cli, cnn, tmp_path):
    line = _one_line_usage_error(cli("quantize", str(cnn), "-o", str(tmp_path / "o.onnx"), "--calibration",
                                     str(tmp_path / "c.npz"), "--samples", "4"))
    assert "exclude each other" in line


def test_the_json_report_and_the_exit_code_agree(cli, cnn, tmp_path):
    out = tmp_path / "o.onnx"
    failed = cli("quantize", str(cnn), "-o", str(out), *QUICK, "--min-sqnr", "150", "--format", "json")
    data = json.loads(failed.stdout)
    assert failed.exit_code == 1 == data["exit_code"] and data["written"] is False and data["budgets_ok"] is False
    _check_schema(data)
    assert "accuracy budget(s) exceeded" in failed.stderr and _nothing_written(out)
    passed = cli("quantize", str(cnn), "-o", str(out), *QUICK, "--min-sqnr", "20", "--format", "json")
    data = json.loads(passed.stdout)
    assert passed.exit_code == 0 == data["exit_code"] and data["written"] is True and data["budgets_ok"] is True
    assert data["budget_checks"][0]["budget"] == "min-sqnr" and out.is_file()
    _check_schema(data)
    with_latency = cli("quantize", str(cnn), "-o", str(out), "--samples", "8", "--eval-samples", "8", "--force",
                       "--duration-ms", "50", "--warmup-max-ms", "200", "--format", "json")
    data = json.loads(with_latency.stdout)
    assert with_latency.exit_code == 0 and data["latency"]["batch"] == 8 and len(data["worst_nodes"]) == 10
    _check_schema(data)
    del data["latency"]["spinning"]
    with pytest.raises(jsonschema.ValidationError):  # the schema can fail
        _check_schema(data)


def test_unknown_target_and_bad_int_range_are_usage_errors(cli, cnn, tmp_path):
    assert "unknown target" in _one_line_usage_error(cli("quantize", str(cnn), "-o", str(tmp_path / "o.onnx"),
                                                         "--target", "tpu"))
    assert "NAME=LOW:HIGH" in _one_line_usage_error(cli("quantize", str(cnn), "-o", str(tmp_path / "o.onnx"),
                                                        "--int-range", "5:3"))


def test_targets_take_validates_names_and_the_old_spellings_warn_once(cli, cnn, tmp_path):
    """One vocabulary (issue 31): --target ort-cpu as validate names it; cpu, --weights and --activations
    still work for one release with a deprecation line, and give the same settings."""
    new = cli("quantize", str(cnn), "-o", str(tmp_path / "a.onnx"), *QUICK, "--target", "ort-cpu",
              "--weight-type", "int8", "--activation-type", "uint8", "--min-sqnr", "0", "--format", "json")
    old = cli("quantize", str(cnn), "-o", str(tmp_path / "b.onnx"), *QUICK, "--target", "cpu",
              "--weights", "int8", "--activations", "uint8", "--min-sqnr", "0", "--format", "json")
    assert new.exit_code == old.exit_code == 0 and "deprecated" not in new.stderr
    assert [line.split(":")[1].strip() for line in old.stderr.splitlines()] == ["deprecated"] * 3
    settings = [json.loads(r.stdout)["settings"] for r in (new, old)]
    assert settings[0] == settings[1] and settings[0]["target"] == "ort-cpu"


def test_an_unknown_target_is_one_line_with_did_you_mean(cli, cnn, tmp_path):
    line = _one_line_usage_error(cli("quantize", str(cnn), "-o", str(tmp_path / "o.onnx"), "--target", "ort-cpux"))
    assert "did you mean 'ort-cpu'" in line and "tensorrt" in line


def test_export_refuses_text_generation_options_without_the_task(cli, tmp_path):
    out = tmp_path / "cnn.onnx"
    result = cli("export", f"{ROOT}/fixtures/models/cnn.py:build", "-o", str(out), "--context", "64", "--tokens", "4")
    assert result.exit_code == 2 and "--context, --tokens: options of export --task text-generation, not of export" \
        in result.stderr
    assert not out.exists()


def test_export_refuses_an_input_shape_with_the_text_generation_task(cli, tmp_path):
    out = tmp_path / "lm"
    result = cli("export", f"{ROOT}/fixtures/models/tiny_llm.py:llama", "--task", "text-generation", "-o", str(out),
                 "-i", "input_ids=1x8:int64")
    assert result.exit_code == 2 and "--input: an option of export, not of export --task text-generation" in result.stderr
    assert not list(tmp_path.iterdir())
