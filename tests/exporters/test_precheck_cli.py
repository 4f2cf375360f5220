"""``portable precheck`` findings, the export CLI, the parity check and precision variants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

PRECHECK = {
    "branch": ("PORT101", 1, 18),
    "cond": ("PORT105", 1, 18),
    "nonzero": ("PORT106", 1, 13),
    "graph_break": ("PORT102", 0, 18),  # a warning: exit 0 unless --strict
}


@pytest.mark.parametrize("name", sorted(PRECHECK))
def test_precheck_reports_the_construct_at_its_line(cli, name):
    rule, code, line = PRECHECK[name]
    result = cli("precheck", f"fixtures/models/{name}.py:build", "--format", "json")
    assert result.exit_code == code, result.output
    payload = json.loads(result.stdout)
    findings = payload["reports"][0]["findings"]  # the JSON report format: one entry per model
    assert [f["rule"] for f in findings] == [rule]
    assert findings[0]["location"]["source"]["file"] == f"fixtures/models/{name}.py"
    assert findings[0]["location"]["source"]["line"] == line


def test_precheck_passes_a_good_model(cli):
    result = cli("precheck", "fixtures/models/cnn.py:build", "--no-graph-breaks")
    assert result.exit_code == 0, result.output


def test_cli_export_json_and_failure_exit_codes(cli, tmp_path):
    out = tmp_path / "cnn.onnx"
    ok = cli("export", "fixtures/models/cnn.py:build", "-i", "x=1x3x32x32", "-o", str(out), "--format", "json",
             "--no-verify")
    assert ok.exit_code == 0, ok.output
    payload = json.loads(ok.stdout)
    assert payload["path"] == str(out) and payload["fingerprint"].startswith("sha256:") and out.is_file()
    bad = cli("export", "fixtures/models/branch.py:build", "-o", str(tmp_path / "b.onnx"), "-q")
    assert bad.exit_code == 1 and "PORT101" in bad.output and not (tmp_path / "b.onnx").exists()
    usage = cli("export", "fixtures/models/cnn.py:build", "-i", "x=1xbad", "-o", str(tmp_path / "u.onnx"))
    assert usage.exit_code == 2 and "NAME=1x3x224x224" in usage.output


def test_parity_check_fails_when_onnx_and_torch_disagree(cnn_export):
    from portable.exporters.verify import verify_parity
    from portable.spec import load_spec

    loaded = load_spec(f"{ROOT}/fixtures/models/cnn.py:build")
    data = cnn_export.path.read_bytes()
    assert verify_parity(loaded.module, loaded.example_inputs, data, (1, 3)).ok
    with torch.no_grad():
        loaded.module.head.bias.add_(0.1)
    parity = verify_parity(loaded.module, loaded.example_inputs, data, (1, 3))
    assert not parity.ok and "differs by up to" in parity.message


def test_fp16_variant_records_its_precision(tmp_path):
    from portable.exporters.spec_export import export_spec

    result = export_spec(f"{ROOT}/fixtures/models/cnn.py:build", tmp_path / "cnn16.onnx", precision="fp16")
    assert result.manifest["precision"] == "fp16" and result.manifest["inputs"][0]["dtype"] == "float16"
    assert result.parity.ok and result.parity.atol_rms == 2e-2  # compare's measured fp16 default


def test_fp16_parity_check_fails_on_a_shifted_bias(tmp_path):
    from portable.exporters.spec_export import export_spec
    from portable.exporters.verify import verify_parity
    from portable.spec import load_spec

    export_spec(f"{ROOT}/fixtures/models/cnn.py:build", tmp_path / "cnn16.onnx", precision="fp16", verify=False)
    loaded = load_spec(f"{ROOT}/fixtures/models/cnn.py:build")
    module, examples = loaded.module.half(), [e.half() for e in loaded.example_inputs]
    data = (tmp_path / "cnn16.onnx").read_bytes()
    assert verify_parity(module, examples, data, (1, 3), "fp16").ok
    with torch.no_grad():
        module.head.bias.add_(0.5)
    parity = verify_parity(module, examples, data, (1, 3), "fp16")
    assert not parity.ok and "beyond atol/rtol 0.001+0.02*rms/0.01)" in parity.message


BF16_MLP = """import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Linear(16, 4)).eval(), (torch.randn(2, 8),)
"""


def test_bf16_variant_exports_and_says_why_parity_was_skipped(tmp_path):
    from portable.exporters.spec_export import export_spec

    (tmp_path / "mlp.py").write_text(BF16_MLP)
    result = export_spec(f"{tmp_path}/mlp.py:build", tmp_path / "mlp.onnx", precision="bf16")
    assert result.manifest["precision"] == "bf16" and result.manifest["inputs"][0]["dtype"] == "bfloat16"
    assert result.parity.ok and "no bf16 kernel" in result.parity.skipped


def test_bf16_conv_is_refused_at_opset_18(tmp_path):
    """ONNX Conv takes bfloat16 only from opset 22: the export is refused and nothing is written."""
    from portable.exporters import ExportFailed
    from portable.exporters.spec_export import export_spec

    with pytest.raises(ExportFailed) as failed:
        export_spec(f"{ROOT}/fixtures/models/cnn.py:build", tmp_path / "cnn.onnx", precision="bf16")
    assert any(f.rule_id == "PORT011" and "bfloat16" in f.message for f in failed.value.report.findings)
    assert list(tmp_path.iterdir()) == []
