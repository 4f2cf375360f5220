"""``compare --runtime ort,qnn``: Qualcomm's HTP simulator (onnxruntime-qnn) beside ONNX Runtime's CPU provider and
PyTorch, with the SQNR, max abs and top-1 agreement of each output (issue 47 item 3). Skipped, saying why, where the
``qnn`` extra is not installed; the ``not installed`` record is tested with the package hidden."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from support import fixture_module, save

from portable.runners.runtimes import RUNTIME_TOLERANCES, compare_runtimes, make_runner

HTP = pytest.mark.skipif(importlib.util.find_spec("onnxruntime_qnn") is None,
                         reason="onnxruntime-qnn is not installed (pip install 'portable-onnx[qnn]')")


def _statuses(report) -> dict[tuple[str, int], str]:
    return {(r.runtime, r.batch): r.status for r in report.records}


@HTP
def test_the_htp_simulator_matches_pytorch_on_a_float_cnn_at_batch_1_and_3(cnn_onnx: Path, models: ModuleType) -> None:
    """The simulator computes a float file in float32: within the float32 default, one session per batch."""
    module, example = models.cnn()
    report = compare_runtimes(cnn_onnx, "ort,qnn", module=module, example_inputs=example)
    assert _statuses(report) == {(r, b): "pass" for r in ("ort", "qnn") for b in (1, 3)}
    for record in report.records:
        (figures,) = record.figures
        assert figures.sqnr_db > 100 and figures.max_abs < 1e-5 and figures.top1 == 1.0, record
    assert report.to_dict()["tolerances"]["qnn"]["qdq"]["why"] == RUNTIME_TOLERANCES["qnn"]["qdq"][2]


@HTP
def test_the_htp_with_perturbed_outputs_fails(cnn_onnx: Path, models: ModuleType) -> None:
    module, example = models.cnn()

    def scaled(runtime: str, model: Path, **kw):
        runner = make_runner(runtime, model, **kw)
        infer = runner.infer
        runner.infer = lambda feeds: [o * np.float32(1.01) for o in infer(feeds)]  # type: ignore[method-assign]
        return runner

    report = compare_runtimes(cnn_onnx, "qnn", module=module, example_inputs=example, batches=[1], runner_factory=scaled)
    assert _statuses(report) == {("qnn", 1): "fail"} and report.exit_code == 1
    assert 35 < report.records[0].figures[0].sqnr_db < 45  # a 1 % scale: 40 dB


@HTP
def test_compare_gives_the_htps_figures_per_output_on_a_qdq_file(cli, tmp_path: Path) -> None:
    htp = fixture_module("htp")
    path = save(htp.qdq_conv(), tmp_path / "qdq.onnx")
    result = cli("compare", str(path), "--runtime", "ort,qnn", "--format", "json", "-q")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (qnn,) = [r for r in data["records"] if r["runtime"] == "qnn"]
    (figures,) = qnn["outputs"]
    assert figures["output"] == "y" and figures["sqnr_db"] > 20 and figures["max_abs"] < 0.05
    assert qnn["version"] == "2.7.0" and qnn["tolerance"].startswith("1/0.5")


def test_without_the_extra_the_htp_is_a_not_installed_record(cnn_onnx: Path, monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime_qnn" else real(name, *a))
    report = compare_runtimes(cnn_onnx, "ort,qnn", batches=[1])
    assert _statuses(report) == {("ort", 1): "reference", ("qnn", 1): "not installed"}
    assert "pip install 'portable-onnx[qnn]'" in (report.records[1].error or "")
