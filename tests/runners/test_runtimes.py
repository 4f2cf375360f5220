"""``compare --runtime``: ONNX Runtime, OpenVINO, tract and the reference evaluator on the same seeded inputs,
each against PyTorch or each other; ``matrix --runtime``; the golden bundle (runners/runtimes.py, golden.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from support import runner_spec

from portable.runners.base import Feeds, Runner
from portable.runners.golden import read_golden
from portable.runners.runtimes import RUNTIME_TOLERANCES, compare_runtimes, make_runner


def _statuses(report: Any) -> dict[tuple[str, int], str]:
    return {(r.runtime, r.batch): r.status for r in report.records}


def test_ort_and_the_reference_evaluator_match_pytorch_at_batch_1_and_3(cnn_onnx: Path, models: ModuleType) -> None:
    module, example = models.cnn()
    report = compare_runtimes(cnn_onnx, "ort,reference", module=module, example_inputs=example, cap_seconds=120)
    assert report.reference == "eager" and report.batches == (1, 3)
    assert _statuses(report) == {(r, b): "pass" for r in ("ort", "reference") for b in (1, 3)}
    assert all(0 < r.max_abs < 1e-4 for r in report.records)  # non-zero: two different computations agree
    assert report.exit_code == 0


class _Perturbed(Runner):
    """A real runtime whose outputs are scaled by 1.01: what a miscompiling runtime looks like."""

    def __init__(self, inner: Runner) -> None:
        super().__init__()
        self.inner, self.name, self.kind, self.device = inner, inner.name, inner.kind, "cpu"

    def load(self) -> None:
        self.inner.load()

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        return [o * np.float32(1.01) for o in self.inner.infer(feeds)]

    def prepare(self, feeds: Feeds) -> Any:
        return self.inner.prepare(feeds)


def test_a_runtime_with_perturbed_outputs_fails_parity(cnn_onnx: Path, models: ModuleType) -> None:
    module, example = models.cnn()

    def factory(runtime: str, model: Any, **kw: Any) -> Runner:
        runner = make_runner(runtime, model, **kw)
        return _Perturbed(runner) if runtime == "reference" else runner

    report = compare_runtimes(cnn_onnx, "ort,reference", module=module, example_inputs=example, runner_factory=factory,
                              cap_seconds=120)
    assert _statuses(report)[("ort", 1)] == "pass"
    assert _statuses(report)[("reference", 1)] == "fail" and _statuses(report)[("reference", 3)] == "fail"
    assert report.exit_code == 1 and not report.passed
    failed = next(r for r in report.records if r.status == "fail")
    assert failed.versus == "eager" and "beyond" in (failed.error or "")


def test_without_pytorch_each_runtime_is_compared_with_the_first_that_runs(cnn_onnx: Path) -> None:
    report = compare_runtimes(cnn_onnx, "ort,reference", cap_seconds=120)
    assert report.reference == "ort"
    assert _statuses(report) == {("ort", 1): "reference", ("ort", 3): "reference", ("reference", 1): "pass",
                                 ("reference", 3): "pass"}


def test_the_reference_evaluator_past_its_cap_is_timed_out_not_a_failure(cnn_onnx: Path) -> None:
    # a spawned interpreter alone takes longer than 50 ms to import onnx: the cap is reached every time
    report = compare_runtimes(cnn_onnx, "ort,reference", cap_seconds=0.05)
    assert _statuses(report)[("reference", 1)] == "timed out"
    assert "did not finish within 0.05 s" in (report.records[-1].error or "")
    # a timed-out runtime fails nothing, but with it nothing was compared: not a pass (exit 3, saying why)
    assert report.exit_code == 3 and "nothing was compared: reference timed out" in (report.error or "")


def _custom_op_model(path: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    graph = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(path))
    return path


def test_a_runtime_that_cannot_load_the_model_is_a_finding(tmp_path: Path, cnn_onnx: Path) -> None:
    report = compare_runtimes(_custom_op_model(tmp_path / "custom.onnx"), "ort,reference", cap_seconds=60)
    assert _statuses(report)[("ort", 1)] == "does not load"
    assert "Frobnicate" in (report.records[0].error or "")
    assert report.exit_code == 3  # nothing ran every batch: nothing to compare with
    good = compare_runtimes(cnn_onnx, "ort,reference", batches=[1], cap_seconds=120)
    assert good.exit_code == 0 and good.error is None


def test_a_missing_runtime_is_a_not_installed_record_and_cell(cli, cnn_onnx: Path, monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("openvino", "tract")
                        else real(name, *a))
    report = compare_runtimes(cnn_onnx, "ort,openvino,tract", batches=[1])
    assert _statuses(report) == {("ort", 1): "reference", ("openvino", 1): "not installed",
                                 ("tract", 1): "not installed"}
    assert "make targets-venv" in (report.records[1].error or "")
    # not installed is a cell, never a failure; but with every other runtime absent nothing was compared
    assert report.exit_code == 3 and report.error == "nothing was compared: openvino not installed; tract not installed"
    result = cli("matrix", str(cnn_onnx), "--ep", "cpu", "--runtime", "openvino,tract", "--batch", "1", "-q")
    assert result.exit_code == 0, result.stderr
    assert "| batch | openvino | tract |" in result.stdout and "| 1 | not installed | not installed |" in result.stdout


def test_golden_bundle_replays_in_onnxruntime(cnn_onnx: Path, models: ModuleType, tmp_path: Path) -> None:
    from portable.runners.sessions import session_from_onnx

    module, example = models.cnn()
    golden = tmp_path / "golden"
    report = compare_runtimes(cnn_onnx, "ort", module=module, example_inputs=example, golden=golden)
    assert report.golden == str(golden)
    assert sorted(p.name for p in golden.iterdir()) == ["test_data_set_0", "test_data_set_1"]
    assert sorted(p.name for p in (golden / "test_data_set_0").iterdir()) == ["input_0.pb", "output_0.pb"]
    session = session_from_onnx(cnn_onnx)
    sets = read_golden(golden)
    assert [next(iter(i.values())).shape[0] for i, _ in sets] == [1, 3]
    for inputs, outputs in sets:
        got = session.run(None, inputs)
        (name, expected), = outputs.items()
        assert name == session.get_outputs()[0].name and np.abs(expected).max() > 1e-2
        np.testing.assert_allclose(got[0], expected, atol=1e-4, rtol=1e-3)
        # the check fails on a bundle whose output was changed
        assert not np.allclose(got[0], expected * 1.01, atol=1e-4, rtol=1e-3)
    # a bundle of fewer batches over an older one: the older one's extra set goes (no stale replay)
    compare_runtimes(cnn_onnx, "ort", module=module, example_inputs=example, golden=golden, batches=[2])
    assert sorted(p.name for p in golden.iterdir()) == ["test_data_set_0"]
    assert [next(iter(i.values())).shape[0] for i, _ in read_golden(golden)] == [2]


def test_compare_cli_runtime_json_and_usage_errors(cli, cnn_onnx: Path, tmp_path: Path) -> None:
    golden = tmp_path / "g"
    result = cli("compare", str(cnn_onnx), "--runtime", "ort,reference", "--reference", runner_spec("cnn"),
                 "--golden", str(golden), "--format", "json", "-q")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == "portable.runtimes" and data["reference"] == "eager" and data["exit_code"] == 0
    assert {(r["runtime"], r["batch"], r["status"]) for r in data["records"]} == {
        (r, b, "pass") for r in ("ort", "reference") for b in (1, 3)}
    assert data["tolerances"]["openvino"]["float32"]["why"] == RUNTIME_TOLERANCES["openvino"]["float32"][2]
    assert (golden / "test_data_set_1" / "output_0.pb").is_file()
    assert cli("compare", str(cnn_onnx), "--runtime", "ort,bogus", "-q").exit_code == 2
    assert cli("compare", str(cnn_onnx), "--runtime", "ort", "--ep", "cpu", "-q").exit_code == 2
    assert cli("compare", str(cnn_onnx), "--golden", str(golden), "-q").exit_code == 2
    assert cli("compare", str(cnn_onnx), "-q").exit_code == 2


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_installed_runtime_matches_pytorch(runtime: str, cnn_onnx: Path, models: ModuleType) -> None:
    pytest.importorskip(runtime, reason=f"{runtime} is not installed (make targets-venv)")
    module, example = models.cnn()
    report = compare_runtimes(cnn_onnx, runtime, module=module, example_inputs=example)
    assert _statuses(report) == {(runtime, 1): "pass", (runtime, 3): "pass"}
    assert all(r.version and 0 < r.max_abs < 1e-4 for r in report.records)


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_installed_runtime_with_perturbed_outputs_fails(runtime: str, cnn_onnx: Path, models: ModuleType) -> None:
    pytest.importorskip(runtime, reason=f"{runtime} is not installed (make targets-venv)")
    module, example = models.cnn()
    report = compare_runtimes(cnn_onnx, runtime, module=module, example_inputs=example, batches=[1],
                              runner_factory=lambda r, m, **kw: _Perturbed(make_runner(r, m, **kw)))
    assert _statuses(report) == {(runtime, 1): "fail"} and report.exit_code == 1


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_installed_runtime_that_lacks_the_op_does_not_load(runtime: str, tmp_path: Path) -> None:
    pytest.importorskip(runtime, reason=f"{runtime} is not installed (make targets-venv)")
    report = compare_runtimes(_custom_op_model(tmp_path / "custom.onnx"), runtime, batches=[1])
    assert _statuses(report) == {(runtime, 1): "does not load"}
    assert report.records[0].error


def test_a_runtime_that_cannot_run_the_file_is_a_finding_not_an_internal_error(tmp_path: Path) -> None:
    """ONNX Runtime has the contrib Gelu, ONNX's reference evaluator does not: the one runtime compared fails,
    which is what the file does there (exit 1), not a run that could not judge (exit 3). The OpenVINO/tract
    case below says the same where those are installed; this one runs wherever onnx is."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")], "g", [x], [y])
    path = tmp_path / "contrib.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]),
              str(path))
    report = compare_runtimes(path, "ort,reference", batches=[1], cap_seconds=60)
    statuses = _statuses(report)
    assert statuses[("ort", 1)] == "reference" and statuses[("reference", 1)] in ("does not load", "fails to run")
    assert report.error is None and report.exit_code == 1 and report.to_dict()["exit_code"] == 1


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_a_live_load_failure_is_the_one_the_offline_profile_predicted(runtime: str, tmp_path: Path) -> None:
    """Det has no OpenVINO translator and no tract builder: the profile says the file does not load, and the
    runner, run for real, fails to load it; ONNX Runtime (which has Det) runs it as the reference."""
    pytest.importorskip(runtime, reason=f"{runtime} is not installed (make targets-venv)")
    from portable.policy import Policy
    from portable.validators import validate

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch"])
    model = helper.make_model(helper.make_graph([helper.make_node("Det", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 18)])
    path = tmp_path / "det.onnx"
    onnx.save(model, str(path))
    (offline,) = validate(path, Policy(targets=(runtime,))).targets
    assert not offline.loads and dict(offline.fallback) == {"Det": 1}
    report = compare_runtimes(path, f"ort,{runtime}", batches=[1, 3])
    assert _statuses(report) == {("ort", 1): "reference", ("ort", 3): "reference", (runtime, 1): "does not load",
                                 (runtime, 3): "does not load"}
    assert report.exit_code == 1


def test_tract_runs_a_resize_over_the_symbolic_batch(tmp_path: Path) -> None:
    """The zoo's DeepLabV3 on tract: left symbolic, tract's Resize fails ("Undetermined symbol in expression:
    batch"); the runner binds the batch per size (SetSymbols) and the outputs match ONNX Runtime's."""
    pytest.importorskip("tract", reason="tract is not installed (make targets-venv)")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, 8, 8])
    hw = onnx.numpy_helper.from_array(np.array([8, 8], np.int64), "hw")
    nodes = [helper.make_node("Shape", ["x"], ["s"], end=2), helper.make_node("Concat", ["s", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear")]  # sizes from the batch
    graph = helper.make_graph(nodes, "g", [x], [y], [hw])
    path = tmp_path / "resize.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    report = compare_runtimes(path, "ort,tract")
    assert _statuses(report) == {("ort", 1): "reference", ("ort", 3): "reference", ("tract", 1): "pass",
                                 ("tract", 3): "pass"}


def test_a_reference_that_fails_is_the_reports_error_not_a_crash(cnn_onnx: Path) -> None:
    import torch

    class Broken(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("the reference is broken")

    report = compare_runtimes(cnn_onnx, "ort", module=Broken(), batches=[1])
    assert report.exit_code == 3 and "the reference is broken" in (report.error or "")
    assert _statuses(report) == {("ort", 1): "not compared"}


def test_runtimes_are_judged_by_the_float64_noise_floor_as_verify_is(tmp_path: Path, monkeypatch: Any) -> None:
    """fixtures/models/cancelling_mlp.py: fp32 arithmetic alone errs past atol 1e-4 (by construction, 1/16 apart
    on any machine), so ONNX Runtime and the reference evaluator pass only by the float64 noise floor (each 1/3 of
    PyTorch fp32's own error); with the bounds given (no calibration), or a weight scaled by 1.01, they fail."""
    import torch
    from support import ROOT

    import portable
    from portable.runners.tolerances import ToleranceTable
    from portable.spec import load_spec

    loaded = load_spec(f"{ROOT}/fixtures/models/cancelling_mlp.py:build")
    path = tmp_path / "noisy.onnx"
    portable.export(loaded.module, loaded.example_inputs, path, verify=False)
    report = compare_runtimes(path, "ort,reference", module=loaded.module, example_inputs=loaded.example_inputs)
    assert _statuses(report) == {(r, b): "pass" for r in ("ort", "reference") for b in (1, 3)}, report.records
    assert all(r.max_abs == 1 / 16 for r in report.records)  # past atol: the noise floor decides where atol/rtol refuse
    assert all("noise floor 0.3x" in (r.tolerance or "") for r in report.records), report.records
    assert report.notes == ("float64 reference: ran (each runtime judged against PyTorch fp32's own error too)",)
    strict = compare_runtimes(path, "ort", module=loaded.module, example_inputs=loaded.example_inputs,
                              tolerances=ToleranceTable(atol=1e-4, rtol=1e-3))
    assert {r.status for r in strict.records} == {"fail"} and strict.notes[0].startswith("--atol/--rtol as given")
    # the same default bounds without the float64 run: refused, so the floor is what passed them above
    with monkeypatch.context() as patched:
        patched.setattr("portable.runners.torch_runners.float64_reference",
                        lambda *a, **k: (None, "default tolerances only (switched off)"))
        bare = compare_runtimes(path, "ort", module=loaded.module, example_inputs=loaded.example_inputs)
    assert {r.status for r in bare.records} == {"fail"} and bare.notes == ("default tolerances only (switched off)",)
    with torch.no_grad():
        loaded.module.body[0].weight.mul_(1.01)
    wrong = compare_runtimes(path, "ort", module=loaded.module, example_inputs=loaded.example_inputs)
    assert {r.status for r in wrong.records} == {"fail"}
