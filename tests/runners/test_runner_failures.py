"""A runner that fails (ORT session, torch.compile, CUDA out of memory) is that runner's error:
the other runners' results are still reported, and the exit code says something could not run."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from portable.runners import compare
from portable.runners.torch_runners import CompiledRunner, EagerRunner


def _compile_fails(self):
    """What a failing inductor compile looks like: torch.compile returns, the first call raises."""
    def compiled(*args):
        raise RuntimeError("inductor could not compile: CppCompileError")

    return compiled


def _unloadable(source: Path, target: Path) -> Path:
    """The CNN with its first Conv renamed to an op ONNX Runtime does not have."""
    import onnx

    model = onnx.load(str(source))
    next(n for n in model.graph.node if n.op_type == "Conv").op_type = "NoSuchConv"
    onnx.save(model, str(target))
    return target


def _run(models: ModuleType, cnn_onnx: Path, **kw):
    module, example = models.cnn()
    return compare(cnn_onnx, module, example_inputs=example, device="cpu", batches=[2], timing=None, **kw)


def test_compile_failure_keeps_ort_vs_eager(monkeypatch, models, cnn_onnx):
    monkeypatch.setattr(CompiledRunner, "_build", _compile_fails)
    report = _run(models, cnn_onnx)
    assert report.exit_code == 3 and not report.passed
    assert report.runner_errors == ("compiled: compiled failed: RuntimeError: inductor could not compile: CppCompileError",)
    assert [(p.actual, p.expected, p.passed) for p in report.parity] == [("ort-cpu", "eager", True)]


def test_ort_session_failure_keeps_compiled_vs_eager(models, cnn_onnx, tmp_path):
    report = _run(models, _unloadable(cnn_onnx, tmp_path / "bad.onnx"))
    assert report.exit_code == 3
    assert report.runner_errors[0].startswith("ort-cpu: ONNX Runtime's CPU provider cannot load")
    assert "NoSuchConv" in report.runner_errors[0]
    assert [(p.actual, p.expected) for p in report.parity] == [("compiled", "eager")]
    assert report.to_dict()["runners"][-1]["error"]


def test_out_of_memory_in_the_latency_phase_keeps_the_other_timings(monkeypatch, models, cnn_onnx):
    import torch

    from portable.runners import TimingConfig

    def oom(self, feeds):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(EagerRunner, "prepare", oom)
    module, example = models.cnn()
    report = compare(cnn_onnx, module, example_inputs=example, device="cpu", batches=[2], compile_mode=None,
                     timing=TimingConfig(warmup_seconds=0, min_iterations=2, min_seconds=0))
    assert report.exit_code == 3
    assert all(p.passed for p in report.parity)
    assert {r.runner for r in report.latency} == {"ort-cpu"}
    assert "latency phase: OutOfMemoryError" in report.runner_errors[0]


def test_cli_reports_runner_errors_with_exit_3(cli, monkeypatch, cnn_onnx):
    monkeypatch.setattr(CompiledRunner, "_build", _compile_fails)
    spec = f"{Path(__file__).resolve().with_name('runner_models.py')}:cnn"
    result = cli("compare", str(cnn_onnx), "--reference", spec, "--device", "cpu", "--no-latency", "-q", "--batch", "2")
    assert result.exit_code == 3
    assert "inductor could not compile" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("kind", ["dtype", "shape"])
def test_wrong_npz_inputs_are_one_line_errors(cli, tmp_path, cnn_onnx, kind):
    import numpy as np

    data = tmp_path / "inputs.npz"
    bad = np.zeros((2, 3, 16, 16), dtype="U3") if kind == "dtype" else np.zeros((2, 5, 7), dtype=np.float32)
    np.savez(data, x=bad)
    spec = f"{Path(__file__).resolve().with_name('runner_models.py')}:cnn"
    result = cli("compare", str(cnn_onnx), "--reference", spec, "--device", "cpu", "--no-latency", "--no-compile", "-q",
                 "--inputs", str(data))
    assert result.exit_code == 3, result.output
    assert "inputs.npz" in result.stderr or "'x'" in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_every_runner_asked_before_load_says_load_first(models, cnn_onnx):
    """One guard, in the base class (``Runner._loaded``): a runner used before ``load()`` (or after ``unload()``)
    says so in the same words, whatever its runtime; neither openvino nor tract is imported to say it."""
    from portable.runners.openvino_runner import OpenVinoRunner
    from portable.runners.ort_runner import OnnxRuntimeRunner
    from portable.runners.tract_runner import TractRunner

    ort = OnnxRuntimeRunner(cnn_onnx)
    asks = {"ort-cpu": lambda: ort.session, "openvino": lambda: OpenVinoRunner(cnn_onnx).infer({}),
            "openvino-prepare": lambda: OpenVinoRunner(cnn_onnx, name="openvino-prepare").prepare({}),
            "tract": lambda: TractRunner(cnn_onnx).infer({}),
            "eager": lambda: EagerRunner(models.cnn()[0])._call([])}
    for name, ask in asks.items():
        with pytest.raises(RuntimeError, match=rf"^{name}: load\(\) first$"):
            ask()
    ort.load()
    assert ort.session is not None
    ort.unload()
    with pytest.raises(RuntimeError, match=r"^ort-cpu: load\(\) first$"):
        assert ort.session is None  # never reached: the guard raises
