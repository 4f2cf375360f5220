"""compare's numerics mode, provider options, steady warm-up and interleaved latency in the report (CPU)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from portable.errors import UsageError
from portable.runners import TimingConfig, compare
from portable.runners.api import _pairs, compiled_name
from portable.runners.render import latency_rows, render_markdown

FAST = TimingConfig(warmup_seconds=0.0, warmup_iterations=1, min_iterations=3, min_seconds=0.0,
                    warmup_max_seconds=0.5, block_seconds=0.005, rounds=2)


def test_report_states_the_numerics_the_options_and_the_warm_up(models: ModuleType, cnn_onnx: Path) -> None:
    module, example = models.cnn()
    report = compare(cnn_onnx, module, example_inputs=example, device="cpu", compile_mode=None, batches=[1, 2],
                     timing=FAST)
    data = report.to_dict()
    assert data["passed"] and data["setup"]["numerics"] == "strict-fp32" and data["setup"]["tf32"] is False
    assert data["setup"]["timing"]["interleaved"] is True and "ort-cpu" in data["setup"]["provider_options"]
    for row in data["latency"]:
        assert row["rounds"] >= 2 and row["iterations"] >= 3
        assert row["warmup"]["iterations"] >= 1 and isinstance(row["warmup"]["steady"], bool)
    assert {(r["runner"], r["batch"]) for r in data["latency"]} == {("eager", 1), ("eager", 2), ("ort-cpu", 1),
                                                                     ("ort-cpu", 2)}
    assert all(("steady" in row[12]) or ("capped" in row[12]) for row in latency_rows(report))
    text = render_markdown(report)
    assert "numerics strict-fp32" in text and "ONNX Runtime provider options" in text
    assert any("round-robin" in n for n in data["notes"])


def test_tf32_mode_is_one_switch_for_both_sides(models: ModuleType, cnn_onnx: Path) -> None:
    module, example = models.cnn()
    report = compare(cnn_onnx, module, example_inputs=example, device="cpu", compile_mode=None, batches=[2],
                     timing=None, tf32=True)
    assert report.setup["numerics"] == "tf32"
    assert all(o.tolerance.source == "tf32 float32" for p in report.parity for o in p.outputs)


def test_several_compile_modes_make_one_runner_each_and_pairs_for_all() -> None:
    assert compiled_name("default") == "compiled" and compiled_name("reduce-overhead") == "compiled-reduce-overhead"
    names = ["eager", "compiled", "compiled-reduce-overhead", "ort-cuda", "ort-cuda-graph"]
    pairs = _pairs(names)
    assert ("ort-cuda-graph", "eager") in pairs and ("ort-cuda", "compiled-reduce-overhead") in pairs
    assert ("compiled-reduce-overhead", "eager") in pairs and ("compiled", "eager") in pairs
    assert len(pairs) == 2 * 3 + 2


@pytest.mark.parametrize("mode", ["bogus", "default,bogus", ""])
def test_unknown_compile_modes_are_usage_errors(models: ModuleType, cnn_onnx: Path, mode: str) -> None:
    module, _ = models.cnn()
    with pytest.raises(UsageError, match="compile mode"):
        compare(cnn_onnx, module, device="cpu", compile_mode=mode, timing=None)


def test_cli_rejects_an_unknown_compile_mode_before_loading_anything(cli, cnn_onnx: Path) -> None:
    result = cli("compare", str(cnn_onnx), "--reference", "nowhere.py:nothing", "--compile-mode", "default,fastest", "-q")
    assert result.exit_code == 2 and "unknown compile mode 'fastest'" in result.stderr


def test_default_providers_follow_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    from portable.runners import api, ort_runner
    from portable.runners.ort_runner import CUDA, EpChoice

    monkeypatch.setattr(ort_runner, "available_providers", lambda: [CUDA, "CPUExecutionProvider"])
    assert api._eps(None, "cpu") == [EpChoice("CPUExecutionProvider")]
    assert api._eps(None, "cuda") == [EpChoice(CUDA), EpChoice("CPUExecutionProvider")]
    assert api._eps("cuda", "cpu") == [EpChoice(CUDA)]


def test_a_default_provider_that_cannot_load_is_noted_not_an_error(models: ModuleType, cnn_onnx: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from portable.runners import api
    from portable.runners.ort_runner import EpChoice

    trt = "TensorrtExecutionProvider"  # not in this onnxruntime build: its session cannot be created
    monkeypatch.setattr(api, "_eps", lambda providers, device: [EpChoice(trt), EpChoice("CPUExecutionProvider")])
    module, example = models.cnn()
    implicit = compare(cnn_onnx, module, example_inputs=example, device="cpu", compile_mode=None, timing=None)
    assert implicit.exit_code == 0 and [r.name for r in implicit.runners] == ["eager", "ort-cpu"]
    assert any(n.startswith("ort-tensorrt left out") for n in implicit.notes)
    assert implicit.setup["providers"] == ["CPUExecutionProvider"]
    named = compare(cnn_onnx, module, example_inputs=example, device="cpu", compile_mode=None, timing=None,
                    providers="tensorrt,cpu")
    assert named.exit_code == 3 and named.runner_errors[0].startswith("ort-tensorrt:")


def test_a_degenerate_output_is_a_warning_in_the_text_and_markdown(models: ModuleType, cnn_onnx: Path) -> None:
    """An all-zero reference passes any tolerance: the report says parity proves nothing there."""
    import dataclasses
    import io

    import numpy as np
    from rich.console import Console

    from portable.runners.comparator import compare_outputs
    from portable.runners.render import parity_rows, parity_warnings, render_rich
    from portable.runners.tolerances import ToleranceTable

    module, example = models.cnn()
    report = compare(cnn_onnx, module, example_inputs=example, device="cpu", compile_mode=None, timing=None)
    assert report.passed and parity_warnings(report) == []  # the CNN's real outputs are not degenerate
    zeros, tiny = np.zeros((2, 10), np.float32), np.full((2, 10), 1e-7, np.float32)
    pair = compare_outputs(("ort-cpu", [tiny]), ("eager", [zeros]), ["logits"], ["float32"], 2, ToleranceTable())
    degenerate = dataclasses.replace(report, parity=(pair,))
    assert degenerate.passed and parity_rows(degenerate)[0][-1] == "pass, degenerate (rms 0)"
    (warning,) = parity_warnings(degenerate)
    assert "degenerate: parity proves nothing" in warning and f"- warning: {warning}" in render_markdown(degenerate)
    console = Console(file=io.StringIO(), width=400, color_system=None)
    render_rich(degenerate, console)
    assert f"warning: {warning}" in console.file.getvalue()
