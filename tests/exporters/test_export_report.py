"""Issue 25 item 1: export's report is true. A verify failure is ``ok: false`` with the process's exit code and
the parity block in JSON, a refusal in text; success and failure reports have one shape."""

from __future__ import annotations

import json

SPEC = "fixtures/models/cnn.py:build"


def test_a_verify_failure_in_json_says_so_with_the_exit_code_and_the_parity_block(cli, tmp_path):
    out = tmp_path / "strict.onnx"
    refused = cli("export", SPEC, "-o", str(out), "--atol", "1e-12", "--rtol", "0", "--format", "json")
    assert refused.exit_code == 1, refused.output
    data = json.loads(refused.stdout)
    assert data["exit_code"] == refused.exit_code and data["ok"] is False and data["written"] is False
    assert data["parity"] is not None and data["parity"]["ok"] is False and data["parity"]["details"]
    assert "parity check failed" in data["message"] and not out.exists()
    assert data["schema_version"] == "1.0" and data["validation"]["ok"]  # the graph was fine, the numbers not
    written = cli("export", SPEC, "-o", str(tmp_path / "ok.onnx"), "--format", "json")
    assert written.exit_code == 0, written.output
    good = json.loads(written.stdout)
    assert set(good) == set(data)  # one shape
    assert good["exit_code"] == 0 and good["ok"] is True and good["written"] is True and good["parity"]["ok"]
    assert good["schema_version"] == data["schema_version"] and good["fingerprint"].startswith("sha256:")


def test_a_verify_failure_in_text_prints_no_pass_on_stdout(cli, tmp_path):
    refused = cli("export", SPEC, "-o", str(tmp_path / "m.onnx"), "-q", "--atol", "1e-12", "--rtol", "0")
    assert refused.exit_code == 1
    assert "passed" not in refused.stdout.replace("verify FAILED", "") and "ok" not in refused.stdout.split()
    assert refused.stdout.startswith("verify FAILED") and "differs by up to" in refused.stdout
    assert "export failed: parity check failed" in refused.stderr


def test_export_prints_text_or_json_only(cli, tmp_path):
    """A SARIF or JUnit document carries findings alone: one that reads clean when verify refused the export
    would not be true, so export takes text and json; precheck (findings only) keeps every format."""
    result = cli("export", SPEC, "-o", str(tmp_path / "m.onnx"), "--format", "sarif")
    assert result.exit_code == 2 and "'sarif' is not one of 'text', 'json'" in result.output
    assert not (tmp_path / "m.onnx").exists()


def test_a_run_stopped_before_a_report_still_prints_the_json_shape_with_its_exit_code(cli, tmp_path):
    """``--format json`` on exit 2 (a usage error) and exit 3 (an unreadable SPEC): one JSON object with the
    process's exit code and the error, the same keys as a report plus ``error``; stderr still words it once."""
    written = json.loads(cli("export", SPEC, "-o", str(tmp_path / "ok.onnx"), "--format", "json").stdout)
    usage = cli("export", SPEC, "-o", "/sys/x.onnx", "--format", "json")
    missing = cli("export", str(tmp_path / "none.py:build"), "-o", str(tmp_path / "m.onnx"), "--format", "json")
    for result, code in ((usage, 2), (missing, 3)):
        assert result.exit_code == code, result.output
        data = json.loads(result.stdout)
        assert data["exit_code"] == code and data["ok"] is False and data["written"] is False
        assert set(data) == set(written) | {"error"} and data["message"] == data["error"]["message"]
        assert result.stderr.count("\n") == 1
    assert "cannot write" in json.loads(usage.stdout)["message"]
    assert "none.py" in json.loads(missing.stdout)["message"]
    assert cli("export", SPEC, "-o", "/sys/x.onnx").stdout == ""  # text: nothing on stdout, the error on stderr
