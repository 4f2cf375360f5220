"""CUDA runs (marked ``gpu``; skipped where PyTorch sees no CUDA device)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from portable.cli import cli

MODELS_FILE = Path(__file__).resolve().with_name("runner_models.py")


def spec_of(name: str) -> str:
    """A SPEC for --reference: a callable in runner_models.py."""
    return f"{MODELS_FILE}:{name}"

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_compare_on_cuda_passes_with_cuda_events_and_cuda_memory(cnn_onnx: Path) -> None:
    result = CliRunner().invoke(cli, ["compare", str(cnn_onnx), "--reference", spec_of("cnn"), "--device", "cuda",
                                      "--batch", "1,8", "--format", "json", "-q", "--warmup-ms", "20",
                                      "--iterations", "5", "--duration-ms", "50"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["setup"]["device"] == "cuda" and data["setup"]["tf32"] is False
    torch_rows = [r for r in data["latency"] if r["runner"] in ("eager", "compiled")]
    assert torch_rows and all(r["timer"] == "cuda_events" and r["memory_kind"] == "cuda_max_memory_allocated"
                              and r["peak_memory_bytes"] > 0 for r in torch_rows)
    assert any("TF32 off" in n for n in data["notes"])


def test_perturbed_model_fails_on_cuda(cnn_scaled_onnx: Path) -> None:
    result = CliRunner().invoke(cli, ["compare", str(cnn_scaled_onnx), "--reference", spec_of("cnn"), "--device",
                                      "cuda", "--no-compile", "--no-latency", "-q"])
    assert result.exit_code == 1 and "parity: FAIL" in result.stdout
