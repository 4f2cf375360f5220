"""``quantize --target qnn`` judged on Qualcomm's HTP (issue 47 item 4): where onnxruntime-qnn is installed, the
accuracy and the budgets are the HTP simulator's own outputs on the held-out samples, with ONNX Runtime CPU's on the
same samples beside them, and the report says which arithmetic each figure comes from. Without the extra: one note
naming it, and ONNX Runtime CPU's figures as before."""

from __future__ import annotations

import importlib.util
import json

import pytest

import portable
from portable.quantization.on_htp import NOT_INSTALLED


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime_qnn") is None,
                    reason="onnxruntime-qnn is not installed (pip install 'portable-onnx[qnn]')")
def test_the_accuracy_is_judged_on_the_htp_with_ort_cpu_beside_it(cnn, quick, tmp_path, cli):
    result = portable.quantize(cnn, tmp_path / "qnn.onnx", target="qnn", latency=False, per_node=False,
                               min_sqnr=0.0, search_limit=0, **quick)
    htp = result.htp
    assert htp is not None and result.accuracy == htp.htp and htp.samples == htp.held_out == 32
    assert htp.runtime.startswith("onnxruntime-qnn 2.7.0") and "integer arithmetic" in htp.arithmetic
    ((judged,), (cpu,)) = htp.htp, htp.ort_cpu
    assert judged.sqnr_db > 10 and cpu.sqnr_db > 10 and judged.sqnr_db != cpu.sqnr_db  # two arithmetics, two figures
    assert [c.measured for c in result.checks] == [judged.sqnr_db]  # the budget read the HTP's figure
    assert any(n.startswith("accuracy and budgets judged on the QNN HTP simulator") for n in result.notes)
    data = result.to_dict()["htp"]
    assert data["judged_on"].startswith("the QNN HTP simulator") and data["beside"].startswith("ONNX Runtime CPU")
    text = cli("quantize", str(cnn), "-o", str(tmp_path / "cli.onnx"), "--target", "qnn", "--min-sqnr", "0",
               "--samples", "16", "--eval-samples", "8", "--no-latency")
    assert text.exit_code == 0, text.output
    assert "judged on the QNN HTP simulator (onnxruntime-qnn 2.7.0" in text.output
    assert "beside it, ONNX Runtime CPU (the QDQ file as written" in text.output
    manifest = json.loads((tmp_path / "cli.onnx.json").read_text())
    assert "htp" in json.dumps(manifest)


def test_without_the_extra_a_note_names_it_and_ort_cpu_judges(cnn, quick, tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime_qnn" else real(name, *a))
    result = portable.quantize(cnn, tmp_path / "qnn.onnx", target="qnn", latency=False, per_node=False,
                               min_sqnr=0.0, search_limit=0, **quick)
    assert result.htp is None and NOT_INSTALLED in result.notes and result.written
