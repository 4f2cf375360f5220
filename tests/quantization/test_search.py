"""The precision search's trials: what they share is exact, and each is reported as it ends (issue 45 item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from portable.quantization.data import Samples
from portable.quantization.pipeline import quantize_file
from portable.quantization.settings import resolve_settings
from portable.quantization.steps import Reuse


def _tables(proto: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}


def test_a_trial_on_the_shared_passes_and_ranges_is_the_file_a_fresh_run_makes(cnn: Path, tmp_path: Path) -> None:
    samples = Samples({"x": np.random.default_rng(0).standard_normal((16, 3, 32, 32)).astype(np.float32)}, 8, "seeded")
    settings = resolve_settings()
    reuse = Reuse(tmp_path)
    quantize_file(cnn, settings, samples, reuse)  # the first trial: every node int8, computes what is shared
    assert reuse.calibration_cache.is_file() and reuse.get(settings) is not None
    node = next(n.name for n in onnx.load(str(cnn)).graph.node if n.op_type == "Conv")
    excluding = resolve_settings(exclude=[f"node:{node}"])
    shared, fresh = quantize_file(cnn, excluding, samples, reuse), quantize_file(cnn, excluding, samples)
    assert [n.op_type for n in shared.proto.graph.node] == [n.op_type for n in fresh.proto.graph.node]
    a, b = _tables(shared.proto), _tables(fresh.proto)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert reuse.get(resolve_settings(per_channel=False)) is None  # other settings: nothing shared


def test_each_trial_is_reported_on_stderr_and_nothing_when_quiet(cli, cnn: Path, tmp_path: Path) -> None:
    args = ("quantize", str(cnn), "-o", str(tmp_path / "q.onnx"), "--samples", "16", "--eval-samples", "16",
            "--min-sqnr", "200", "--search-limit", "2", "--no-latency", "--no-per-node")
    text = cli(*args)
    assert text.exit_code == 1, text.output  # 200 dB: out of reach
    assert "search: trial 1: every node int8: min-sqnr" in text.stderr and "(goal 200)" in text.stderr
    assert "search: trial 3 of 3: " in text.stderr and "best so far min-sqnr" in text.stderr
    assert "linear: logits, judged by top-1 agreement by the float model's confidence: [batch, 10] made by a " \
           "linear layer (Gemm)" in text.stdout and "confident band (" in text.stdout  # what judges it, and why
    quiet = cli(*args, "--format", "json")
    assert quiet.exit_code == 1 and "trial" not in quiet.stderr and json.loads(quiet.stdout)["precision_search"]
