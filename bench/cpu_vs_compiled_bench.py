"""ONNX Runtime CPU against compiled PyTorch on the CPU (issue 33's CPU equivalents): ResNet-50 and BERT-base,
portable's own files, each model and batch one ``portable compare`` (ORT CPU, eager and torch.compile'd PyTorch
timed round-robin in one process). The JSON summary goes to ``--out``.

    PYTHONPATH=/tmp/tv .venv/bin/python bench/cpu_vs_compiled_bench.py [--models resnet50,bert_base] \\
        [--batches 1,8] [--compile-mode default] [--work DIR] [--onnx NAME=FILE] [--out bench/results/cpu_vs_compiled.json]

The models are docs/gpu/models.py's builders (the SPECs of the GPU figures, docs/gpu/ortvc.md), so the CPU and
GPU rows are the same models: torchvision's ResNet-50 (random init, seed 0, 224x224) and BertModel with
bert-base-uncased's config (random init, seed 0, sequence 128, last_hidden_state). torchvision is not in
.venv: ``.venv/bin/python -m pip install --no-deps --target /tmp/tv torchvision==0.28.0`` and
``PYTHONPATH=/tmp/tv``. PyPI's torchvision is a CUDA build, so the SPECs below define ``torchvision::nms``
with a plain kernel first (bench/zoo/tvops.py) and then call docs/gpu/models.py's builder; compare loads them
as ``bench/cpu_vs_compiled_bench.py:resnet50`` and ``...:bert_base``.

Each file is exported by ``portable export SPEC -o FILE --batch dynamic --no-verify`` (the pipeline of
docs/gpu/models.py's export; compare is the proof), then each batch is one
``portable compare FILE --reference SPEC --device cpu --ep cpu --batch B --compile-mode MODE --format json``
with compare's default timing. The rows take compare's own fields: ``latency[].p50_s`` of the runners
``ort-cpu``, ``compiled`` and ``eager``, and ``parity[].passed`` of every pair at that batch.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench.zoo.tvops, when compare loads this file as a SPEC

MODELS = ("resnet50", "bert_base")
SELF = "bench/cpu_vs_compiled_bench.py"


# --- the SPECs (compare and export load these) -------------------------------------------------------------


def _gpu_models() -> Any:
    """docs/gpu/models.py, imported once (the builders of the GPU figures)."""
    name = "portable_gpu_models_for_cpu_bench"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "gpu" / "models.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[name]


def _torchvision_ready() -> None:
    """PyPI's CUDA torchvision beside the CPU torch: ``torchvision::nms`` with a plain kernel first (transformers
    imports torchvision too when it is importable)."""
    from bench.zoo.tvops import import_torchvision, register_torchvision_ops

    register_torchvision_ops()
    if importlib.util.find_spec("torchvision") is not None:
        import_torchvision()


def resnet50() -> Any:
    """docs/gpu/models.py:resnet50 (torchvision ResNet-50, random init, seed 0, 224x224)."""
    _torchvision_ready()
    return _gpu_models().resnet50()


def bert_base() -> Any:
    """docs/gpu/models.py:bert_base (BERT-base encoder, random init, seed 0, sequence 128)."""
    _torchvision_ready()
    return _gpu_models().bert_base()


# --- the run -----------------------------------------------------------------------------------------------


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--compile-mode", default="default", help="compare's --compile-mode (comma-separated)")
    parser.add_argument("--work", default=None, help="folder for the files and compare reports (default: a temp one)")
    parser.add_argument("--onnx", action="append", default=[], metavar="NAME=FILE", help="reuse an exported file")
    parser.add_argument("--timeout-s", type=float, default=1200.0, help="per export or compare")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "cpu_vs_compiled.json"))
    return parser.parse_args()


def _portable(argv: list[str], timeout: float) -> dict[str, Any]:
    """``portable ARGV`` in a child process (this interpreter, the repository root as cwd): exit code, seconds,
    stderr's tail."""
    command = [sys.executable, "-m", "portable", *argv]
    print("$ portable " + " ".join(argv), file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        code, err = done.returncode, done.stderr
    except subprocess.TimeoutExpired as exc:
        code, err = "timeout", (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
    seconds = round(time.perf_counter() - start, 1)
    print(f"  -> exit {code} in {seconds} s", file=sys.stderr, flush=True)
    return {"command": "portable " + " ".join(argv), "exit": code, "seconds": seconds, "stderr_tail": err[-1500:]}


def _compiled_name(mode: str) -> str:
    """compare's name for the torch.compile runner of ``mode`` (runners/api.py)."""
    return "compiled" if mode == "default" else f"compiled-{mode}"


def _p50_ms(report: dict[str, Any], runner: str, batch: int) -> float | None:
    for row in report.get("latency", []):
        if row.get("runner") == runner and row.get("batch") == batch and row.get("p50_s") is not None:
            return round(row["p50_s"] * 1e3, 3)
    return None


def _latency(report: dict[str, Any], runner: str, batch: int) -> dict[str, Any] | None:
    for row in report.get("latency", []):
        if row.get("runner") == runner and row.get("batch") == batch:
            keep = ("iterations", "rounds", "cv", "p90_s", "pipelined_s")
            return {k: row.get(k) for k in keep} | {"warmup_steady": (row.get("warmup") or {}).get("steady")}
    return None


def _row(name: str, batch: int, report: dict[str, Any], run: dict[str, Any], modes: list[str]) -> dict[str, Any]:
    pairs = [p for p in report.get("parity", []) if p.get("batch") == batch]
    ort, eager = _p50_ms(report, "ort-cpu", batch), _p50_ms(report, "eager", batch)
    compiled = {m: _p50_ms(report, _compiled_name(m), batch) for m in modes}
    best = min((v for v in compiled.values() if v is not None), default=None)
    max_abs = [o.get("max_abs") for p in pairs for o in p.get("outputs", []) if p.get("actual") == "ort-cpu"]
    return {
        "model": name,
        "batch": batch,
        "ort_p50_ms": ort,
        "compiled_p50_ms": best,
        "compiled_p50_ms_by_mode": compiled,
        "eager_p50_ms": eager,
        "ratio_ort_over_compiled": None if ort is None or not best else round(ort / best, 3),
        "ratio_ort_over_eager": None if ort is None or not eager else round(ort / eager, 3),
        "parity_passed": bool(pairs) and all(p.get("passed") for p in pairs),
        "parity_pairs": [f"{p.get('actual')} vs {p.get('expected')}: {'pass' if p.get('passed') else 'FAIL'}"
                         for p in pairs],
        "ort_max_abs": max((m for m in max_abs if m is not None), default=None),
        "compile_modes": modes,
        "precision": "fp32",
        "compare_exit": run["exit"],
        "compare_seconds": run["seconds"],
        "failures": report.get("failures", []),
        "timing_warnings": report.get("timing_warnings", []),
        "detail": {r: _latency(report, r, batch) for r in ("ort-cpu", *map(_compiled_name, modes), "eager")},
        "threads": (report.get("setup") or {}).get("threads"),
    }


def _common_versions() -> dict[str, str]:
    from bench._common import versions

    return versions(("transformers", "torchvision"))


def _machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu_model": model, "platform": platform.platform(),
            "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    args = _args()
    names = [n for n in args.models.split(",") if n]
    batches = [int(b) for b in args.batches.split(",") if b]
    modes = [m for m in args.compile_mode.split(",") if m]
    given = dict(item.split("=", 1) for item in args.onnx)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="cpu-vs-compiled-"))
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "benchmark": "cpu_vs_compiled", "issue": 33,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": _common_versions(), "machine": _machine(), "work": str(work),
        "timing": "compare's defaults (warm-up >= 200 ms until steady, at most 10 s; >= 10 iterations and >= 1 s)",
        "compile_modes": modes, "exports": [], "compares": [], "rows": [],
    }
    for name in names:
        spec = f"{SELF}:{name}"
        onnx = Path(given[name]) if name in given else work / f"{name}.onnx"
        if name not in given:
            run = _portable(["export", spec, "-o", str(onnx), "--batch", "dynamic", "--no-verify", "--force"],
                            args.timeout_s)
            result["exports"].append({"model": name, **run,
                                      "mib": round(onnx.stat().st_size / 2**20, 1) if onnx.exists() else None})
            if run["exit"] != 0 or not onnx.exists():
                result["rows"].append({"model": name, "error": "export failed", "exit": run["exit"]})
                continue
        for batch in batches:
            report_path = work / f"{name}-b{batch}.json"
            run = _portable(["compare", str(onnx), "--reference", spec, "--device", "cpu", "--ep", "cpu",
                             "--batch", str(batch), "--compile-mode", ",".join(modes),
                             "--format", "json", "-o", str(report_path), "-q"], args.timeout_s)
            result["compares"].append({"model": name, "batch": batch, **run, "report": str(report_path)})
            if not report_path.exists():
                result["rows"].append({"model": name, "batch": batch, "error": "no compare report", "exit": run["exit"]})
                continue
            report = json.loads(report_path.read_text())
            result["rows"].append(_row(name, batch, report, run, modes))
            result.setdefault("compare_setup", report.get("setup"))
            result.setdefault("compare_environment", report.get("environment"))
            _write(result, Path(args.out))  # after every compare: a partial run still leaves its rows
    result["machine"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    _write(result, Path(args.out))
    for row in result["rows"]:
        print(json.dumps({k: row.get(k) for k in ("model", "batch", "ort_p50_ms", "compiled_p50_ms", "eager_p50_ms",
                                                  "ratio_ort_over_compiled", "parity_passed", "error")}))


def _write(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
