"""A model torch cannot export is the model's finding (exit 1), located at its line, quiet unless --debug."""

from __future__ import annotations

import json
from pathlib import Path

DECOMPOSE = "fixtures/models/decompose.py"


def _export(cli, tmp_path: Path, spec: str, *extra: str) -> tuple[object, Path]:
    out = tmp_path / "m.onnx"
    result = cli(*extra, "export", spec, "-o", str(out), "--format", "json")
    return result, out


def _findings(stdout: str) -> list[dict]:
    payload = json.loads(stdout)
    if "reports" in payload:  # precheck's: the validation report format
        return [f for report in payload["reports"] for f in report["findings"]]
    assert payload["exit_code"] == 1 and payload["ok"] is False and payload["written"] is False
    return payload["validation"]["findings"]


def test_decomposition_failure_is_port104_at_the_models_line_with_json_and_a_quiet_stderr(cli, tmp_path):
    result, out = _export(cli, tmp_path, f"{DECOMPOSE}:build")
    assert result.exit_code == 1, result.output
    [finding] = _findings(result.stdout)
    assert finding["rule"] == "PORT104" and "Cannot view a tensor" in finding["message"]
    assert finding["location"]["source"] == {"file": DECOMPOSE, "line": 29, "module": None}
    assert "attn_implementation" not in finding["hint"]  # no transformers config: that remedy does not apply
    assert "torch.onnx cannot decompose" in finding["hint"]
    assert result.stderr.count("\n") == 1 and "nothing written" in result.stderr
    assert "Traceback" not in result.stderr and "While executing" not in result.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_debug_shows_torchs_report(cli, tmp_path):
    result, _ = _export(cli, tmp_path, f"{DECOMPOSE}:build", "--debug")
    assert result.exit_code == 1
    assert "Traceback" in result.stderr and "While executing" in result.stderr and "Cannot view" in result.stderr
    assert _findings(result.stdout)[0]["rule"] == "PORT104"  # stdout stays the JSON report


def test_sdpa_attention_failure_hints_eager_attention(cli, tmp_path):
    result, _ = _export(cli, tmp_path, f"{DECOMPOSE}:build_sdpa")
    assert result.exit_code == 1
    [finding] = _findings(result.stdout)
    assert "attn_implementation='eager'" in finding["hint"] and "'sdpa'" in finding["hint"]


FILTER = "fixtures/models/filter_boxes.py"


def test_data_dependent_size_is_port106_at_the_line_that_made_it(cli, tmp_path):
    result, out = _export(cli, tmp_path, f"{FILTER}:build")
    assert result.exit_code == 1, result.output
    [finding] = _findings(result.stdout)
    assert (finding["rule"], finding["severity"]) == ("PORT106", "error")
    assert finding["location"]["source"] == {"file": FILTER, "line": 22, "module": None}
    assert "torch.where(boxes[:, 4] > 0)[0]" in finding["message"] and f"({FILTER}:24)" in finding["message"]
    assert "post-processing" in finding["hint"] and "outside the ONNX model" in finding["hint"]
    assert result.stderr.count("\n") == 1 and not out.exists()


def test_precheck_reports_the_data_dependent_size_as_an_error_not_a_branch(cli):
    result = cli("precheck", f"{FILTER}:build", "--format", "json")
    assert result.exit_code == 1, result.output
    findings = _findings(result.stdout)
    assert [(f["rule"], f["severity"]) for f in findings] == [("PORT106", "error")]
    assert findings[0]["location"]["source"]["line"] == 22


def test_model_frame_is_the_innermost_line_of_model_code_not_torch(tmp_path):
    import torch

    from portable.exporters.failures import attention_hint, model_frame

    site = str(Path(torch.__file__).resolve().parents[1])  # this interpreter's site-packages
    text = ("Cannot view a tensor\n\nWhile executing %view_4\nOriginal traceback:\n"
            f'File "{site}/transformers/models/t5/modeling_t5.py", line 396, in forward\n'
            "    attention_output, position_bias, attn_weights = self.SelfAttention(\n"
            f'  File "{site}/transformers/models/t5/modeling_t5.py", line 368, in forward\n'
            "    attn_output = attn_output.reshape(*input_shape, -1).contiguous()\n"
            f'  File "{site}/torch/nn/modules/module.py", line 1779, in _call_impl\n'
            "    return forward_call(*args, **kwargs)\n"
            "Use tlparse to see full graph.")
    frame = model_frame(ValueError(text), tmp_path)
    assert frame is not None and frame.source.line == 368
    assert frame.source.file == "site-packages/transformers/models/t5/modeling_t5.py"

    class Config:
        _attn_implementation = "sdpa"

    class Model:
        config = Config()

    assert "attn_implementation='eager'" in attention_hint(Model(), frame)
    Config._attn_implementation = "eager"  # already eager: the remedy does not apply
    assert attention_hint(Model(), frame) is None


def test_precheck_runs_torch_onnx_too_and_finds_the_decomposition_failure(cli):
    spec = f"{DECOMPOSE}:build_sdpa"
    result = cli("precheck", spec, "--no-graph-breaks", "--format", "json")
    assert result.exit_code == 1, result.output
    [finding] = _findings(result.stdout)
    assert finding["rule"] == "PORT104" and finding["location"]["source"]["line"] == 29
    assert "attn_implementation='eager'" in finding["hint"]
    skipped = cli("precheck", spec, "--no-graph-breaks", "--no-translate")
    assert skipped.exit_code == 0, skipped.output  # torch.export alone traces it


def test_nonzero_is_precheck_s_one_finding_with_its_hint(cli, tmp_path):
    """Issue 25 item 6: export gives what precheck gives (PORT106 at the line, the post-processing hint),
    not the validator's PORT006/PORT008/PORT009 on the translated graph."""
    result, out = _export(cli, tmp_path, "fixtures/models/nonzero.py:build")
    assert result.exit_code == 1, result.output
    [finding] = _findings(result.stdout)
    assert (finding["rule"], finding["severity"]) == ("PORT106", "error")
    assert finding["location"]["source"]["line"] == 13 and "post-processing" in finding["hint"]
    assert result.stderr.count("\n") == 1 and not out.exists()
