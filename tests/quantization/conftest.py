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
