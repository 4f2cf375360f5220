"""A small CNN exported once per session (the fixture models' ResNet-like network), and a quick timing."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fixtures/models/cnn.py exported by portable with a dynamic batch: x [batch, 3, 32, 32] -> [batch, 10]."""
    from portable.exporters.spec_export import export_spec

    path = tmp_path_factory.mktemp("quantize") / "cnn.onnx"
    export_spec(str(ROOT / "fixtures" / "models" / "cnn.py") + ":build", path)
    return path


@pytest.fixture(scope="session")
def quick():
    """Keyword arguments that keep a quantize run short: few samples, a short latency phase."""
    from portable.runners.timing import TimingConfig

    timing = TimingConfig(warmup_seconds=0.0, warmup_max_seconds=0.2, min_iterations=3, min_seconds=0.0, rounds=2)
    return {"samples": 16, "eval_samples": 32, "timing": timing}
