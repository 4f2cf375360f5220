"""Shared by the benchmarks: measuring a command in a fresh process, medians, the JSON they print.

Every figure is a command run in its own child process: wall time from the parent's
clock, peak RSS from that one child's ``rusage`` (``os.wait4``), which on Linux includes
the file pages the child touched through a memory map. Machines here are shared and
noisy, so each benchmark interleaves its commands, reports medians, and holds ratios
(not absolute times) to its goals.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PORTABLE", "PYTHON", "ROOT", "Run", "emit", "fixture", "machine", "measure", "median_of", "versions"]

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
PORTABLE = str(Path(sys.executable).with_name("portable"))


@dataclass(frozen=True)
class Run:
    """One command, run once: wall seconds, peak RSS bytes, exit code."""

    wall_s: float
    peak_rss_bytes: int
    returncode: int


def measure(argv: list[str], *, env: dict[str, str] | None = None, logs: Path | None = None) -> Run:
    """Run ``argv`` in a fresh child process; its own peak RSS comes from ``wait4``. With ``logs`` (a path
    stem), its stdout and stderr go to ``LOGS.out`` and ``LOGS.err`` and any exit code is the caller's to read."""
    if logs is not None:
        with open(f"{logs}.out", "w") as out, open(f"{logs}.err", "w") as err:
            return _measured(argv, env, out, err)
    return _measured(argv, env, subprocess.DEVNULL, subprocess.PIPE)


def _measured(argv: list[str], env: dict[str, str] | None, stdout: Any, stderr: Any) -> Run:
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=stdout, stderr=stderr, env=env, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if stderr is not subprocess.PIPE:
        return Run(wall_s=wall, peak_rss_bytes=usage.ru_maxrss * 1024, returncode=child.returncode)
    if child.returncode not in (0, 1):  # 1: the model has error findings, which is fine here
        error = child.stderr.read().decode(errors="replace")[-2000:] if child.stderr else ""
        raise RuntimeError(f"{argv[:3]} exited {child.returncode}: {error}")
    if child.stderr:
        child.stderr.close()
    return Run(wall_s=wall, peak_rss_bytes=usage.ru_maxrss * 1024, returncode=child.returncode)


def median_of(runs: list[Run]) -> dict[str, Any]:
    return {
        "wall_s": round(statistics.median(r.wall_s for r in runs), 4),
        "peak_rss_mb": round(statistics.median(r.peak_rss_bytes for r in runs) / 2**20, 1),
        "runs": len(runs),
        "wall_s_all": [round(r.wall_s, 4) for r in runs],
    }


def versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("portable-onnx", "onnx", "onnx-ir", "onnxscript", "protobuf", "numpy", "onnxruntime", "torch", *extra):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine() -> dict[str, Any]:
    import psutil

    return {
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def emit(result: dict[str, Any]) -> None:
    """A benchmark's whole output: one JSON object on stdout (bench/run.py collects it)."""
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


def fixture(name: str) -> Any:
    """``fixtures/models/NAME.py`` when there is one, else ``fixtures/NAME.py``, as a module (not a package)."""
    import importlib.util

    path = ROOT / "fixtures" / "models" / f"{name}.py"
    path = path if path.is_file() else ROOT / "fixtures" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"portable_{name}_fixture", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
