"""``portable compare`` and ``portable.runners.compare`` on real exported models (CPU)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from support import runner_spec

from portable.runners import TimingConfig, compare

FAST = ["--warmup-ms", "0", "--iterations", "3", "--duration-ms", "0"]


def run_cli(cli, *args: str) -> tuple[int, str, str]:
    result = cli(*args)
    return result.exit_code, result.stdout, result.stderr


def test_cnn_passes_eager_compiled_and_ort_with_latency_and_report(cli, cnn_onnx: Path, tmp_path: Path) -> None:
    report_md = tmp_path / "out" / "report.md"
    code, out, err = run_cli(cli, "compare", str(cnn_onnx), "--reference", runner_spec("cnn"), "--device", "cpu",
                             "--batch", "2", "--format", "json", "--report", str(report_md), "-q", *FAST)
    assert code == 0, err
    data = json.loads(out)
    assert data["schema"] == "portable.compare" and data["passed"] and data["exit_code"] == 0
    pairs = {(p["actual"], p["expected"]) for p in data["parity"]}
    assert pairs == {("ort-cpu", "compiled"), ("ort-cpu", "eager"), ("compiled", "eager")}
    assert all(o["max_abs"] < 1e-4 and o["cosine"] > 0.999999 for p in data["parity"] for o in p["outputs"])
    assert {(r["runner"], r["batch"]) for r in data["latency"]} == {("eager", 2), ("compiled", 2), ("ort-cpu", 2)}
    assert all(r["iterations"] >= 3 and r["p50_s"] <= r["p99_s"] for r in data["latency"])
    compiled = next(r for r in data["runners"] if r["name"] == "compiled")
    assert compiled["detail"] == "default" and compiled["first_result_seconds"]["2"] > 0
    assert next(r for r in data["runners"] if r["name"] == "ort-cpu")["load_seconds"] > 0
    assert {s["runner"] for s in data["speedup"]} == {"eager", "compiled", "ort-cpu"}
    assert not any("the default tolerance adds" in n for n in data["notes"])  # float32: no low-precision note
    text = report_md.read_text()
    assert "**Parity: PASS**" in text and "report.latency.png" in text and "report.errors.png" in text
    for png in ("report.latency.png", "report.errors.png"):
        assert (report_md.parent / png).read_bytes()[:4] == b"\x89PNG"


def test_encoder_passes_through_the_api(models: ModuleType, encoder_onnx: Path) -> None:
    module, example = models.encoder()
    report = compare(encoder_onnx, module, example_inputs=example, device="cpu", compile_mode="default",
                     batches=[3], timing=None)
    assert report.passed, report.failures
    assert report.setup["dims"] == {next(iter(report.setup["dims"])): 8}  # seq taken from the example
    (ids,) = [n for n, v in report.setup["int_range"].items() if n != "default"]  # the token ids, by name
    assert report.setup["int_range"][ids] == [int(example[0].min()), int(example[0].max()) + 1]
    assert {(p.actual, p.expected) for p in report.parity} == {("ort-cpu", "compiled"), ("ort-cpu", "eager"),
                                                               ("compiled", "eager")}
    assert all(len(p.outputs) == 2 for p in report.parity)  # the hidden states and their mean


def test_scaled_initializer_fails_naming_the_output(cli, cnn_scaled_onnx: Path) -> None:
    code, out, _ = run_cli(cli, "compare", str(cnn_scaled_onnx), "--reference", runner_spec("cnn"), "--device", "cpu",
                           "--no-compile", "--no-latency", "--batch", "2", "--format", "json", "-q")
    assert code == 1
    data = json.loads(out)
    assert not data["passed"] and data["failures"] == ["ort-cpu vs eager (batch 2): linear"]
    bad = data["parity"][0]["outputs"][0]
    assert bad["beyond"] > 0 and bad["max_rel"] > 1e-3


def test_changed_attribute_fails_and_text_names_the_outputs(cli, encoder_eps_onnx: Path) -> None:
    code, out, _ = run_cli(cli, "compare", str(encoder_eps_onnx), "--reference", runner_spec("encoder"), "--device", "cpu",
                           "--no-compile", "--no-latency", "-q")
    assert code == 1
    assert "parity: FAIL" in out and "ort-cpu vs eager (batch 1): add_102, mean" in out


def test_wide_tolerance_override_lets_the_perturbed_model_pass(cli, cnn_scaled_onnx: Path) -> None:
    code, _, err = run_cli(cli, "compare", str(cnn_scaled_onnx), "--reference", runner_spec("cnn"), "--device", "cpu",
                           "--no-compile", "--no-latency", "--atol", "linear=1", "-q")
    assert code == 0, err


def test_nan_weight_is_reported_as_a_failure(cli, cnn_nan_onnx: Path) -> None:
    code, out, _ = run_cli(cli, "compare", str(cnn_nan_onnx), "--reference", runner_spec("cnn_nan"), "--device", "cpu",
                           "--no-compile", "--no-latency", "--format", "json", "-q")
    assert code == 1
    output = json.loads(out)["parity"][0]["outputs"][0]
    assert output["nonfinite_actual"] > 0 and output["nonfinite_expected"] > 0 and not output["passed"]


def test_localize_names_the_perturbed_node(cli, cnn_scaled_onnx: Path, encoder_eps_onnx: Path) -> None:
    code, out, _ = run_cli(cli, "compare", str(cnn_scaled_onnx), "--reference", runner_spec("cnn"), "--device", "cpu",
                           "--no-compile", "--no-latency", "--batch", "2", "--localize", "--format", "json", "-q")
    assert code == 1
    loc = json.loads(out)["localization"]
    assert (loc["node"], loc["op_type"], loc["value"]) == ("node_conv2d_1", "Conv", "conv2d_1")
    assert loc["fx_node"] == "torch.ops.aten.conv2d.default" and "runner_models.py:" in loc["source"]
    assert "self.conv2(y)" in loc["source"]
    code, out, _ = run_cli(cli, "compare", str(encoder_eps_onnx), "--reference", runner_spec("encoder"), "--device", "cpu",
                           "--no-compile", "--no-latency", "--localize", "-q")
    assert code == 1 and "first divergent node node_layer_norm (LayerNormalization)" in out


def test_localize_on_a_correct_export_finds_nothing(models: ModuleType, cnn_onnx: Path) -> None:
    from portable.runners.inputs import graph_io, make_feeds
    from portable.runners.localize import localize_divergence
    from portable.runners.tolerances import ToleranceTable

    module, _ = models.cnn()
    specs, _ = graph_io(cnn_onnx)
    loc = localize_divergence(cnn_onnx, module, make_feeds(specs, 2), ToleranceTable())
    assert loc.node is None and loc.error is None and loc.compared >= 5


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--batch", "0"], 2, "--batch"),
    (["--ep", "nosuch"], 2, "unknown execution provider"),
    (["--atol", "x=y"], 2, "--atol"),
    (["--reference", "nowhere.py:build"], 3, "no such file"),
])
def test_bad_options_exit_with_usage_or_input_errors(cli, cnn_onnx: Path, args: list[str], code: int,
                                                     message: str) -> None:
    base = ["compare", str(cnn_onnx), "--reference", runner_spec("cnn"), "--device", "cpu", "--no-compile",
            "--no-latency", "-q"]
    got, _, err = run_cli(cli, *base, *args)
    assert got == code and message in err


def test_npz_inputs_replace_the_random_ones(cli, models: ModuleType, cnn_onnx: Path, tmp_path: Path) -> None:
    import numpy as np

    data = tmp_path / "inputs.npz"
    np.savez(data, x=np.full((3, 3, 16, 16), 0.5, dtype=np.float64))  # cast to the declared float32
    code, out, err = run_cli(cli, "compare", str(cnn_onnx), "--reference", runner_spec("cnn"), "--device", "cpu",
                             "--no-compile", "--no-latency", "--inputs", str(data), "--format", "json", "-q")
    assert code == 0, err
    assert json.loads(out)["setup"]["inputs"] == str(data) and json.loads(out)["setup"]["batches"] == [3]
    np.savez(data, y=np.zeros(3))
    code, _, err = run_cli(cli, "compare", str(cnn_onnx), "--reference", runner_spec("cnn"), "--device", "cpu",
                           "--no-latency", "--inputs", str(data), "-q")
    assert code == 3 and "no array for input 'x'" in err


def test_missing_model_is_exit_3(cli, tmp_path: Path) -> None:
    code, _, err = run_cli(cli, "compare", str(tmp_path / "none.onnx"), "--reference", runner_spec("cnn"), "--device", "cpu",
                           "--no-latency", "-q")
    assert code == 3 and "no such model file" in err


def test_api_latency_phase_fills_every_runner_and_batch(models: ModuleType, cnn_onnx: Path) -> None:
    module, _ = models.cnn()
    report = compare(cnn_onnx, module, device="cpu", compile_mode=None, batches=[1, 4],
                     timing=TimingConfig(0.0, 1, 3, 0.0))
    assert report.passed
    assert sorted((r.runner, r.batch) for r in report.latency) == [("eager", 1), ("eager", 4), ("ort-cpu", 1),
                                                                     ("ort-cpu", 4)]
    eager4 = next(r for r in report.latency if r.runner == "eager" and r.batch == 4)
    assert eager4.stats.throughput == pytest.approx(4 / eager4.stats.mean_s)
    assert eager4.memory_kind == "rss_growth" and eager4.timer == "perf_counter"
    speed = {(s.runner, s.batch): s.speedup for s in report.speedups()}
    assert speed[("eager", 1)] == 1.0 and speed[("ort-cpu", 4)] > 0


def test_onnx_runtime_does_not_spin_while_others_are_timed_and_the_threads_are_reported(models: ModuleType,
                                                                                         cnn_onnx: Path) -> None:
    from dataclasses import replace

    from portable.runners.ort_runner import OnnxRuntimeRunner

    module, _ = models.cnn()
    report = compare(cnn_onnx, module, device="cpu", compile_mode=None, batches=[1], timing=TimingConfig(0.0, 1, 3, 0.0))
    threads = report.setup["threads"]
    assert threads["ort-cpu"]["spinning"] is False and threads["torch_intra_op"] >= 1
    runner = OnnxRuntimeRunner(cnn_onnx, spinning=False)
    runner.load()
    assert runner.session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    steady = report.latency[0]
    # on a busy machine any runner may be noisy: a warning for exactly those whose CV is over 0.2
    noisy_runners = {r.runner for r in report.latency if r.stats.cv > 0.2}
    assert {w.split("latency of ")[1].split(" at batch")[0] for w in report.timing_warnings} == noisy_runners
    steady = replace(steady, stats=replace(steady.stats, cv=0.1))
    noisy = replace(steady, stats=replace(steady.stats, cv=0.7))
    warned = replace(report, latency=(noisy,)).timing_warnings
    assert len(warned) == 1 and "varies run to run (CV 0.70 > 0.2)" in warned[0]
    assert replace(report, latency=(replace(steady, stats=replace(steady.stats, cv=0.1)),)).timing_warnings == ()


def test_parity_only_reports_carry_no_timing_notes(models: ModuleType, cnn_onnx: Path) -> None:
    module, _ = models.cnn()
    report = compare(cnn_onnx, module, device="cpu", compile_mode=None, batches=[1], timing=None)
    assert not any(n.startswith(("timing:", "peak memory:")) for n in report.notes), report.notes


def test_cli_help_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = ("import sys; from portable.cli import main\n"
            "try:\n    main(['compare', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules, 'onnxruntime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False False")
