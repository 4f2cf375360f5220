"""`portable quantize` on real CNNs (torchvision's code, the zoo's random weights): accuracy cost and
ONNX Runtime CPU speed-up, the issue-24 goals.

Per model (built as ``make zoo`` builds it: ``bench/zoo/weights.py`` redraws all-zero parameters
and sets BatchNorm's statistics from the example), exported by ``portable.export`` with a dynamic
batch, then ``portable.quantize`` with seeded calibration (64 samples) and 256 held-out samples,
once per configuration: the default (target cpu: uint8 activations, int8 weights per-tensor)
and ``--per-channel``. Each run's latency is quantize's own: float and int8 sessions side by
side at batch 8, warmed up until steady, timed round-robin, ONNX Runtime's spinning off.

Goals (issue 24): logits SQNR >= 25 dB, top-1 agreement >= 95 %, int8 p50 <= 0.6x float's.
Beside them, the float model's own sensitivity: its logits' SQNR when only its input is
perturbed by Gaussian noise at 40 dB (about what uint8 quantization of a standard-normal input
costs, 40.4 dB measured on the small CNN): a bound no 8-bit quantization of that input can beat.

Needs torchvision (``make zoo-venv``); without it the result says so. ``python
bench/quantize_bench.py [--models resnet50,mobilenet_v3_small] [--eval 256]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import emit, machine, versions  # noqa: E402

MODELS = ("resnet50", "mobilenet_v3_small", "mobilenet_v3_large")
CONFIGS = {"default": {}, "per-channel": {"per_channel": True}}
GOALS = {"min_sqnr_db": 25.0, "min_top1_agreement": 0.95, "max_latency_ratio": 0.6}
NOISE_DB = 40.0


def _export(name: str, folder: Path) -> Path:
    import portable
    from bench.zoo.models_vision import _torchvision
    from bench.zoo.weights import live_weights

    built = _torchvision(name)
    module = live_weights(built.module, built.args)
    path = folder / f"{name}.onnx"
    portable.export(module, built.args, path, input_names=built.names)
    return path


def sensitivity(path: Path, samples: int = 64, noise_db: float = NOISE_DB) -> dict[str, float]:
    """The float model's logits SQNR and top-1 agreement when only its input is perturbed at ``noise_db``."""
    from portable.quantization.accuracy import sqnr_db, top1_agreement
    from portable.quantization.speed import cpu_session

    session = cpu_session(path)
    name = session.get_inputs()[0].name
    rng = np.random.default_rng(7)
    clean, noisy = [], []
    for _ in range(samples // 8):
        x = rng.standard_normal((8, 3, 224, 224)).astype(np.float32)
        noise = rng.standard_normal(x.shape).astype(np.float32) * float(np.sqrt(np.mean(x**2))) * 10 ** (-noise_db / 20)
        clean.append(session.run(None, {name: x})[0])
        noisy.append(session.run(None, {name: (x + noise).astype(np.float32)})[0])
    c, n = np.concatenate(clean), np.concatenate(noisy)
    return {"input_sqnr_db": noise_db, "logits_sqnr_db": round(sqnr_db(c, n), 2),
            "top1_agreement": round(top1_agreement(c, n), 4),
            "logits_rms": round(float(np.sqrt(np.mean(c**2))), 4),
            "logits_std_over_samples": round(float(c.std(axis=0).mean()), 4)}


def quantize(path: Path, config: dict[str, Any], eval_samples: int) -> dict[str, Any]:
    import portable

    start = time.perf_counter()
    result = portable.quantize(path, path.with_suffix(f".{len(config)}.int8.onnx"), eval_samples=eval_samples,
                               force=True, **config)
    (logits,) = result.accuracy
    lat = result.latency
    figures = {"sqnr_db": round(logits.sqnr_db, 2), "max_abs": round(logits.max_abs, 4),
               "top1_agreement": logits.top1_agreement, "held_out": logits.samples,
               "latency_ratio_p50": round(lat.ratio_p50, 3),
               "latency_ratio_pipelined": round(lat.int8_pipelined_s / lat.float_pipelined_s, 3),
               "float_p50_ms": round(lat.float_stats.p50_s * 1e3, 2), "int8_p50_ms": round(lat.int8_stats.p50_s * 1e3, 2),
               "batch": lat.batch, "steady": lat.steady, "validates": portable.validate(result.path).ok,
               "worst_nodes": [n.to_dict() for n in result.worst_nodes[:3]],
               "seconds": round(time.perf_counter() - start, 1)}
    figures["goals_met"] = {"sqnr": figures["sqnr_db"] >= GOALS["min_sqnr_db"],
                            "top1": (logits.top1_agreement or 0.0) >= GOALS["min_top1_agreement"],
                            "latency": figures["latency_ratio_p50"] <= GOALS["max_latency_ratio"]}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS[:2]))
    parser.add_argument("--eval", type=int, default=256)
    options = parser.parse_args()
    if importlib.util.find_spec("torchvision") is None:
        emit({"benchmark": "quantize", "status": "skipped", "reason": "torchvision is not installed (make zoo-venv)"})
        return
    from bench.zoo.tvops import register_torchvision_ops

    register_torchvision_ops()
    models: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="quantize-bench-") as tmp:
        for name in options.models.split(","):
            path = _export(name, Path(tmp))
            models[name] = {"float_sensitivity": sensitivity(path),
                            **{c: quantize(path, kw, options.eval) for c, kw in CONFIGS.items()}}
    met = all(all(r["goals_met"].values()) for m in models.values() for c, r in m.items() if c in CONFIGS)
    emit({"benchmark": "quantize", "goals": GOALS, "models": models, "met": met, "machine": machine(),
          "versions": versions()})


if __name__ == "__main__":
    main()
