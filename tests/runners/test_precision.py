"""fp16 and bf16 exports through ``portable compare`` (CPU): the low-precision defaults pass correct
exports and still fail gross errors; what they cannot see is in runners/tolerances.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

MODELS_FILE = Path(__file__).resolve().with_name("runner_models.py")
QUICK = ["--device", "cpu", "--no-latency", "--batch", "2,8", "--format", "json", "-q"]


@pytest.fixture
def compare_json(cli):
    """``compare_json(model, spec, *extra) -> (exit code, JSON report)``: ``portable compare`` through the cli fixture."""

    def run(model: Path, spec: str, *extra: str) -> tuple[int, dict]:
        result = cli("compare", str(model), "--reference", f"{MODELS_FILE}:{spec}", *QUICK, *extra)
        return result.exit_code, json.loads(result.stdout)

    return run


def test_fp16_export_passes_at_the_fp16_defaults(compare_json, encoder_fp16_onnx: Path) -> None:
    code, data = compare_json(encoder_fp16_onnx, "encoder_fp16", "--no-compile")
    assert code == 0, data["failures"]
    outputs = [o for p in data["parity"] for o in p["outputs"]]
    assert {o["dtype"] for o in outputs} == {"float16"}
    assert all(o["tolerance"] == {"atol": 1e-3, "rtol": 1e-2, "source": "default float16", "atol_rms": 2e-2,
                                   "figure": ""}
               for o in outputs)
    assert max(o["max_abs"] for o in outputs) > 1e-4  # real fp16 error, not a float32 run in disguise
    assert any(n.startswith("float16 outputs: the default tolerance adds") for n in data["notes"])


def test_fp16_changed_attribute_fails(compare_json, encoder_fp16_eps_onnx: Path) -> None:
    code, data = compare_json(encoder_fp16_eps_onnx, "encoder_fp16", "--no-compile")
    assert code == 1 and "ort-cpu vs eager (batch 2): add_102, mean" in data["failures"]


def test_fp16_defaults_catch_a_ten_percent_weight_but_not_one_percent(compare_json, cnn_fp16_onnx: Path,
                                                                       cnn_fp16_scaled: dict[float, Path]) -> None:
    one, ten = cnn_fp16_scaled[1.01], cnn_fp16_scaled[1.1]
    assert compare_json(cnn_fp16_onnx, "cnn_fp16", "--no-compile")[0] == 0
    assert compare_json(ten, "cnn_fp16", "--no-compile")[0] == 1
    # the documented limit: a 1 % change is inside fp16's noise; the float32 check catches it (test_compare)
    assert compare_json(one, "cnn_fp16", "--no-compile")[0] == 0


def test_bf16_ort_cpu_cannot_run_it_and_compiled_is_still_compared(compare_json, models: ModuleType, onnx_dir: Path) -> None:
    module, example = models.encoder_bf16()
    path = Path(models.export(module, example, str(onnx_dir / "encoder_bf16.onnx"), [{0: "batch", 1: "seq"}]))
    code, data = compare_json(path, "encoder_bf16")
    assert code == 3
    assert any(f.startswith("ort-cpu: ") and "NOT_IMPLEMENTED" in f for f in data["failures"])
    pair = next(p for p in data["parity"] if (p["actual"], p["expected"]) == ("compiled", "eager"))
    assert pair["passed"] and {o["dtype"] for o in pair["outputs"]} == {"bfloat16"}
    assert all(o["tolerance"]["source"] == "default bfloat16" for o in pair["outputs"])


def test_bf16_inputs_reach_ort_cpu_as_bfloat16(compare_json, models: ModuleType, onnx_dir: Path) -> None:
    """The runners share float32-drawn feeds with PyTorch; ONNX Runtime gets a bfloat16 input as bfloat16
    (through OrtValues: ``session.run`` takes no ml_dtypes array), so a bf16 graph it can run is compared."""
    module, example = models.widened_bf16()
    path = Path(models.export(module, example, str(onnx_dir / "widened_bf16.onnx"), [{0: "batch"}]))
    code, data = compare_json(path, "widened_bf16", "--no-compile")
    assert code == 0, data["failures"]
    pair = next(p for p in data["parity"] if p["actual"] == "ort-cpu")
    assert pair["passed"] and {o["dtype"] for o in pair["outputs"]} == {"bfloat16"}
    assert all(o["rms_expected"] > 0.5 for o in pair["outputs"])  # tanh * 3 of a normal: not degenerate
