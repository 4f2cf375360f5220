"""A corpus no one here wrote: `portable validate`, `portable validate --ort` and, when installed,
`polygraphy check lint`, one model per command, on the model files of ``onnx/backend/test/data``.

The corpus is what the onnx wheel carries (the zoo models of ``light/``, which ``real/`` points
at, ``simple/``, ``pytorch-converted/``, ``pytorch-operator/``: about 150 files, IR 3 to 7,
opsets 6 to 12) or any folder given with ``--corpus``. Each model is run by each tool in a
fresh process, interleaved model by model, so start-up counts as a CI job pays it; the ratios
per model (portable / polygraphy, --ort / plain) are summarised by their median. A second,
in-process figure isolates what PORT014 costs: ``validate(path)`` against
``validate(path, Policy(ort=True))`` on every model of the corpus, interleaved, medians of
``--reps`` runs, no start-up in it.

``--sample N`` takes N models evenly spaced in sorted order (deterministic); 0 takes all.

Usage: ``python bench/validate_corpus_bench.py [--corpus DIR] [--sample 40] [--reps 3] [--timeout 120]``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PORTABLE, ROOT, emit, machine, versions  # noqa: E402

__all__ = ["corpus", "main", "run", "sample"]


def default_corpus() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def corpus(folder: Path) -> list[Path]:
    """Every ``*.onnx`` under ``folder``, sorted."""
    return sorted(folder.rglob("*.onnx"))


def sample(paths: list[Path], count: int) -> list[Path]:
    """``count`` paths evenly spaced over ``paths`` (all when count is 0 or more than there are)."""
    if count <= 0 or count >= len(paths):
        return paths
    step = len(paths) / count
    return [paths[int(i * step)] for i in range(count)]


def _timed(argv: list[str], timeout: float) -> dict[str, Any]:
    """One command in a fresh process: wall seconds and exit code, or a timeout."""
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"wall_s": None, "exit_code": None, "timed_out": True}
    return {"wall_s": round(time.perf_counter() - start, 4), "exit_code": done.returncode, "timed_out": False}


def _commands(model: Path) -> dict[str, list[str]]:
    commands = {"portable": [PORTABLE, "validate", str(model)],
                "portable --ort": [PORTABLE, "validate", "--ort", str(model)]}
    polygraphy = shutil.which("polygraphy", path=str(Path(sys.executable).parent)) or shutil.which("polygraphy")
    if polygraphy:
        commands["polygraphy"] = [polygraphy, "check", "lint", str(model)]
    return commands


def per_process(models: list[Path], root: Path, timeout: float) -> list[dict[str, Any]]:
    rows = []
    for model in models:
        times = {name: _timed(argv, timeout) for name, argv in _commands(model).items()}
        rows.append({"model": str(model.relative_to(root)), **times})
    return rows


def _ratio(rows: list[dict[str, Any]], top: str, bottom: str) -> dict[str, Any]:
    pairs = [(r[top]["wall_s"], r[bottom]["wall_s"]) for r in rows
             if top in r and bottom in r and r[top]["wall_s"] and r[bottom]["wall_s"]]
    ratios = [a / b for a, b in pairs]
    if not ratios:
        return {"median": None, "models": 0}
    return {"median": round(statistics.median(ratios), 3), "min": round(min(ratios), 3),
            "max": round(max(ratios), 3), "models": len(ratios)}


def in_process(models: list[Path], reps: int) -> dict[str, Any]:
    """Median ms per model of ``validate`` without and with PORT014, interleaved (order
    alternating between repetitions)."""
    from portable.policy import Policy
    from portable.validators import validate

    policies = {"plain": Policy(), "ort": Policy(ort=True)}
    for model in models[:3]:  # warm the imports (onnxruntime's included) before timing
        validate(model, policies["ort"])
    per_model: dict[str, list[float]] = {name: [] for name in policies}
    for model in models:
        samples: dict[str, list[float]] = {name: [] for name in policies}
        for rep in range(reps):
            for name, policy in (policies.items() if rep % 2 == 0 else reversed(policies.items())):
                start = time.perf_counter()
                validate(model, policy)
                samples[name].append(time.perf_counter() - start)
        for name in policies:
            per_model[name].append(statistics.median(samples[name]))
    plain, ort = per_model["plain"], per_model["ort"]
    return {"models": len(models), "reps": reps,
            "median_ms": {name: round(1000 * statistics.median(v), 2) for name, v in per_model.items()},
            "total_s": {name: round(sum(v), 3) for name, v in per_model.items()},
            "port014_median_ms_per_model": round(1000 * statistics.median(o - p for o, p in zip(ort, plain)), 2),
            "ort_over_plain_median": round(statistics.median(o / p for o, p in zip(ort, plain)), 3)}


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def run(folder: Path, count: int, reps: int, timeout: float) -> dict[str, Any]:
    every = corpus(folder)
    chosen = sample(every, count)
    rows = per_process(chosen, folder, timeout)
    tools = sorted({name for row in rows for name in row if name != "model"})
    return {
        "benchmark": "validate_corpus",
        "title": "portable validate vs polygraphy check lint, per model, on ONNX's backend test models",
        "corpus": {"folder": str(folder), "models": len(every), "sampled": len(chosen)},
        "tools": tools,
        "timeouts": {name: sum(1 for r in rows if r.get(name, {}).get("timed_out")) for name in tools},
        "ratio_portable_over_polygraphy": _ratio(rows, "portable", "polygraphy"),
        "ratio_portable_ort_over_polygraphy": _ratio(rows, "portable --ort", "polygraphy"),
        "ratio_ort_over_plain_per_process": _ratio(rows, "portable --ort", "portable"),
        "in_process": in_process(every, reps),
        "per_model": rows,
        "machine": machine(),
        "versions": {**versions(), "polygraphy": _version("polygraphy")},
        "met": None,  # no goal: figures to read
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="folder of .onnx files (default: onnx's test data)")
    parser.add_argument("--sample", type=int, default=40, help="models run per process (evenly spaced; 0: all)")
    parser.add_argument("--reps", type=int, default=3, help="in-process repetitions per model")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per command")
    args = parser.parse_args()
    emit(run(args.corpus or default_corpus(), args.sample, args.reps, args.timeout))


if __name__ == "__main__":
    main()
