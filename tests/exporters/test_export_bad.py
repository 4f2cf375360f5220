"""Each bad fixture fails with the right finding, at the user's line, and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from portable.exporters import ExportFailed
from portable.exporters.spec_export import export_spec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "models"

BAD = {
    # name: (rule, source line or None, words in the message)
    "branch": ("PORT101", ("fixtures/models/branch.py", 18), ("data-dependent branch", "if y.sum() > 0:")),
    "specialize": ("PORT103", None, ("'x'", "specializes the batch to 2", "buffer 'offset' (2, 8)")),
    "cond": ("PORT004", ("fixtures/models/cond.py", 18), ("'If'",)),
    # precheck's one finding, with its hint, not PORT006/008/009 naming torch's symbol u0 (issue 25 item 6)
    "nonzero": ("PORT106", ("fixtures/models/nonzero.py", 13), ("nonzero", "depends on tensor values")),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_model_fails_with_the_right_finding_and_writes_nothing(name, tmp_path):
    rule, where, words = BAD[name]
    out = tmp_path / "m.onnx"
    with pytest.raises(ExportFailed) as info:
        export_spec(f"{FIXTURES / name}.py:build", out)
    findings = [f for f in info.value.report.findings if f.rule_id == rule]
    assert findings, [f.rule_id for f in info.value.report.findings]
    assert all(w in findings[0].message for w in words), findings[0].message
    if where:
        source = findings[0].location.source
        assert (source.file, source.line) == where
    assert info.value.exit_code == 1
    assert list(tmp_path.iterdir()) == []


def test_static_batch_exports_the_specializing_model(tmp_path):
    """The same model is fine once the batch it needs is asked for."""
    result = export_spec(f"{FIXTURES / 'specialize'}.py:build", tmp_path / "m.onnx", batch=2)
    assert result.report.ok and result.parity.ok
